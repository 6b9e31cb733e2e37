// The workloads of the micro suite; see crates/elite-bench/src/suites/micro.rs for what
// each one measures and how it matches the elite workload of the same name.
package main

import (
	"runtime"
	"sync"
	"time"
)

func init() {
	register("micro/yield", microYield)
	register("micro/spawn_join", microSpawnJoin)
	register("micro/spawn_bulk", microSpawnBulk)
	register("micro/fib", microFib)
}

// microYield: the main goroutine calls runtime.Gosched n times; the answer is the count.
func microYield(p params) (time.Duration, uint64) {
	var count uint64
	start := time.Now()
	for i := 0; i < p.n; i++ {
		runtime.Gosched()
		count++
	}
	return time.Since(start), count
}

// microSpawnJoin: start one goroutine, wait for its value, n times; the answer is the sum.
func microSpawnJoin(p params) (time.Duration, uint64) {
	var sum uint64
	ch := make(chan uint64, 1)
	start := time.Now()
	for i := 0; i < p.n; i++ {
		go func(v uint64) {
			ch <- v
		}(uint64(i))
		sum += <-ch
	}
	return time.Since(start), sum
}

// microSpawnBulk: start n goroutines that each store their index, wait for all of them,
// and sum the slice; the answer is the sum.
func microSpawnBulk(p params) (time.Duration, uint64) {
	results := make([]uint64, p.n)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(p.n)
	for i := 0; i < p.n; i++ {
		go func(i int) {
			results[i] = uint64(i)
			wg.Done()
		}(i)
	}
	wg.Wait()
	var sum uint64
	for _, v := range results {
		sum += v
	}
	return time.Since(start), sum
}

func fibSeq(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fibSeq(n-1) + fibSeq(n-2)
}

// fibPar computes fib(n-1) in a new goroutine and fib(n-2) in this one, down to cutoff.
func fibPar(n, cutoff int) uint64 {
	if n <= cutoff {
		return fibSeq(n)
	}
	ch := make(chan uint64, 1)
	go func() {
		ch <- fibPar(n-1, cutoff)
	}()
	b := fibPar(n-2, cutoff)
	return <-ch + b
}

// microFib: n whole computations of fib(fibN); the answer is the sum of their values.
func microFib(p params) (time.Duration, uint64) {
	var sum uint64
	start := time.Now()
	for i := 0; i < p.n; i++ {
		sum += fibPar(p.fibN, p.cutoff)
	}
	return time.Since(start), sum
}
