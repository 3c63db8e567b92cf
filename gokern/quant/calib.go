package quant

import (
	"math"

	"gonum.org/v1/gonum/floats"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The histogram calibrators of NVIDIA's pytorch-quantization
// (calib/histogram.py), over an |x| histogram whose bin i is
// [i*w, (i+1)*w): edge i is float64(i)*w. Everything is float64. Sums are
// numpy's pairwise sums (pairwiseSum) and the KL term is scipy's rel_entr
// (p*log(p/q)), so a float64 NumPy/scipy reference gives the same
// divergences up to the last bit of log.

// CalibMethod selects the calibrator; the numbers are those of the C ABI.
type CalibMethod int32

// The calibrators.
const (
	CalibPercentile CalibMethod = 0
	CalibEntropy    CalibMethod = 1
	CalibMSE        CalibMethod = 2
)

// CalibSpec is a calibrator's settings.
type CalibSpec struct {
	Method     CalibMethod
	NumBits    int     // 8
	Unsigned   bool    // quantize to [0, 2^bits) (entropy: 2^bits chunks; MSE: bound 2^bits-1)
	StartBin   int     // entropy and MSE: the first candidate (128)
	Percentile float64 // percentile: in [0, 100]
	BinWidth   float64 // w: finite, > 0
}

// Calibrate returns amax for the histogram counts (see the methods).
func Calibrate(counts []int64, s *CalibSpec) (float64, error) {
	nb := len(counts)
	if nb == 0 {
		return 0, errs.Value("counts must have at least one bin")
	}
	if !(s.BinWidth > 0) || math.IsInf(s.BinWidth, 0) {
		return 0, errs.Value("bin_width must be finite and > 0, got %v", s.BinWidth)
	}
	var total int64
	for i, c := range counts {
		if c < 0 {
			return 0, errs.Value("counts[%d] must be non-negative, got %d", i, c)
		}
		total += c
	}
	if total == 0 {
		return 0, errs.Value("counts are all zero: the calibrator has seen no values")
	}
	switch s.Method {
	case CalibPercentile:
		if !(s.Percentile >= 0 && s.Percentile <= 100) {
			return 0, errs.Value("percentile must be in [0, 100], got %v", s.Percentile)
		}
		return percentileAmax(counts, total, s.Percentile, s.BinWidth), nil
	case CalibEntropy, CalibMSE:
		if s.NumBits < 2 || s.NumBits > 16 {
			return 0, errs.Value("num_bits must be in [2, 16], got %d", s.NumBits)
		}
		if s.Method == CalibEntropy {
			if nb < 2 || s.StartBin < 1 || s.StartBin > nb {
				return 0, errs.Value("start_bin must be in [1, %d] (the number of bins) and there must be at least 2 bins, got start_bin %d with %d bins", nb, s.StartBin, nb)
			}
			return entropyAmax(counts, s.NumBits, s.Unsigned, s.StartBin, s.BinWidth), nil
		}
		if s.StartBin < 0 || s.StartBin >= nb {
			return 0, errs.Value("start_bin must be in [0, %d) (the number of bins), got %d", nb, s.StartBin)
		}
		return mseAmax(counts, s.NumBits, s.Unsigned, s.StartBin, s.BinWidth), nil
	}
	return 0, errs.Value("method must be 0 (percentile), 1 (entropy) or 2 (mse), got %d", int32(s.Method))
}

// percentileAmax: cdf = cumsum(counts / total) (each count divided by the
// total, then a running sum in order); idx = the first bin whose cdf >=
// p/100 (nbins when none: rounding can leave cdf[-1] below 1); amax = edge
// idx, the left edge of that bin (NVIDIA returns calib_bin_edges[idx]).
func percentileAmax(counts []int64, total int64, p, w float64) float64 {
	f := make([]float64, len(counts))
	t := float64(total)
	for i, c := range counts {
		f[i] = float64(c) / t
	}
	cdf := floats.CumSum(make([]float64, len(f)), f)
	target := p / 100
	idx := len(cdf)
	for i, v := range cdf {
		if v >= target {
			idx = i
			break
		}
	}
	return float64(idx) * w
}

// entropyAmax: bins = counts with bins[0] replaced by bins[1]; for every
// candidate i in [startBin, nbins]: P = bins[:i] with sum(bins[i:]) added
// to P[i-1]; the i bins are cut into nq = 2^(bits-1+unsigned) chunks by the
// edges k*(i/nq) (numpy's linspace(0, i, nq+1); bin j is in chunk c when
// edge c <= j < edge c+1), Q[j] = (sum of the chunk's bins) / (number of
// its non-zero bins) where bins[j] != 0, else 0; the divergence is
// scipy.stats.entropy(P, Q) (both normalised, sum of p*log(p/q), +Inf where
// q is 0 and p is not; NaN when Q is all zero). amax = edge i of the last
// minimum (np.argmin of the reversed list: a NaN counts as the minimum).
func entropyAmax(counts []int64, bits int, unsigned bool, startBin int, w float64) float64 {
	nb := len(counts)
	bins := make([]float64, nb)
	for i, c := range counts {
		bins[i] = float64(c)
	}
	bins[0] = bins[1]
	nq := 1 << (bits - 1)
	if unsigned {
		nq <<= 1
	}
	cands := nb - startBin + 1
	div := make([]float64, cands)
	par.Run(par.ChunksWork(cands, nb*4), func(_, lo, hi int) {
		p, q := make([]float64, nb), make([]float64, nb)
		chunk := make([]int, nb)
		sums, nz := make([]float64, nq), make([]int, nq)
		for ci := lo; ci < hi; ci++ {
			div[ci] = divergence(bins, startBin+ci, nq, p, q, chunk, sums, nz)
		}
	})
	best := len(div) - 1
	for i := len(div) - 1; i >= 0; i-- {
		if div[best] != div[best] {
			break
		}
		if div[i] != div[i] || div[i] < div[best] {
			best = i
		}
	}
	return float64(startBin+best) * w
}

// divergence is the KL divergence of candidate i (see entropyAmax); p, q,
// chunk (nbins long), sums and nz (nq long) are scratch.
func divergence(bins []float64, i, nq int, p, q []float64, chunk []int, sums []float64, nz []int) float64 {
	step := float64(i) / float64(nq)
	c := 0
	for j := range i {
		// chunk(j) = (number of edges k*step <= j, k in [0, nq]) - 1; the
		// last edge is i itself (> j).
		for c+1 < nq && float64(c+1)*step <= float64(j) {
			c++
		}
		chunk[j] = c
	}
	clear(sums)
	clear(nz)
	for j := range i {
		if bins[j] != 0 {
			sums[chunk[j]] += bins[j]
			nz[chunk[j]]++
		}
	}
	for k := range sums {
		if nz[k] != 0 {
			sums[k] /= float64(nz[k])
		}
	}
	p, q = p[:i], q[:i]
	for j := range i {
		p[j] = bins[j]
		q[j] = 0
		if bins[j] != 0 {
			q[j] = sums[chunk[j]]
		}
	}
	p[i-1] += pairwiseSum(bins[i:])
	sp, sq := pairwiseSum(p), pairwiseSum(q)
	for j := range i {
		pj, qj := p[j]/sp, q[j]/sq
		p[j] = relEntr(pj, qj)
	}
	return pairwiseSum(p)
}

// relEntr is scipy.special.rel_entr.
func relEntr(x, y float64) float64 {
	switch {
	case x != x || y != y:
		return math.NaN()
	case x > 0 && y > 0:
		return x * math.Log(x/y)
	case x == 0 && y >= 0:
		return 0
	}
	return math.Inf(1)
}

// pairwiseSum is numpy's sum of a contiguous float64 array (its pairwise
// summation: blocks of at most 128 with 8 accumulators).
func pairwiseSum(a []float64) float64 {
	n := len(a)
	switch {
	case n < 8:
		res := 0.0
		for _, v := range a {
			res += v
		}
		return res
	case n <= 128:
		var r [8]float64
		copy(r[:], a[:8])
		i := 8
		for ; i < n-n%8; i += 8 {
			for k := range r {
				r[k] += a[i+k]
			}
		}
		res := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			res += a[i]
		}
		return res
	}
	n2 := n / 2
	n2 -= n2 % 8
	return pairwiseSum(a[:n2]) + pairwiseSum(a[n2:])
}

