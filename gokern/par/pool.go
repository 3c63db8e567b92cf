package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The worker pool behind Run. Waking a parked thread costs tens to hundreds
// of microseconds on a VM (the idle vCPU has to be woken by the host: 18 us
// after 100 us idle, 54 us after 1 ms, up to 0.5 ms measured on the 2-vCPU
// dev box), more than a whole small convolution, and a convolution runs
// several parallel passes in a row. So the pool's workers stay: after a
// chunk a worker spins (polls for its next chunk) for spinFor before it
// parks, as OpenMP runtimes do, and Run's caller spins (without yielding:
// see spin) for its workers to finish. One Run at a time uses the pool
// (poolMu); a concurrent or nested Run starts goroutines instead.

// spinFor is how long a worker or a waiting caller polls before it blocks.
var spinFor = 200 * time.Microsecond

var (
	poolMu  sync.Mutex // held by the Run that uses workers
	workers []*worker  // grown under poolMu, never shrunk
)

// worker helps with the job posted to it.
type worker struct {
	task   atomic.Pointer[job]
	parked atomic.Bool
	wake   chan struct{} // one token: "look for a task"
}

// post has workers 0 .. n-1 help with j (poolMu held). A worker still busy
// with an earlier job's last chunk, or parked, takes it up when free: the
// chunks go to whoever is ready first.
func post(j *job, n int) {
	for len(workers) < n {
		w := &worker{wake: make(chan struct{}, 1)}
		workers = append(workers, w)
		go w.loop()
	}
	for _, w := range workers[:n] {
		w.task.Store(j)
		if w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default: // a token is already there
			}
		}
	}
}

func (w *worker) loop() {
	for {
		w.next().help()
	}
}

// next returns the worker's next task: polled for spinFor, then waited for
// parked. parked is set before the last check, and post sets the task
// before it reads parked, so a task is never missed; a stale token only
// costs one more check.
func (w *worker) next() *job {
	var t *job
	if spin(func() bool { t = w.task.Swap(nil); return t != nil }, true) {
		return t
	}
	for {
		w.parked.Store(true)
		if t := w.task.Swap(nil); t != nil {
			w.parked.Store(false)
			return t
		}
		<-w.wake
		w.parked.Store(false)
		if t := w.task.Swap(nil); t != nil {
			return t
		}
	}
}

// spin polls done until it returns true (then true) or spinFor has passed
// (then false). With yield it yields the processor every 64 polls, so that
// a spinning worker never holds back a goroutine with work (more threads
// than GOMAXPROCS). Run's caller spins without yielding: from C it is a cgo
// callback, locked to its thread, and Gosched on a locked goroutine hands
// its P to another thread and back (two futex round trips). Measured on the
// 2-vCPU Zen 4 dev box, 4096x4096 W1.58A8 GEMV at 2 threads, blocks of 50
// calls: 89-96 us per call without the yields, 94-245 us with (bimodal
// from block to block; 160 us is the 1-thread time). Its wait is short
// (the chunks left are running) and ends in a blocking wait after spinFor.
func spin(done func() bool, yield bool) bool {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if done() {
			return true
		}
		if i&63 == 63 {
			if time.Now().After(deadline) {
				return false
			}
			if yield {
				runtime.Gosched()
			}
		}
	}
}
