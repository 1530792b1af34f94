#!/usr/bin/env python3
"""AdmissionReview bodies for scripts/webhook-load.sh, one file per request class.

  reviews.py DIR REGISTRY      write DIR/<class>.body for every class of the mixed load

REGISTRY is HOST:PORT of the loopback registry holding demo/hello:v1 (present); the
`miss` class asks for demo/hello:absent (not pushed). The uid of every review starts with
its class name and a dash: the load scripts classify the answers by the echoed uid.
outage-template.body holds the image `__IMAGE__`, replaced per request by outage.lua.
"""

import json
import os
import sys


def container(name, image):
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def job(name, containers, kind="Job", api="batch/v1", init=()):
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "load", "labels": {"app": name}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "initContainers": list(init),
                    "containers": containers,
                },
            },
        },
    }


def review(uid, obj, group="batch", version="v1", resource="jobs"):
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": obj["metadata"]["name"],
            "namespace": "load",
            "operation": "CREATE",
            "userInfo": {"username": "load-test", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def dump(v):
    return json.dumps(v, separators=(",", ":")).encode()


def main():
    out, reg = sys.argv[1], sys.argv[2]
    present = f"{reg}/demo/hello:v1"
    absent = f"{reg}/demo/hello:absent"
    os.makedirs(out, exist_ok=True)
    bodies = {
        # valid Job, image present (verdict cached after the first request)
        "ok": dump(review("ok-1", job("ok", [container("main", present)]))),
        # the same Job through /mutate (init container injected: a JSON patch)
        "mut": dump(review("mut-1", job("mut", [container("main", present)]))),
        # valid Job, tag missing: denied (negative verdict cached 30 s, then looked up again)
        "miss": dump(review("miss-1", job("miss", [container("main", present), container("side", absent)]))),
        # a kind no table row knows: skipped, allowed
        "unk": dump(review("unk-1", job("unk", [container("main", absent)], kind="Widget", api="example.com/v1"),
                           group="example.com", resource="widgets")),
        # hundreds of containers (and init containers) in one template
        "huge": dump(review("huge-1", job(
            "huge",
            [container(f"c{i:03d}", present) for i in range(300)],
            init=[container(f"i{i:03d}", present) for i in range(100)],
        ))),
    }
    # Malformed input, several shapes: every one must be answered 400.
    good = bodies["ok"].decode()
    deep = "[" * 10_000 + "]" * 10_000
    malformed = {
        "bad-truncated": good[: len(good) // 2],
        "bad-garbage": "\x00\xff not json at all \x01",
        "bad-empty": "",
        "bad-wrongtype": '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":42}',
        "bad-deep": deep,
        "bad-trailing": good + "}}}",
        "bad-number": '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1e999999}}',
        "bad-utf8": good.replace("load-test", "\udcff").encode("utf-8", "surrogateescape").decode("latin-1"),
    }
    for name, text in malformed.items():
        bodies[name] = text.encode("latin-1", "replace") if isinstance(text, str) else text
    # Template for the outage load: __IMAGE__ is replaced per request.
    bodies["outage-template"] = dump(review("out-1", job("out", [container("main", "__IMAGE__")])))
    for name, body in bodies.items():
        with open(os.path.join(out, name + ".body"), "wb") as f:
            f.write(body)
    print(" ".join(sorted(bodies)))


if __name__ == "__main__":
    main()
