#!/usr/bin/env python3
"""Draw docs/fail-fast-timeline.svg from docs/fail-fast-data/timeline.csv.

One lane per setting (no pullcheck, the init container, the webhook, the watch), all on the
same time axis: the CPU and memory the Job's pods hold on the node against seconds since
`kubectl create`, with the Job's terminal condition (or its absence) marked. The data comes
from the real-node harness tests/cluster/; this script needs only Python 3's standard library, and
its output depends on nothing but the CSV, so CI can re-render it and diff.

    scripts/chart.py [--data CSV] [--out SVG] [--check]

--check renders to memory and exits 1 when the SVG on disk differs (what .ci/run runs).
"""
import argparse
import csv
import os
import sys
from xml.sax.saxutils import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "fail-fast-data", "timeline.csv")
OUT = os.path.join(ROOT, "docs", "fail-fast-timeline.svg")

# (scenario id in the CSV, lane title). A lane whose scenario has no rows is drawn as an
# empty slot, so a setting not measured yet is visibly missing rather than silently absent.
LANES = [
    ("1", "No pullcheck"),
    ("2", "With the init container (pullcheck inject: checks the image before the app starts)"),
    ("7", "With the admission webhook (pullcheck webhook: rejects the Job at kubectl create)"),
    ("9a", "With the watch (pullcheck watch: deletes the plain Job's stuck pod, no inject)"),
]

W = 800
X0, X1 = 78, 772  # plot area
LANE_H = 100
BAND_H = 24  # one band for CPU, one for memory
TOP = 96
FILL = "#d9534f"
FILL_OPACITY = "0.55"
INK = "#222"
GREY = "#666"
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def read(path):
    rows = {}
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    for r in csv.DictReader(lines):
        rows.setdefault(r["scenario"], []).append(
            (float(r["t"]), int(float(r["cpu_m"])), int(float(r["mem_mi"])), r["event"])
        )
    for v in rows.values():
        v.sort(key=lambda x: x[0])
    return rows


def cpu_text(m):
    return f"{m / 1000:g} CPU" if m >= 100 else f"{m}m CPU"


def mem_text(mi):
    return f"{mi / 1024:g} GiB" if mi >= 1024 else f"{mi} MiB"


def fmt(x):
    return f"{x:.1f}"


def story(rows):
    """What the lane says in words, from its rows; and the marker (t, label) if any."""
    if not rows:
        return "not measured yet: the runtime watch is still being built", None
    peak_c = max(r[1] for r in rows)
    peak_m = max(r[2] for r in rows)
    held_from = next((r[0] for r in rows if r[1] > 0), None)
    released = None
    if held_from is not None:
        released = next((r[0] for r in rows if r[0] > held_from and r[1] == 0), None)
    terminal = next((r for r in rows if r[3].startswith("job ")), None)
    rejected = next((r for r in rows if r[3].startswith("rejected")), None)
    end = next((r for r in rows if r[3].startswith("window end")), None)
    if rejected and peak_c == 0:
        return (
            f"rejected when kubectl creates it: no pod is ever created, nothing is reserved",
            (rejected[0], f"Job rejected at {fmt(rejected[0])} s"),
        )
    held = f"{cpu_text(peak_c)} / {mem_text(peak_m)}"
    if terminal and released is not None:
        return (
            f"{held} held for {fmt(released - held_from)} s: pullcheck exits 11 (image not found), "
            f"the pod fails and frees it at {fmt(released)} s",
            (terminal[0], f"Job {terminal[3][4:]} at {fmt(terminal[0])} s"),
        )
    if end:
        waits = sorted({w for r in rows for w in ("ErrImagePull", "ImagePullBackOff") if w in r[3]})
        why = f" while the pod loops {' / '.join(waits)}" if waits else ""
        return (
            f"{held} held{why}: the Job never fails on its own",
            (end[0], f"still active at {end[0]:g} s, the end of the measurement \u2192"),
        )
    return f"{held} at peak", (terminal[0], f"Job {terminal[3][4:]}") if terminal else None


