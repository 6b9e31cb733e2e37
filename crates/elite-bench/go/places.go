// The workloads of the places suite that Go runs; see crates/elite-bench/src/suites/places.rs
// for what they measure. Go is the locality-ignorant peer of cache_stress: the same goroutines,
// arrays and passes as the elite ULTs, placed by Go's scheduler.
package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("places/cache_stress", placesCacheStress)
}

// stressArray returns `len` pseudo-random words from `seed` (xorshift64, the low 32 bits of each
// state; the same sequence as stress_array on the Rust side).
func stressArray(len int, seed uint64) []uint32 {
	a := make([]uint32, len)
	x := seed*0x9E3779B97F4A7C15 | 1
	for i := range a {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		a[i] = uint32(x)
	}
	return a
}

// stressPass adds and multiplies every element of `a` (32-bit wrapping arithmetic, odd factors)
// and returns the sum in the high half and the product in the low half.
//
//go:noinline
func stressPass(a []uint32) uint64 {
	var sum uint32
	prod := uint32(1)
	for _, v := range a {
		sum += v
		prod *= v | 1
	}
	return uint64(sum)<<32 | uint64(prod)
}

// The two arrays, built once per process (the warm-up and timed passes share them).
var stressArrays [2][]uint32

// placesCacheStress: p.threads goroutines, even ones on array 0 and odd ones on array 1 (each of
// p.ws bytes), each making n/threads passes over its array with a runtime.Gosched between two
// passes (the elite ULTs yield there). The answer is the wrapping sum of every pass's result.
func placesCacheStress(p params) (time.Duration, uint64) {
	passes := p.n / p.threads
	if stressArrays[0] == nil {
		for k := range stressArrays {
			stressArrays[k] = stressArray(p.ws/4, uint64(k)+1)
		}
	}
	var total atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(p.threads)
	start := time.Now()
	for i := 0; i < p.threads; i++ {
		go func(a []uint32) {
			var sum uint64
			for r := 0; r < passes; r++ {
				sum += stressPass(a)
				runtime.Gosched()
			}
			total.Add(sum)
			wg.Done()
		}(stressArrays[i%2])
	}
	wg.Wait()
	return time.Since(start), total.Load()
}
