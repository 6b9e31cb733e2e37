// The workloads of the sync suite; see crates/elite-bench/src/suites/sync.rs for what each
// one measures and how it matches the elite workload of the same name.
package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("sync/ping_pong", syncPingPong)
	register("sync/mutex_contended", syncMutexContended)
	register("sync/sync_peak", syncPeak)
}

// syncPingPong: the main goroutine and a partner pass a counter back and forth n times
// through two unbuffered channels, each side adding one; the answer is the final counter
// (2n).
func syncPingPong(p params) (time.Duration, uint64) {
	ping := make(chan uint64)
	pong := make(chan uint64)
	go func() {
		for i := 0; i < p.n; i++ {
			pong <- (<-ping) + 1
		}
	}()
	var counter uint64
	start := time.Now()
	for i := 0; i < p.n; i++ {
		ping <- counter + 1
		counter = <-pong
	}
	return time.Since(start), counter
}

// syncMutexContended: p.threads goroutines each do n/threads times {lock, increment the
// shared counter, unlock, runtime.Gosched}; the answer is the counter.
func syncMutexContended(p params) (time.Duration, uint64) {
	iters := p.n / p.threads
	var mu sync.Mutex
	var counter uint64
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(p.threads)
	for t := 0; t < p.threads; t++ {
		go func() {
			for i := 0; i < iters; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return time.Since(start), counter
}

// syncPeak: p.threads goroutines in a ring, goroutine i owning channel i (capacity 1, the
// Go spelling of a semaphore); a token starts on every seedEvery-th channel; each goroutine
// n/threads times takes a token from its own channel and passes one to the next. The
// goroutines first wait at a start gate; once all have started running the clock starts and
// the gate opens. The clock stops when the last goroutine has taken its last token;
// goroutines that are done wait for that moment before they exit. The answer is the number
// of tokens taken.
func syncPeak(p params) (time.Duration, uint64) {
	iters := p.n / p.threads
	ring := make([]chan struct{}, p.threads)
	for i := range ring {
		ring[i] = make(chan struct{}, 1)
		if i%p.seedEvery == 0 {
			ring[i] <- struct{}{}
		}
	}
	counts := make([]uint64, p.threads)
	remaining := int64(p.threads)
	var end time.Time
	startGate := make(chan struct{})
	exitGate := make(chan struct{})
	var started, wg sync.WaitGroup
	started.Add(p.threads)
	wg.Add(p.threads)
	for t := 0; t < p.threads; t++ {
		go func(t int) {
			started.Done()
			<-startGate
			own, next := ring[t], ring[(t+1)%p.threads]
			var count uint64
			for i := 0; i < iters; i++ {
				<-own
				count++
				next <- struct{}{}
			}
			counts[t] = count
			if atomic.AddInt64(&remaining, -1) == 0 {
				end = time.Now()
				close(exitGate)
			} else {
				<-exitGate
			}
			wg.Done()
		}(t)
	}
	started.Wait()
	start := time.Now()
	close(startGate)
	wg.Wait()
	var total uint64
	for _, c := range counts {
		total += c
	}
	return end.Sub(start), total
}
