package quant

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// MinMax writes the minimum and maximum of x per group with the process's
// kernels; see MinMaxKernels.MinMax.
func MinMax(x []float32, g *Groups, checkFinite bool, mn, mx []float32) error {
	return MinMaxOp.Get().MinMax(x, g, checkFinite, mn, mx)
}

// MinMax writes the minimum and maximum of x's values per group into mn and
// mx (g.Count entries each). ±Inf are ordinary values; a group holding a
// NaN gets NaN in both (torch.aminmax). With checkFinite the first NaN or
// ±Inf (in flat order) is a ValueError instead. x must not be empty.
func (k *MinMaxKernels) MinMax(x []float32, g *Groups, checkFinite bool, mn, mx []float32) error {
	n := len(x)
	if n != g.N {
		return errs.Value("x has %d elements, the groups describe %d", n, g.N)
	}
	if n == 0 {
		return errs.Value("x must have at least one element")
	}
	if len(mn) != g.Count || len(mx) != g.Count {
		return errs.Value("mn and mx must have %d entries (%s), got %d and %d", g.Count, g.describe(), len(mn), len(mx))
	}
	bounds := chunkBounds(n)
	nc := len(bounds) - 1
	type part struct {
		g0       int       // first group (or period index) of lmn/lmx
		lmn, lmx []float32 // local results
		bad      int       // first non-finite flat index
	}
	parts := make([]part, nc)
	rowWise := g.rowWise()
	par.Run(bounds, func(ci, lo, hi int) {
		p := &parts[ci]
		p.bad = -1
		switch {
		case rowWise:
			per := g.period()
			p.lmn, p.lmx = filled(per, float32(math.Inf(1))), filled(per, float32(math.Inf(-1)))
			for q := lo; q < hi; {
				off := q % per
				e := min(hi, q+per-off)
				if r := k.Row(x[q:e], p.lmn[off:off+e-q], p.lmx[off:off+e-q]); r >= 0 && p.bad < 0 {
					p.bad = q + r
				}
				q = e
			}
			return
		case g.Axis >= 0:
			p.g0 = 0
			p.lmn, p.lmx = filled(g.Count, float32(math.Inf(1))), filled(g.Count, float32(math.Inf(-1)))
		default:
			p.g0 = g.Of(lo)
			cnt := g.Of(hi-1) - p.g0 + 1
			p.lmn, p.lmx = filled(cnt, float32(math.Inf(1))), filled(cnt, float32(math.Inf(-1)))
		}
		for q := lo; q < hi; {
			e := g.runEnd(q, hi)
			gi := g.Of(q) - p.g0
			a, b, nan, inf := k.Run(x[q:e])
			if nan >= 0 {
				a, b = float32(math.NaN()), float32(math.NaN())
			}
			p.lmn[gi], p.lmx[gi] = minNaN(p.lmn[gi], a), maxNaN(p.lmx[gi], b)
			if f := firstOf([]int{nan, inf}); f >= 0 && p.bad < 0 {
				p.bad = q + f
			}
			q = e
		}
	})
	bad := make([]int, nc)
	for i := range parts {
		bad[i] = parts[i].bad
	}
	if fb := firstOf(bad); checkFinite && fb >= 0 {
		return errs.Value("x contains a non-finite value (%v) at flat index %d; pass check_finite=False to reduce it anyway", x[fb], fb)
	}
	for i := range mn {
		mn[i], mx[i] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for _, p := range parts {
		for j := range p.lmn {
			gi := p.g0 + j
			if rowWise {
				gi = (j / g.Inner) % g.Dim
			}
			mn[gi], mx[gi] = minNaN(mn[gi], p.lmn[j]), maxNaN(mx[gi], p.lmx[j])
		}
	}
	return nil
}

func filled(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// minNaN and maxNaN are min and max with NaN propagating.
func minNaN(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return min(a, b)
}

func maxNaN(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	return max(a, b)
}

// Histogram adds the torch.histc counts of x into counts with the process's
// kernel; see HistogramKernel and histogram.
func Histogram(x []float32, lo, hi float32, absolute, checkFinite bool, counts []int64) error {
	return histogram(HistogramOp.Get(), x, lo, hi, absolute, checkFinite, counts)
}

// HistogramWith is Histogram with the kernel k (tests run every family).
func HistogramWith(k HistogramKernel, x []float32, lo, hi float32, absolute, checkFinite bool, counts []int64) error {
	return histogram(k, x, lo, hi, absolute, checkFinite, counts)
}

// histogram ADDS to counts (nbins = len(counts) >= 1 bins over [lo, hi],
// lo < hi finite, hi - lo finite in float32) the counts of x's values (|x| with absolute) as
// torch.histc(x, nbins, lo, hi) bins them. With checkFinite a NaN or ±Inf
// in x is a ValueError (counts unchanged); otherwise they are skipped like
// every value outside [lo, hi].
func histogram(k HistogramKernel, x []float32, lo, hi float32, absolute, checkFinite bool, counts []int64) error {
	if !qtensor.Finite(lo) || !qtensor.Finite(hi) || !(lo < hi) {
		return errs.Value("lo and hi must be finite with lo < hi, got lo=%v, hi=%v", lo, hi)
	}
	if !qtensor.Finite(hi - lo) {
		return errs.Value("hi - lo must be finite in float32 (the bin width), got lo=%v, hi=%v", lo, hi)
	}
	nb := len(counts)
	if nb == 0 {
		return errs.Value("counts must have at least one bin")
	}
	n := len(x)
	if n == 0 {
		return nil
	}
	bounds := chunkBounds(n)
	nc := len(bounds) - 1
	local := make([][]int64, nc)
	bad := make([]int, nc)
	par.Run(bounds, func(ci, a, b int) {
		local[ci] = make([]int64, nb)
		bad[ci] = -1
		if r := k(x[a:b], lo, hi, absolute, local[ci]); r >= 0 {
			bad[ci] = a + r
		}
	})
	if fb := firstOf(bad); checkFinite && fb >= 0 {
		return errs.Value("x contains a non-finite value (%v) at flat index %d; pass check_finite=False to skip such values", x[fb], fb)
	}
	for _, l := range local {
		for i, v := range l {
			counts[i] += v
		}
	}
	return nil
}
