package ternary

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// quantizeInterrupted runs Quantize as a host call (par.Begin/End) with a
// SIGINT counter that is bumped after delay (0: before the call starts) and
// reports whether the call stopped with par.ErrInterrupted.
func quantizeInterrupted(t *testing.T, q *Quantizer, x []float32, bs int, m Method, delay time.Duration) (stopped bool) {
	t.Helper()
	var c uint32
	par.SetInterruptCounter(&c)
	defer par.SetInterruptCounter(nil)
	par.Begin()
	defer par.End()
	if delay == 0 {
		atomic.AddUint32(&c, 1)
	} else {
		tm := time.AfterFunc(delay, func() { atomic.AddUint32(&c, 1) })
		defer tm.Stop()
	}
	defer func() {
		r := recover()
		if r != nil && r != par.ErrInterrupted {
			t.Fatalf("panic %v, want par.ErrInterrupted", r)
		}
		stopped = r == par.ErrInterrupted
	}()
	packed := make([]byte, PackedLen(len(x)))
	scales := make([]float32, NumBlocks(len(x), bs))
	if err := q.Quantize(x, bs, m, true, packed, scales); err != nil {
		t.Fatal(err)
	}
	return false
}

// TestQuantizeInterrupt: every path of Quantize (fused blocks, two passes,
// one scale in one or two passes; each family) stops on an interrupt, and
// the next call gives the same bytes as before.
func TestQuantizeInterrupt(t *testing.T) {
	defer par.SetThreads(par.Threads())
	r := rand.New(rand.NewPCG(7, 13))
	x := make([]float32, 1<<21+77)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	tests := []struct {
		name string
		bs   int
		m    Method
	}{
		{"fused blocks", 256, AbsMean},
		{"two passes, odd blocks", 96, AbsMax},
		{"one scale absmean", 0, AbsMean},
		{"one scale absmax", 0, AbsMax},
	}
	for _, fam := range []string{"", "all"} {
		q, _ := QuantizeOp.Select(cpu.ParseDisable(fam))
		for _, tc := range tests {
			for _, th := range []int{1, 3} {
				par.SetThreads(th)
				want := make([]byte, PackedLen(len(x)))
				ws := make([]float32, NumBlocks(len(x), tc.bs))
				if err := q.Quantize(x, tc.bs, tc.m, true, want, ws); err != nil {
					t.Fatal(err)
				}
				if !quantizeInterrupted(t, q, x, tc.bs, tc.m, 0) {
					t.Errorf("disable=%q %s threads=%d: not interrupted", fam, tc.name, th)
				}
				got := make([]byte, len(want))
				gs := make([]float32, len(ws))
				if err := q.Quantize(x, tc.bs, tc.m, true, got, gs); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || !slices.Equal(gs, ws) {
					t.Errorf("disable=%q %s threads=%d: the call after an interrupt differs", fam, tc.name, th)
				}
			}
		}
	}
}

// TestQuantizeInterruptMidway: a signal that arrives during a long
// single-threaded generic call stops it before it ends (the loops check
// between pieces, not only par.Run between chunks).
func TestQuantizeInterruptMidway(t *testing.T) {
	if testing.Short() {
		t.Skip("long call")
	}
	defer par.SetThreads(par.Threads())
	q, _ := QuantizeOp.Select(cpu.ParseDisable("all"))
	par.SetThreads(1)
	x := make([]float32, 1<<25)
	for i := range x {
		x[i] = float32(i%1000) - 500
	}
	for _, bs := range []int{0, 96, 1024} {
		t0 := time.Now()
		full := make([]byte, PackedLen(len(x)))
		if err := q.Quantize(x, bs, AbsMean, true, full, make([]float32, NumBlocks(len(x), bs))); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		t0 = time.Now()
		stopped := quantizeInterrupted(t, q, x, bs, AbsMean, d/10)
		if took := time.Since(t0); !stopped || took > d/4+5*time.Millisecond {
			t.Errorf("block_size %d: stopped=%v after %v (an uninterrupted call takes %v)", bs, stopped, took, d)
		}
	}
}
