package gemm

import "time"

// PeakRates are one core's rates, in G operations a second (a multiply-add
// counts 2), for the instruction mix of each path's kernels in the family
// in use: register-only loops of independent chains (peak_amd64.s), an
// upper bound the kernels are measured against. Zero (and no mix) where
// no such loop is built: the generic kernels.
type PeakRates struct {
	F32, I8       float64
	F32Mix, I8Mix string
}

// peakLoop is one of the generated loops: run(n) does n iterations of ops
// operations.
type peakLoop struct {
	mix string
	ops float64
	run func(n int)
}

// measurePeak times l over at least 5 ms, best of three.
func measurePeak(l peakLoop) float64 {
	const iters = 1 << 12
	best := 0.0
	for range 3 {
		n, t0 := 0, time.Now()
		for time.Since(t0) < 5*time.Millisecond {
			l.run(iters)
			n += iters
		}
		best = max(best, l.ops*float64(n)/time.Since(t0).Seconds()/1e9)
	}
	return best
}

// Peak measures ks's PeakRates on the calling goroutine (about 30 ms).
func (ks *Kernels) Peak() PeakRates {
	f32, i8 := peakLoops(ks)
	var r PeakRates
	if f32.run != nil {
		r.F32, r.F32Mix = measurePeak(f32), f32.mix
	}
	if i8.run != nil {
		r.I8, r.I8Mix = measurePeak(i8), i8.mix
	}
	return r
}