def render(data):
    data = {sid: data.get(sid, []) for sid, _ in LANES}
    tmax = max((r[0] for v in data.values() for r in v), default=60.0)
    tmax = max(20, int(-(-tmax // 20) * 20))  # round up to the tick step
    cmax = max((r[1] for v in data.values() for r in v), default=1000) or 1000
    mmax = max((r[2] for v in data.values() for r in v), default=1024) or 1024

    def x(t):
        return X0 + (X1 - X0) * t / tmax

    h = TOP + LANE_H * len(LANES) + 44
    o = []
    o.append(
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{h}' viewBox='0 0 {W} {h}' {FONT}>"
    )
    o.append(f"<rect width='{W}' height='{h}' fill='white'/>")
    o.append(
        f"<text x='16' y='28' font-size='18' font-weight='bold' fill='{INK}'>"
        "A Job whose image tag does not exist: what it holds on the node</text>"
    )
    o.append(
        f"<text x='16' y='48' font-size='12.5' fill='{GREY}'>"
        f"Requests of the Job's pods on the node ({cpu_text(cmax)} / {mem_text(mmax)}) "
        "against seconds since kubectl create, measured on one node</text>"
    )
    # legend
    o.append(
        f"<rect x='16' y='60' width='14' height='10' fill='{FILL}' fill-opacity='{FILL_OPACITY}'/>"
    )
    o.append(
        f"<text x='36' y='69' font-size='12' fill='{INK}'>held: the scheduler can't give it (or GPUs it asks for) to another pod</text>"
    )
    o.append(f"<line x1='462' y1='59' x2='462' y2='72' stroke='{INK}' stroke-width='2'/>")
    o.append(f"<text x='468' y='69' font-size='12' fill='{INK}'>the Job ends (Failed or rejected); \u2192 still running</text>")

    for i, (sid, title) in enumerate(LANES):
        rows = data.get(sid, [])
        y = TOP + i * LANE_H
        text, marker = story(rows)
        o.append(f"<text x='16' y='{y + 4}' font-size='14' font-weight='bold' fill='{INK}'>{escape(title)}</text>")
        for b, (label, idx, top) in enumerate((("CPU", 1, cmax), ("memory", 2, mmax))):
            by = y + 12 + b * (BAND_H + 4)
            o.append(f"<text x='{X0 - 6}' y='{by + BAND_H - 8}' font-size='11' fill='{GREY}' text-anchor='end'>{label}</text>")
            o.append(
                f"<rect x='{X0}' y='{by}' width='{X1 - X0}' height='{BAND_H}' fill='#f4f4f4'"
                + (" stroke='#bbb' stroke-dasharray='4 3'" if not rows else "")
                + "/>"
            )
            if not rows:
                continue
            # step area: each row's value holds until the next row
            pts = [f"{x(rows[0][0]):.1f},{by + BAND_H}"]
            for j, r in enumerate(rows):
                v = by + BAND_H - BAND_H * r[idx] / top
                pts.append(f"{x(r[0]):.1f},{v:.1f}")
                nxt = rows[j + 1][0] if j + 1 < len(rows) else r[0]
                pts.append(f"{x(nxt):.1f},{v:.1f}")
            pts.append(f"{x(rows[-1][0]):.1f},{by + BAND_H}")
            o.append(
                f"<polygon points='{' '.join(pts)}' fill='{FILL}' fill-opacity='{FILL_OPACITY}'/>"
            )
        band_bottom = y + 12 + 2 * BAND_H + 4
        if marker:
            mx = x(marker[0])
            o.append(
                f"<line x1='{mx:.1f}' y1='{y + 8}' x2='{mx:.1f}' y2='{band_bottom + 2}' stroke='{INK}' stroke-width='2'/>"
            )
            # the label sits in the CPU band, on the side of the line with room for it
            anchor = "end" if mx > (X0 + X1) / 2 else "start"
            dx = -6 if anchor == "end" else 6
            o.append(
                f"<text x='{mx + dx:.1f}' y='{y + 12 + BAND_H - 8}' font-size='12' font-weight='bold' "
                f"fill='{INK}' text-anchor='{anchor}'>{escape(marker[1])}</text>"
            )
        o.append(f"<text x='{X0}' y='{band_bottom + 16}' font-size='12' fill='{INK}'>{escape(text)}</text>")

    # time axis
    ay = TOP + LANE_H * len(LANES) - 4
    o.append(f"<line x1='{X0}' y1='{ay}' x2='{X1}' y2='{ay}' stroke='{INK}'/>")
    for t in range(0, tmax + 1, 20):
        tx = x(t)
        o.append(f"<line x1='{tx:.1f}' y1='{ay}' x2='{tx:.1f}' y2='{ay + 5}' stroke='{INK}'/>")
        o.append(f"<text x='{tx:.1f}' y='{ay + 18}' font-size='11' fill='{INK}' text-anchor='middle'>{t}</text>")
    o.append(
        f"<text x='{(X0 + X1) / 2:.1f}' y='{ay + 36}' font-size='12' fill='{INK}' text-anchor='middle'>"
        "seconds since kubectl create</text>"
    )
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true", help="exit 1 if --out differs from a fresh render")
    a = ap.parse_args()
    svg = render(read(a.data))
    if a.check:
        try:
            with open(a.out) as f:
                same = f.read() == svg
        except FileNotFoundError:
            same = False
        if not same:
            print(f"chart: {a.out} is not what {a.data} renders to; run scripts/chart.py", file=sys.stderr)
            return 1
        return 0
    with open(a.out, "w") as f:
        f.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
