package par

import (
	"sync/atomic"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// Interrupting long calls. The host counts SIGINTs in a uint32 it owns (the
// bindings' C signal handler increments it; see SetInterruptCounter). A call
// from the host is bracketed by Begin and End. While calls are in flight, a
// change of the counter since the first of them began means "interrupted":
// Stopped turns true, kernels' unit loops return early, Run stops handing out
// chunks and, once every chunk taken has returned, panics with
// ErrInterrupted, which the bindings turn into the status KindInterrupted.
// Every call in flight stops, whatever thread made it: Python's wrapper
// runs a call again when its SIGINT handler did not raise (another thread,
// a handler that ignores the signal). Go code that never calls Begin (tests,
// benchmarks) is never interrupted.

var (
	counter  atomic.Pointer[uint32] // the host's SIGINT count, nil: none
	inflight atomic.Int32           // calls between Begin and End
	base     atomic.Uint32          // the count when the calls in flight began
)

// ErrInterrupted is the value Run panics with when the calls in flight were
// interrupted (errs.KindInterrupted).
var ErrInterrupted = errs.Interrupted("interrupted by SIGINT (KeyboardInterrupt)")

// SetInterruptCounter installs the host's SIGINT counter: memory that stays
// valid for the life of the process and that the host only increments
// (atomically or from a signal handler). nil removes it.
func SetInterruptCounter(p *uint32) { counter.Store(p) }

// Begin marks a call from the host in flight; End must follow. The first
// call of a busy period takes the counter's value as its base, so SIGINTs
// that came while nothing ran are forgotten.
func Begin() {
	if inflight.Add(1) == 1 {
		if p := counter.Load(); p != nil {
			base.Store(atomic.LoadUint32(p))
		}
	}
}

// End marks the end of a call that Begin started.
func End() { inflight.Add(-1) }

// Stopped reports whether the calls in flight were interrupted. Kernels poll
// it between units of work (each at most a few milliseconds) and return
// early when it is true; whoever called Run then sees Run panic with
// ErrInterrupted. It costs two atomic loads.
func Stopped() bool {
	p := counter.Load()
	return p != nil && inflight.Load() > 0 && atomic.LoadUint32(p) != base.Load()
}

// Check panics with ErrInterrupted when Stopped: for loops that run outside
// Run (a serial pass over a large tensor) and for the end of Run.
func Check() {
	if Stopped() {
		panic(ErrInterrupted)
	}
}
