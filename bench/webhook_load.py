#!/usr/bin/env python3
"""AdmissionReview bodies and the cache fill for bench/webhook.sh.

  webhook_load.py review IMAGE...            print a Job CREATE AdmissionReview (one container per image)
  webhook_load.py fill URL CA N PER REGISTRY  POST N reviews of PER distinct (absent) images each,
                                             4 connections; prints the admissions that failed
"""

import http.client
import json
import ssl
import sys
import threading
import urllib.parse


def review(images, uid="00000000-0000-4000-8000-000000000001"):
    containers = [
        {
            "name": f"c{i}",
            "image": image,
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }
        for i, image in enumerate(images)
    ]
    job = {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": {"name": "bench", "namespace": "bench", "labels": {"app.kubernetes.io/name": "bench"}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "bench"}},
                "spec": {
                    "containers": containers,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "securityContext": {},
                    "schedulerName": "default-scheduler",
                },
            },
        },
    }
    gvk = {"group": "batch", "version": "v1", "kind": "Job"}
    gvr = {"group": "batch", "version": "v1", "resource": "jobs"}
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": "bench",
            "namespace": "bench",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:bench:deployer", "groups": ["system:authenticated"]},
            "object": job,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def fill(url, ca, n, per, registry):
    u = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca)
    failed = []
    lock = threading.Lock()
    todo = list(range(n))

    def worker():
        conn = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=60)
        while True:
            with lock:
                if not todo:
                    break
                i = todo.pop()
            images = [f"{registry}/bench/r{(i * per + j) % 50:02d}:fill-{i}-{j}" for j in range(per)]
            body = json.dumps(review(images, uid=f"00000000-0000-4000-8000-{i:012d}"))
            conn.request("POST", u.path or "/validate", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                with lock:
                    failed.append((i, resp.status, data[:200]))
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(len(failed))
    for f in failed[:5]:
        print(f, file=sys.stderr)


if __name__ == "__main__":
    if sys.argv[1] == "review":
        print(json.dumps(review(sys.argv[2:])))
    elif sys.argv[1] == "fill":
        fill(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)
