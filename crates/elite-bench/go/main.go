// Command elite-bench-go is the Go peer of the elite benchmark command.
//
// The Rust side (crates/elite-bench/src/peers/go.rs) builds it once per invocation and
// runs it once per repetition, so that Go is interleaved with the other systems. Each run
// sets GOMAXPROCS, runs the workload -warmup times untimed, then -reps times timed, and
// prints one line per timed repetition:
//
//	ns_per_op=<float> answer=<integer>
//
// The workloads of each suite live in one file (micro.go, ...) and register themselves in
// the workloads table from an init function.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"
)

// params are the workload parameters given on the command line.
type params struct {
	n      int // operations (or whole computations) per timed pass
	procs  int // GOMAXPROCS
	cutoff int // fib: below this argument, recurse sequentially
	fibN   int // fib: the argument

	threads   int // sync: goroutines taking part (n is the total over all of them)
	seedEvery int // sync_peak: one token starts on every seedEvery-th channel of the ring

	group int // affinity: goroutines per synchronization group
	ws    int // affinity: bytes of each goroutine's working set
}

// workload runs one pass and returns the time taken by the operations and the answer.
type workload func(p params) (time.Duration, uint64)

// workloads maps "suite/bench" to its workload.
var workloads = map[string]workload{}

func register(name string, w workload) {
	workloads[name] = w
}

func main() {
	suite := flag.String("suite", "micro", "suite the bench belongs to")
	bench := flag.String("bench", "", "bench to run")
	n := flag.Int("n", 1000, "operations per timed pass")
	reps := flag.Int("reps", 1, "timed passes, one output line each")
	warmup := flag.Int("warmup", 1, "untimed passes before the timed ones")
	procs := flag.Int("procs", runtime.NumCPU(), "GOMAXPROCS")
	cutoff := flag.Int("cutoff", 10, "fib: sequential below this argument")
	fibN := flag.Int("fib", 30, "fib: the argument")
	threads := flag.Int("threads", 1, "sync: goroutines taking part; n is their total operations")
	seedEvery := flag.Int("seed_every", 4, "sync_peak: a token starts on every seed_every-th channel")
	group := flag.Int("group", 64, "affinity: goroutines per synchronization group")
	ws := flag.Int("ws", 65536, "affinity: bytes of each goroutine's working set (a multiple of 64)")
	flag.Parse()

	key := *suite + "/" + *bench
	w, ok := workloads[key]
	if !ok {
		names := make([]string, 0, len(workloads))
		for k := range workloads {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "unknown bench %q; valid: %v\n", key, names)
		os.Exit(2)
	}
	if *n <= 0 || *reps <= 0 || *warmup < 0 || *procs <= 0 || *threads <= 0 || *seedEvery <= 0 || *group <= 0 || *ws < 64 {
		fmt.Fprintln(os.Stderr, "-n, -reps, -procs, -threads, -seed_every and -group must be positive, -ws at least 64, -warmup not negative")
		os.Exit(2)
	}
	if *ws%64 != 0 {
		fmt.Fprintln(os.Stderr, "-ws must be a multiple of 64")
		os.Exit(2)
	}
	if *n%*threads != 0 {
		fmt.Fprintln(os.Stderr, "-n must be a multiple of -threads")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*procs)
	p := params{n: *n, procs: *procs, cutoff: *cutoff, fibN: *fibN, threads: *threads, seedEvery: *seedEvery, group: *group, ws: *ws}
	for i := 0; i < *warmup; i++ {
		w(p)
	}
	for i := 0; i < *reps; i++ {
		elapsed, answer := w(p)
		nsPerOp := float64(elapsed.Nanoseconds()) / float64(p.n)
		fmt.Printf("ns_per_op=%g answer=%d\n", nsPerOp, answer)
	}
}
