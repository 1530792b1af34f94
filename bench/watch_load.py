#!/usr/bin/env python3
"""The cluster side of bench/watch.sh, straight on the kube-apiserver's REST API (kubectl
per object would take longer than the measurement).

There is no kubelet in the harness: every pod status here (Running, the image-pull
failure) is a simulated pods/status patch, as the kubelet would write it.

  watch_load.py populate NAMESPACES PODS_PER_NS PENDING_PER_NS
      namespaces bench-watch-NN, each with a ServiceAccount "default", a Job and
      PODS_PER_NS pods owned by it (bound to a node that doesn't exist); all but
      PENDING_PER_NS of them patched to phase Running. Prints `key<TAB>value` lines.
  watch_load.py stick NAMESPACES STUCK RATE
      patches STUCK Pending pods (spread over the namespaces) to ErrImagePull with the
      recorded missing-tag message, RATE per second, while a watch on the pods records
      when each one got the condition pullcheck.io/ImagePullFailed and a
      deletionTimestamp. Prints the latencies (patch answered -> seen) as key/value lines.

Env: PULLCHECK_CP_SERVER, PULLCHECK_CP_TOKEN, PULLCHECK_CP_CA (scripts/control-plane.sh).
"""
import http.client
import json
import os
import ssl
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SERVER = os.environ["PULLCHECK_CP_SERVER"].removeprefix("https://")
TOKEN = os.environ["PULLCHECK_CP_TOKEN"]
CTX = ssl.create_default_context(cafile=os.environ["PULLCHECK_CP_CA"])
HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = os.path.join(HERE, "..", "tests", "data", "watch", "kubelet-1.35.4-containerd-2.2.9",
                        "missing-tag.json")
CONDITION = "pullcheck.io/ImagePullFailed"
local = threading.local()


def conn():
    if not hasattr(local, "c"):
        local.c = http.client.HTTPSConnection(SERVER, context=CTX, timeout=60)
    return local.c


def call(method, path, body=None, content_type="application/json", ok=(200, 201)):
    for attempt in range(5):
        c = conn()
        try:
            c.request(method, path, body=None if body is None else json.dumps(body),
                      headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type})
            r = c.getresponse()
            data = r.read()
        except (http.client.HTTPException, OSError):
            local.c.close()
            del local.c
            time.sleep(0.2 * (attempt + 1))
            continue
        if r.status in ok:
            return json.loads(data)
        if r.status == 409 and method == "POST":  # already there (a re-run)
            return None
        if r.status in (429, 500, 503):
            time.sleep(0.2 * (attempt + 1))
            continue
        raise SystemExit(f"{method} {path}: HTTP {r.status}: {data[:300]!r}")
    raise SystemExit(f"{method} {path}: gave up")


def ns_name(i):
    return f"bench-watch-{i:02d}"


def pod_name(i):
    return f"work-{i:05d}"


def populate(namespaces, per_ns, pending_per_ns):
    rec = json.load(open(RECORDED))
    image = rec["image"]
    t0 = time.time()
    for n in range(namespaces):
        ns = ns_name(n)
        call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                            "metadata": {"name": ns}})
        call("POST", f"/api/v1/namespaces/{ns}/serviceaccounts",
             {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        call("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "work"},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": image}]}}}})
    uids = {ns_name(n): call("GET", f"/apis/batch/v1/namespaces/{ns_name(n)}/jobs/work")
            ["metadata"]["uid"] for n in range(namespaces)}

    def make(args):
        n, i = args
        ns = ns_name(n)
        name = pod_name(i)
        call("POST", f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "work", "batch.kubernetes.io/job-name": "work"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "work",
                                              "uid": uids[ns], "controller": True}]},
            "spec": {"nodeName": "bench-fake-node", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": image,
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
        if i >= pending_per_ns:
            call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status",
                 {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                 content_type="application/strategic-merge-patch+json")

    work = [(n, i) for n in range(namespaces) for i in range(per_ns)]
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(make, work))
    print(f"populate_seconds\t{time.time() - t0:.1f}")
    print(f"pods\t{len(work)}")
    print(f"pending\t{namespaces * pending_per_ns}")


class Seen(threading.Thread):
    """A watch on every pod: when each got the condition and the deletionTimestamp."""

    def __init__(self):
        super().__init__(daemon=True)
        self.condition = {}
        self.deleting = {}
        self.ready = threading.Event()
        lst = call("GET", "/api/v1/pods?limit=1")
        self.rv = lst["metadata"]["resourceVersion"]

    def run(self):
        c = http.client.HTTPSConnection(SERVER, context=CTX, timeout=600)
        c.request("GET", f"/api/v1/pods?watch=1&resourceVersion={self.rv}&fieldSelector=status.phase%3DPending",
                  headers={"Authorization": f"Bearer {TOKEN}"})
        r = c.getresponse()
        self.ready.set()
        while True:
            line = r.readline()
            if not line:
                return
            now = time.time()
            ev = json.loads(line)
            obj = ev.get("object", {})
            meta = obj.get("metadata", {})
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            conds = obj.get("status", {}).get("conditions") or []
            if key not in self.condition and any(c.get("type") == CONDITION for c in conds):
                self.condition[key] = now
            if key not in self.deleting and meta.get("deletionTimestamp"):
                self.deleting[key] = now


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def stick(namespaces, stuck, rate):
    rec = json.load(open(RECORDED))
    image = rec["image"]
    w = rec["waiting"][0]
    seen = Seen()
    seen.start()
    seen.ready.wait(10)
    patched = {}
    for k in range(stuck):
        ns = ns_name(k % namespaces)
        name = pod_name(k // namespaces)
        call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": {
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [{"name": "main", "image": image, "imageID": "", "ready": False,
                                   "started": False, "restartCount": 0,
                                   "state": {"waiting": {"reason": w["reason"], "message": w["message"]}}}]}},
             content_type="application/strategic-merge-patch+json")
        patched[f"{ns}/{name}"] = time.time()
        time.sleep(1 / rate)
    deadline = time.time() + 120
    while time.time() < deadline and len([k for k in patched if k in seen.deleting]) < stuck:
        time.sleep(0.1)
    to_cond = [seen.condition[k] - t for k, t in patched.items() if k in seen.condition]
    to_del = [seen.deleting[k] - t for k, t in patched.items() if k in seen.deleting]
    print(f"stuck\t{stuck}")
    print(f"stuck_rate_per_s\t{rate}")
    print(f"marked\t{len(to_cond)}")
    print(f"deleted\t{len(to_del)}")
    for label, vals in (("condition", to_cond), ("delete", to_del)):
        if vals:
            print(f"{label}_p50_s\t{pct(vals, 50):.3f}")
            print(f"{label}_p95_s\t{pct(vals, 95):.3f}")
            print(f"{label}_max_s\t{max(vals):.3f}")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "populate":
        populate(*map(int, args))
    elif cmd == "stick":
        stick(int(args[0]), int(args[1]), float(args[2]))
    else:
        raise SystemExit(f"unknown command {cmd}")
