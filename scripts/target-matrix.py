#!/usr/bin/env python3
"""Compare the targets of several runs of the suites, for example on hosts of different kinds.

Each run is a directory of suite documents (`<suite>.json`, as `elite-bench <suite> --json`
writes them), given as LABEL=DIR. Two subcommands:

  targets   a Markdown table with one row per target line and one column per run: the line's
            median (the worst subject's where a line covers several, as `auto`'s two rows) and
            its verdict (`met`, `MISSED`; `?` where the run left it undecided at 95%). By
            default only the lines missed in some run or whose verdicts differ; `--all` prints
            every line. Lines are matched by suite, bench, processor count and the text before
            the first figure (the target's subject and baseline), in order of appearance, so
            runs of different builds compare as long as their targets read alike; a line one
            run lacks shows as `-`.
  ceiling   for `synthetic_1024` in `affinity.json`: what a scheduling order alone gains on the
            run's host (`order/reversed` over `order/fixed`, the plain loops without a runtime:
            a bound at 1 processor, a reference at 2, where the threads share the last level)
            beside the best affinity policy over No Affinity, each the median of ratios paired
            by round, at each processor count.

  python3 scripts/target-matrix.py targets f25=docs/data/2026-12-01/stop43-full now=docs/data/2026-12-01
  python3 scripts/target-matrix.py ceiling now=docs/data/2026-12-01
"""

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

SUITES = ("micro", "sync", "affinity", "grid", "blocking", "places", "cosched")

# The policies whose best is compared with No Affinity in `synthetic_1024` (its target's subjects).
POLICIES = ("elite/virtual-time", "elite/minimum-misses", "elite/reload-transient")


def run_arg(text):
    label, sep, path = text.partition("=")
    if not sep or not label or not path:
        raise argparse.ArgumentTypeError(f"expected LABEL=DIR, got {text!r}")
    if not Path(path).is_dir():
        raise argparse.ArgumentTypeError(f"{path!r} is not a directory")
    return label, Path(path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not a suite document: {e}")


def line_key(suite, target):
    """What identifies a target line across runs: its subject and baseline, not its figures."""
    text = target.get("text", "")
    head = re.split(r": | = ", text, maxsplit=1)[0]
    # Lines that lead with the subject's own figure ("elite 41.0 ns = ...") keep only its name.
    head = re.sub(r"^(elite(?: \(processors \d+\))?) [0-9.]+ \S+", r"\1", head)
    processors = (target.get("params") or {}).get("processors")
    return (suite, target.get("bench"), processors, head)


def figure(target):
    """The ratio that decides the line: the best subject's for a best-of target, else the one
    furthest on the wrong side of the bound (for a line over several subjects, such as `auto`'s
    two rows)."""
    subjects = [s for s in target.get("subjects") or [] if isinstance(s.get("median"), (int, float))]
    if target.get("best"):
        subjects = [s for s in subjects if s.get("system") == target["best"]]
    if subjects:
        at_most = (target.get("bound") or {}).get("kind") == "at_most"
        worst = max if at_most else min
        return f"{worst(s['median'] for s in subjects):.2f}x"
    found = re.search(r"= ([0-9.]+x)", target.get("text", ""))
    return found.group(1) if found else ""


def verdict(target):
    if not target.get("met"):
        word = "MISSED"
    else:
        word = "met"
    if target.get("certainty") == "undecided":
        word += "?"
    return f"{figure(target)} {word}".strip()


def targets(runs, show_all):
    rows = {}
    for label, directory in runs:
        for suite in SUITES:
            doc = load(directory / f"{suite}.json")
            if doc is None:
                continue
            seen = Counter()
            for target in doc.get("targets", []):
                key = line_key(suite, target)
                seen[key] += 1
                rows.setdefault(key + (seen[key],), {})[label] = target
    labels = [label for label, _ in runs]
    print("| suite | bench | p | line | " + " | ".join(labels) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in labels) + " |")
    for (suite, bench, processors, head, _), cells in rows.items():
        verdicts = {label: bool(t.get("met")) for label, t in cells.items()}
        if not show_all and len(cells) == len(labels) and all(verdicts.values()):
            continue
        shown = [verdict(cells[label]) if label in cells else "-" for label in labels]
        print(f"| {suite} | {bench} | {processors or ''} | {head} | " + " | ".join(shown) + " |")


def paired_median(numerator, denominator):
    n = min(len(numerator), len(denominator))
    if n == 0:
        return None
    return statistics.median(numerator[i] / denominator[i] for i in range(n))


def ceiling(runs):
    print("| run | p | order/reversed over order/fixed | best policy over no-affinity | policy |")
    print("| --- | --- | --- | --- | --- |")
    for label, directory in runs:
        doc = load(directory / "affinity.json")
        if doc is None:
            print(f"{label}: no affinity.json in {directory}", file=sys.stderr)
            continue
        rounds = {}
        for r in doc.get("results", []):
            if r.get("bench") == "synthetic_1024" and r.get("metric") == "ops_per_sec":
                p = r["params"].get("processors")
                rounds[(r["system"], p)] = r.get("rounds") or [r["median"]]
        for p in sorted({p for _, p in rounds}):
            order = paired_median(rounds.get(("order/reversed", p), []), rounds.get(("order/fixed", p), []))
            baseline = rounds.get(("elite/no-affinity", p), [])
            best = None
            for policy in POLICIES:
                ratio = paired_median(rounds.get((policy, p), []), baseline)
                if ratio is not None and (best is None or ratio > best[0]):
                    best = (ratio, policy)
            shown_order = f"{order:.3f}x" if order is not None else "-"
            shown_best = f"{best[0]:.3f}x" if best else "-"
            print(f"| {label} | {p} | {shown_order} | {shown_best} | {best[1] if best else '-'} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("targets", help="the target lines of each run, side by side")
    t.add_argument("runs", nargs="+", type=run_arg, metavar="LABEL=DIR")
    t.add_argument("--all", action="store_true", help="every line, not only those missed somewhere")
    c = sub.add_parser("ceiling", help="synthetic_1024: what ordering alone gains, beside the policies")
    c.add_argument("runs", nargs="+", type=run_arg, metavar="LABEL=DIR")
    args = parser.parse_args()
    if args.command == "targets":
        targets(args.runs, args.all)
    else:
        ceiling(args.runs)


if __name__ == "__main__":
    main()
