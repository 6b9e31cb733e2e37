#!/usr/bin/env python3
"""Markdown tables from elite-bench JSON documents (`elite-bench <suite> --json FILE`).

    scripts/bench-tables.py FILE.json...

One table per document: a row per bench, metric and processor count, a column per system, each
cell the median with (min-max) over the runs. The machine line comes from the document. Used to
write docs/benchmarks.md from the data rather than by hand.
"""
import json
import sys


def fmt(x):
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e9:
        return f"{x / 1e9:.3g} G"
    if a >= 1e6:
        return f"{x / 1e6:.3g} M"
    if a >= 1e4:
        return f"{x / 1e3:.3g} k"
    if a >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def table(doc):
    m = doc["machine"]
    l2 = m.get("l2_bytes")
    l3 = m.get("l3_bytes")
    out = [
        f"Suite `{doc['suite']}` on {m.get('cpu_model', '?')}, {m.get('cpus', '?')} CPUs"
        + (f", L2 {l2 >> 10} KiB" if l2 else "")
        + (f", L3 {l3 >> 20} MiB" if l3 else "")
        + f", kernel {m.get('kernel', '?')}, PMU {'yes' if m.get('pmu') else 'no'}.",
        "",
    ]
    rows = [r for r in doc["results"] if r.get("ok")]
    systems = []
    for r in rows:
        if r["system"] not in systems:
            systems.append(r["system"])
    # Params (besides processors) that tell apart rows of one bench, metric and system (a regime,
    # a prefetch flag) name the row too.
    varying = {}
    for r in rows:
        for name, value in r["params"].items():
            seen = varying.setdefault((r["bench"], r["metric"], r["system"], name), set())
            seen.add(json.dumps(value))
    def label(r):
        extra = [
            f"{n}={v}"
            for n, v in sorted(r["params"].items())
            if n != "processors" and len(varying[(r["bench"], r["metric"], r["system"], n)]) > 1
        ]
        return r["bench"] + (f" ({', '.join(extra)})" if extra else "")
    keys = []
    cells = {}
    for r in rows:
        k = (label(r), r["metric"], r["params"].get("processors", 1))
        if k not in keys:
            keys.append(k)
        cells[(k, r["system"])] = r
    out.append("| bench | metric | procs | " + " | ".join(systems) + " |")
    out.append("| --- | --- | --- | " + " | ".join("---" for _ in systems) + " |")
    for k in keys:
        line = [f"`{k[0]}`", k[1], str(k[2])]
        for s in systems:
            r = cells.get((k, s))
            if r is None:
                line.append("")
            elif r["runs"] > 1 and r["min"] != r["max"]:
                line.append(f"{fmt(r['median'])} ({fmt(r['min'])}-{fmt(r['max'])})")
            else:
                line.append(fmt(r["median"]))
        out.append("| " + " | ".join(line) + " |")
    failed = [r for r in doc["results"] if not r.get("ok")]
    if failed:
        out.append("")
        out.append("Failed rows: " + ", ".join(f"{r['bench']} {r['system']}" for r in failed))
    return "\n".join(out)


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for p in paths:
        with open(p) as f:
            print(table(json.load(f)))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
