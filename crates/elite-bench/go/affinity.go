// The workloads of the affinity suite; see crates/elite-bench/src/suites/affinity.rs for what
// they measure. Go is the locality-unaware peer: the same goroutines, working sets and
// synchronization protocol as the elite ULTs, scheduled by Go's runtime.
package main

import (
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("affinity/synthetic_1024", affinitySweeps)
	register("affinity/no_locality", affinitySweeps)
}

// line is one cache line of a working set; its first word is the index of the next line of
// the set's cycle.
type line [16]uint32

// newWorkingSet returns `lines` lines holding one random cycle through all of them, from
// `seed` (Sattolo's algorithm, as on the Rust side).
func newWorkingSet(lines int, seed uint64) []line {
	order := make([]uint32, lines)
	for i := range order {
		order[i] = uint32(i)
	}
	x := seed*0x9E3779B97F4A7C15 | 1
	for i := lines - 1; i >= 1; i-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i))
		order[i], order[j] = order[j], order[i]
	}
	set := make([]line, lines)
	for k, next := range order {
		set[k][0] = next
	}
	return set
}

// sweep walks the cycle once around from line 0 (dependent loads) and returns the sum of the
// indices visited.
//
//go:noinline
func sweep(set []line) uint64 {
	at := uint32(0)
	var sum uint64
	for range set {
		at = set[at][0]
		sum += uint64(at)
	}
	return sum
}

// workingSets are built once per process (the warm-up and timed passes share them, as the
// Rust side shares them between its two passes).
var workingSets [][]line

// affinitySweeps: p.threads goroutines in groups of p.group each loop n/threads times {sweep
// their working set of p.ws bytes; synchronize with the group: the last to arrive releases the
// others in index order, each on its own capacity-1 channel, and goes on; the others wait on
// their channel}. The answer is the sum of all sweeps.
func affinitySweeps(p params) (time.Duration, uint64) {
	iters := p.n / p.threads
	lines := p.ws / 64
	if workingSets == nil {
		workingSets = make([][]line, p.threads)
		for i := range workingSets {
			workingSets[i] = newWorkingSet(lines, uint64(i)+1)
		}
	}
	released := make([]chan struct{}, p.threads)
	for i := range released {
		released[i] = make(chan struct{}, 1)
	}
	groups := (p.threads + p.group - 1) / p.group // the last one takes what is left
	arrived := make([]atomic.Int64, groups)
	var total atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(p.threads)
	start := time.Now()
	for i := 0; i < p.threads; i++ {
		go func(i int) {
			g, first := i/p.group, (i/p.group)*p.group
			end := min(first+p.group, p.threads)
			var sum uint64
			for r := 0; r < iters; r++ {
				sum += sweep(workingSets[i])
				if arrived[g].Add(1) == int64(end-first) {
					arrived[g].Store(0)
					for k := first; k < end; k++ {
						if k != i {
							released[k] <- struct{}{}
						}
					}
				} else {
					<-released[i]
				}
			}
			total.Add(sum)
			wg.Done()
		}(i)
	}
	wg.Wait()
	return time.Since(start), total.Load()
}
