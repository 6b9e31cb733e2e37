#!/usr/bin/env python3
"""Draws a trace of elite-rt's schedule (Trace Event JSON, `ELITE_TRACE=<path>` or
`RuntimeBuilder::trace`) as an SVG timeline: one lane per processor, a box per run of a ULT
(coloured by ULT, so a ULT that moves keeps its colour), idle and parked spans in grey, wake-ups as
arrows from the waker to the woken ULT's next run, steals as red marks, blocking calls' hand-offs
as blue ones.

    scripts/trace-svg.py TRACE.json OUT.svg [--start US] [--span US] [--title TEXT]

`--start` (microseconds from the trace's first run; default: the window in which the least busy
processor is busiest) and `--span` (default 2000) choose the window drawn. Only the standard
library is needed.
"""

import argparse
import hashlib
import json
import sys
from xml.sax.saxutils import escape

LANE, GAP, LEFT, TOP, RIGHT = 34, 16, 110, 64, 20


def colour(ult):
    h = int(hashlib.md5(str(ult).encode()).hexdigest()[:6], 16)
    return "hsl(%d,%d%%,%d%%)" % (h % 360, 55 + (h >> 9) % 30, 45 + (h >> 14) % 20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--start", type=float, help="window start, microseconds from the trace's start")
    ap.add_argument("--span", type=float, default=2000.0, help="window length in microseconds")
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()

    with open(a.trace) as f:
        trace = json.load(f)
    evs = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and e.get("name") == "thread_name"}
    procs = sorted(t for t, n in names.items() if n.startswith("processor "))
    if not procs:
        sys.exit("no processor tracks in %s" % a.trace)
    runs = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "run"]
    if not runs:
        sys.exit("no runs in %s" % a.trace)
    t0 = min(e["ts"] for e in runs)
    start = a.start
    if start is None:
        # The window in which the least busy processor is busiest (in steps of a tenth of it).
        step = a.span / 10
        t1 = max(e["ts"] + e["dur"] for e in runs)
        bins = int((t1 - t0) / step) + 1
        busy = {tid: [0.0] * bins for tid in procs}
        for e in runs:
            if e["tid"] in busy:
                busy[e["tid"]][int((e["ts"] - t0) / step)] += e["dur"]
        best, start = -1.0, 0.0
        for i in range(max(1, bins - 9)):
            least = min(sum(busy[tid][i:i + 10]) for tid in procs)
            if least > best:
                best, start = least, i * step
    lo, hi = t0 + start, t0 + start + a.span
    plot_w = a.width - LEFT - RIGHT
    height = TOP + len(procs) * (LANE + GAP) + 64

    def x(ts):
        return LEFT + (min(max(ts, lo), hi) - lo) / (hi - lo) * plot_w

    def lane_y(tid):
        return TOP + procs.index(tid) * (LANE + GAP)

    out = []
    w = out.append
    w('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
      % (a.width, height))
    w('<defs><marker id="arrow" viewBox="0 0 6 6" refX="6" refY="3" markerWidth="6" markerHeight="6" '
      'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#333"/></marker></defs>')
    w('<rect width="100%" height="100%" fill="white"/>')
    title = a.title or "elite-rt trace: %s" % a.trace
    w('<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>' % (LEFT, escape(title)))
    w('<text x="%d" y="38" fill="#555">%.0f µs from %.0f µs after the first run; boxes: runs of ULTs '
      '(colour = ULT), grey: idle (light) and parked (dark); arrows: wake-ups; red: steals; '
      'blue: blocking calls</text>' % (LEFT, a.span, start))
    for tid in procs:
        y = lane_y(tid)
        w('<text x="8" y="%d">%s</text>' % (y + LANE / 2 + 4, escape(names[tid])))
        w('<rect x="%d" y="%d" width="%d" height="%d" fill="#f7f7f7"/>' % (LEFT, y, plot_w, LANE))

    def visible(e):
        return e["ts"] <= hi and e["ts"] + e.get("dur", 0) >= lo and e.get("tid") in procs

    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "idle" and visible(e):
            y = lane_y(e["tid"])
            fill = "#bbbbbb" if e["name"] == "parked" else "#e2e2e2"
            w('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"><title>%s %.1f µs</title></rect>'
              % (x(e["ts"]), y + LANE * 0.3, max(x(e["ts"] + e["dur"]) - x(e["ts"]), 0.5), LANE * 0.4, fill,
                 e["name"], e["dur"]))
    for e in runs:
        if visible(e):
            y = lane_y(e["tid"])
            x0, x1 = x(e["ts"]), x(e["ts"] + e["dur"])
            w('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="#222" stroke-width="0.3">'
              '<title>%s: %.2f µs, ends: %s</title></rect>'
              % (x0, y + 2, max(x1 - x0, 0.6), LANE - 4, colour(e["args"]["ult"]), escape(e["name"]), e["dur"],
                 e["args"].get("end", "")))
            if x1 - x0 > 48:
                w('<text x="%.2f" y="%d" font-size="10" fill="white">%s</text>'
                  % (x0 + 3, y + LANE / 2 + 4, escape(e["name"])[:int((x1 - x0) / 6)]))
    # Wake-up arrows: a flow's start and end.
    starts = {e["id"]: e for e in evs if e.get("ph") == "s" and e.get("cat") == "wake"}
    arrows = 0
    for e in evs:
        if e.get("ph") == "f" and e.get("cat") == "wake" and e["id"] in starts:
            s = starts[e["id"]]
            if lo <= s["ts"] <= hi and lo <= e["ts"] <= hi and s["tid"] in procs and e["tid"] in procs:
                arrows += 1
                x0, x1 = x(s["ts"]), x(e["ts"])
                if s["tid"] == e["tid"]:
                    # On its own lane: an arc above it.
                    y = lane_y(s["tid"]) + 2
                    w('<path d="M%.2f,%d Q%.2f,%d %.2f,%d" fill="none" stroke="#333" stroke-width="0.5" '
                      'opacity="0.5" marker-end="url(#arrow)"/>' % (x0, y, (x0 + x1) / 2, y - 9, x1, y))
                    continue
                if s["tid"] < e["tid"]:
                    y0, y1 = lane_y(s["tid"]) + LANE, lane_y(e["tid"])
                else:
                    y0, y1 = lane_y(s["tid"]), lane_y(e["tid"]) + LANE
                w('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#000" stroke-width="0.9" '
                  'marker-end="url(#arrow)"/>' % (x0, y0, x1, y1))
    for e in evs:
        if e.get("ph") != "i" or e.get("tid") not in procs or not lo <= e["ts"] <= hi:
            continue
        y = lane_y(e["tid"])
        if e["name"] == "steal":
            w('<path d="M%.2f,%d l-4,-7 l8,0 z" fill="#d62728"><title>steal of ULT %s from processor %s</title>'
              '</path>' % (x(e["ts"]), y, e["args"]["ult"], e["args"]["from"]))
        elif e["name"] == "blocking call":
            w('<path d="M%.2f,%d l-4,7 l8,0 z" fill="#1f77b4"><title>blocking call of ULT %s: %s</title></path>'
              % (x(e["ts"]), y + LANE, e["args"]["ult"], e["args"]["processor"]))
    # Time axis.
    ay = TOP + len(procs) * (LANE + GAP) + 4
    w('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (LEFT, ay, LEFT + plot_w, ay))
    step = 10 ** max(0, len(str(int(a.span / 5))) - 1)
    while a.span / step > 10:
        step *= 2
    t = 0.0
    while t <= a.span + 1e-9:
        tx = LEFT + t / a.span * plot_w
        w('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#333"/>' % (tx, ay, tx, ay + 5))
        w('<text x="%.2f" y="%d" text-anchor="middle">%g µs</text>' % (tx, ay + 18, t))
        t += step
    shown = sum(1 for e in runs if visible(e))
    other = trace.get("otherData", {})
    w('<text x="%d" y="%d" fill="#555">%d runs, %d wake-up arrows in the window; %s events dropped in the '
      'whole trace</text>' % (LEFT, ay + 40, shown, arrows, other.get("dropped_events", "?")))
    w("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