// mseAmax: centres c_j = (edge j + edge j+1) / 2; for every candidate
// amax = c_i, i in [startBin, nbins): the fake quantization of every centre
// (scale = bound/amax, bound = 2^(bits-1+unsigned) - 1; q =
// clamp(round_half_even(c*scale), unsigned ? 0 : -bound, bound); c' =
// q/scale) and mse = mean((c' - c)^2 * counts) (numpy's pairwise sum over
// the bins, divided by nbins); amax = the centre of the first minimum.
func mseAmax(counts []int64, bits int, unsigned bool, startBin int, w float64) float64 {
	nb := len(counts)
	centres := make([]float64, nb)
	for j := range centres {
		centres[j] = (float64(j)*w + float64(j+1)*w) / 2
	}
	e := bits - 1
	if unsigned {
		e++
	}
	bound := math.Ldexp(1, e) - 1
	lower := -bound
	if unsigned {
		lower = 0
	}
	cands := nb - startBin
	mses := make([]float64, cands)
	par.Run(par.ChunksWork(cands, nb*8), func(_, lo, hi int) {
		terms := make([]float64, nb)
		for ci := lo; ci < hi; ci++ {
			scale := bound / centres[startBin+ci]
			for j, c := range centres {
				q := min(max(math.RoundToEven(c*scale), lower), bound)
				d := q/scale - c
				terms[j] = d * d * float64(counts[j])
			}
			mses[ci] = pairwiseSum(terms) / float64(nb)
		}
	})
	return centres[startBin+floats.MinIdx(mses)]
}
