#!/usr/bin/env python3
"""How much cache reuse a scheduling order can get out of the grid solver's dataflow.

A model of `crates/elite-grid/src/active.rs`, without a runtime: an L x L grid of patches in
Morton order, each coupled to its 8 neighbours and coloured 0..3 (x mod 2 + 2 (y mod 2)), so
neighbours differ. Patch p may run sweep k once every lower-coloured neighbour finished sweep k
and every higher-coloured one sweep k - 1, and once sweep k - LAG is complete on the whole grid
(the solver's gate). One processor runs the ready patches in an order:

  fifo    the oldest ready patch first (No Affinity's runqueue)
  vt      the patch whose last run ended most recently first (Virtual Time's key)
  lifo    the patch made ready most recently first
  index   the lowest patch in Morton order first

and a least-recently-used cache holds C patches. Printed: misses per patch-sweep (1.0: every
sweep of every patch reloads it; the first sweep always does). The real mesh is an adaptive
quadtree with patches of unequal shape, so the figures are the model's, not the solver's.

  python3 scripts/dataflow-reuse.py                 # the table of docs/benchmarks.md
  python3 scripts/dataflow-reuse.py 16 64 128 --lag 8
"""

import argparse
import heapq
from collections import OrderedDict

ORDERS = ("fifo", "vt", "lifo", "index")


def morton(x, y):
    code = 0
    for bit in range(16):
        code |= ((x >> bit) & 1) << (2 * bit) | ((y >> bit) & 1) << (2 * bit + 1)
    return code


def misses_per_sweep(side, capacity, order, lag=4, sweeps=40):
    cells = sorted(((x, y) for x in range(side) for y in range(side)), key=lambda c: morton(*c))
    index = {c: i for i, c in enumerate(cells)}
    n = len(cells)
    colour = [(x % 2) + 2 * (y % 2) for (x, y) in cells]
    near = [
        [index[(x + dx, y + dy)] for dx in (-1, 0, 1) for dy in (-1, 0, 1)
         if (dx, dy) != (0, 0) and (x + dx, y + dy) in index]
        for (x, y) in cells
    ]
    done = [0] * n  # the last sweep each patch finished
    at = {0: n}  # patches per last finished sweep
    complete = 0  # the last sweep every patch finished
    stamp = [0] * n
    queued = [False] * n

    def ready(p):
        k = done[p] + 1
        if k > sweeps or k - lag > complete:
            return False
        return all(done[q] >= (k if colour[q] < colour[p] else k - 1) for q in near[p])

    heap, pushes = [], 0

    def push(p):
        nonlocal pushes
        pushes += 1
        queued[p] = True
        key = {"fifo": pushes, "lifo": -pushes, "vt": (-stamp[p], pushes), "index": p}[order]
        heapq.heappush(heap, (key, p))

    for p in range(n):
        if ready(p):
            push(p)
    cache, misses, runs = OrderedDict(), 0, 0
    while heap:
        _, p = heapq.heappop(heap)
        queued[p] = False
        runs += 1
        if p in cache:
            cache.move_to_end(p)
        else:
            misses += 1
            cache[p] = True
            if len(cache) > capacity:
                cache.popitem(last=False)
        at[done[p]] -= 1
        done[p] += 1
        at[done[p]] = at.get(done[p], 0) + 1
        stamp[p] = runs
        gate_moved = False
        while at.get(complete, 0) == 0:
            complete += 1
            gate_moved = True
        for q in range(n) if gate_moved else near[p] + [p]:
            if not queued[q] and ready(q):
                push(q)
    assert all(d == sweeps for d in done), "a patch was left behind"
    return misses / runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("side", nargs="?", type=int, help="patches per side (default: 16 and 32)")
    parser.add_argument("capacity", nargs="*", type=int, help="cache size in patches")
    parser.add_argument("--lag", type=int, default=4, help="the gate's lag in sweeps (default 4)")
    args = parser.parse_args()
    if args.side is None:
        cases = [(16, c) for c in (32, 64, 128, 192)] + [(32, c) for c in (128, 256, 512)]
    else:
        cases = [(args.side, c) for c in (args.capacity or [args.side * args.side // 4])]
    print(f"{'patches':>8} {'cache':>6} {'share':>6} " + " ".join(f"{o:>6}" for o in ORDERS))
    for side, capacity in cases:
        row = [misses_per_sweep(side, capacity, o, lag=args.lag) for o in ORDERS]
        share = capacity / (side * side)
        print(f"{side * side:>8} {capacity:>6} {share:>6.2f} " + " ".join(f"{m:>6.3f}" for m in row))


if __name__ == "__main__":
    main()
