#!/usr/bin/env python3
"""Polls the pods scripts/cluster/watch-messages.sh created and writes one JSON file per
scenario: the waiting states the container went through (each distinct reason and message,
in order, with the seconds since the poll started) and the pod's Events.

usage: watch-capture.py NAMESPACE SCENARIOS_FILE OUTDIR KUBELET_VERSION CONTAINERD_VERSION
"""
import json
import subprocess
import sys
import time

ns, scenarios_file, out, kubelet_v, containerd_v = sys.argv[1:6]
scenarios = {}
for line in open(scenarios_file):
    name, image, secret, what = line.rstrip("\n").split("|")[:4]
    scenarios[name] = {"image": image, "pull_secret": secret or None, "what": what}

def kubectl_json(*args):
    return json.loads(subprocess.check_output(["kubectl", "-n", ns, *args, "-o", "json"]))

t0 = time.monotonic()
seen = {name: [] for name in scenarios}
deadline = t0 + 150
while time.monotonic() < deadline:
    now = round(time.monotonic() - t0, 2)
    for pod in kubectl_json("get", "pods")["items"]:
        name = pod["metadata"]["name"]
        for cs in pod.get("status", {}).get("containerStatuses", []):
            waiting = cs.get("state", {}).get("waiting")
            if not waiting or "message" not in waiting:
                continue
            state = {"reason": waiting["reason"], "message": waiting["message"]}
            if all(s["reason"] != state["reason"] or s["message"] != state["message"] for s in seen[name]):
                seen[name].append({**state, "seconds": now})
    # done once every pod went ErrImagePull → ImagePullBackOff, or stopped at a reason the
    # kubelet does not retry
    def done(states):
        reasons = [s["reason"] for s in states]
        final = {"InvalidImageName", "ErrImageNeverPull"}
        return bool(final & set(reasons)) or ("ImagePullBackOff" in reasons and "ErrImagePull" in reasons)
    if all(done(s) for s in seen.values()):
        break
    time.sleep(0.25)

for name, meta in scenarios.items():
    events = kubectl_json("get", "events", "--field-selector", f"involvedObject.name={name}")["items"]
    events.sort(key=lambda e: (e.get("firstTimestamp") or e.get("eventTime") or "", e["metadata"]["name"]))
    record = {
        "scenario": name,
        "what": meta["what"],
        "image": meta["image"],
        "pull_secret": meta["pull_secret"],
        "recorded_with": {"kubelet": kubelet_v, "containerd": containerd_v},
        "waiting": seen[name],
        "events": [
            {"type": e["type"], "reason": e["reason"], "message": e["message"], "count": e.get("count", 1)}
            for e in events
        ],
    }
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"{name}: {[s['reason'] for s in seen[name]]}", file=sys.stderr)
