package conv2d

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// interruptedCall runs Conv2D as a host call (par.Begin / End) with a
// SIGINT counted after delay, and returns the panic value, how long the
// call ran after the interrupt, and its error.
func interruptedCall(c *uint32, d Dims, x []float32, w Weights, out []float32, opt Options, delay time.Duration) (
	rec any, after time.Duration, err error) {
	par.Begin()
	defer par.End()
	var at atomic.Int64
	go func() {
		time.Sleep(delay)
		at.Store(time.Now().UnixNano())
		atomic.AddUint32(c, 1)
	}()
	defer func() {
		rec = recover()
		for at.Load() == 0 { // returned before the interrupt: wait for it
			time.Sleep(time.Millisecond)
		}
		after = time.Duration(time.Now().UnixNano() - at.Load())
	}()
	if delay == 0 {
		for at.Load() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	_, err = Conv2D(d, x, w, nil, out, opt)
	return
}

// TestInterrupt: a SIGINT (par's interrupt counter) stops a long call of
// every algorithm within a fraction of a second with par.ErrInterrupted,
// wherever it comes (before the call, during the weight's packing, during
// the kernel), and leaves nothing broken: the next calls with the same
// weight (whose layouts the interrupted calls may have been building) give
// the references' results.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("large convolutions")
	}
	keepThreads(t)
	_ = par.SetThreads(2)
	var counter uint32
	par.SetInterruptCounter(&counter)
	defer par.SetInterruptCounter(nil)
	rng := rand.New(rand.NewPCG(23, 23))
	k3 := func(n, c, h, o, groups, k int) Shape {
		return Shape{N: n, C: c, H: h, W: h, O: o, WC: c / groups, KH: k, KW: k, Groups: groups, StrideH: 1, StrideW: 1,
			PadT: k / 2, PadL: k / 2, PadB: k / 2, PadR: k / 2, DilH: 1, DilW: 1}
	}
	// Each big call runs well past the last interrupt delay, 30 ms, uninterrupted
	// (naive: minutes; the SIMD depthwise kernel needs the batch of 16).
	dense, dw := k3(8, 256, 56, 256, 1, 3), k3(16, 256, 112, 256, 256, 7)
	denseW := newCase(t, rng, dense, 0, false)
	dwW := newCase(t, rng, dw, 7, false)
	for _, c := range []struct {
		name string
		big  *testCase
		opt  Options
	}{
		{"naive", denseW, Options{Algo: Naive}},
		{"naive int8", denseW, Options{Algo: Naive, ActBits: 8}},
		{"im2col", denseW, Options{Algo: Im2col}},
		{"auto float32 (winograd)", denseW, Options{}},
		{"im2col int8 (implicit)", denseW, Options{Algo: Im2col, ActBits: 8}},
		{"direct", denseW, Options{Algo: Direct}},
		{"direct int8", denseW, Options{Algo: Direct, ActBits: 8}},
		{"lut", denseW, Options{Algo: LUT, ActBits: 8}},
		{"depthwise", dwW, Options{Algo: Direct}},
		{"depthwise int8", dwW, Options{Algo: Direct, ActBits: 8}},
	} {
		out := make([]float32, c.big.d.OutLen)
		for _, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 30 * time.Millisecond} {
			layoutCache.Clear() // so that the call packs the weight again
			what := fmt.Sprintf("%s, interrupt after %v", c.name, delay)
			done := make(chan string, 1)
			go func() {
				rec, after, err := interruptedCall(&counter, c.big.d, c.big.x, c.big.w, out, c.opt, delay)
				switch {
				case rec != par.ErrInterrupted:
					done <- fmt.Sprintf("%s: recovered %v (error %v), want par.ErrInterrupted", what, rec, err)
				case after > 250*time.Millisecond:
					done <- fmt.Sprintf("%s: stopped %v after the interrupt", what, after)
				default:
					done <- ""
				}
			}()
			select {
			case msg := <-done:
				if msg != "" {
					t.Fatal(msg)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: still running after 10 s", what)
			}
		}
		// The next calls, not interrupted, with the same weight on a small
		// input: the references' results.
		s := c.big.d.Shape
		s.N, s.H, s.W = 2, 5, 6
		small := newCase(t, rng, s, 0, false)
		small.w, small.q = c.big.w, c.big.q
		got := make([]float32, small.d.OutLen)
		for range 2 {
			if _, err := Conv2D(small.d, small.x, small.w, nil, got, c.opt); err != nil {
				t.Fatalf("%s: next call: %v", c.name, err)
			}
			if c.opt.ActBits == 8 {
				checkExact(t, c.name+" next call", got, ref8(small))
			} else {
				want, mag := ref64(small)
				checkF32(t, c.name+" next call", got, want, mag)
			}
		}
	}
}
