package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// checkFinite reports the first NaN or Inf of x, bias or the weight scales;
// x's is acts.bad when x has been quantized (acts not nil). Without acts it
// returns max|x| from the same scan (xmax: see run), else unknownMax.
func checkFinite(d *Dims, x []float32, acts *activations, scales, bias []float32, scan *ternary.Quantizer) (float32, error) {
	i, xmax := -1, unknownMax
	if acts != nil {
		i = acts.bad
	} else {
		i, xmax = scanFinite(x, scan)
	}
	if i >= 0 {
		w, h := i%d.W, i/d.W%d.H
		c, n := i/(d.W*d.H)%d.C, i/(d.W*d.H*d.C)
		return 0, errs.Value("x contains NaN or Inf (first at index (%d, %d, %d, %d), value %v); "+
			"pass check_finite=False to skip this check", n, c, h, w, x[i])
	}
	if i := firstNonFinite(bias, scan); i >= 0 {
		return 0, errs.Value("bias contains NaN or Inf (first at index %d, value %v)", i, bias[i])
	}
	if i := firstNonFinite(scales, scan); i >= 0 {
		return 0, errs.Value("weight: scales contain NaN or Inf (first at index %d, value %v)", i, scales[i])
	}
	return xmax, nil
}

// unknownMax is run's xmax when x has not been scanned (or holds NaN/Inf).
const unknownMax = float32(-1)

// xMax returns xmax when known, else max|x| from a scan, or unknownMax
// when x holds a NaN or Inf.
func xMax(x []float32, xmax float32, scan *ternary.Quantizer) float32 {
	if xmax >= 0 {
		return xmax
	}
	if bad, m := scanFinite(x, scan); bad < 0 {
		return m
	}
	return unknownMax
}

// finitePiece is the most values of one step of firstNonFinite.
const finitePiece = 1 << 16

// firstNonFinite returns the index of the first NaN or ±Inf, or -1; see
// scanFinite.
func firstNonFinite(x []float32, scan *ternary.Quantizer) int {
	bad, _ := scanFinite(x, scan)
	return bad
}

// scanFinite returns the index of x's first NaN or ±Inf (or -1) and, when
// there is none, max|x|; the scan is parallel (scan.MaxAbs: the
// quantizer's reduction kernel), by pieces of finitePiece values
// (checking par.Stopped between them), and the earliest chunk's hit wins.
func scanFinite(x []float32, scan *ternary.Quantizer) (int, float32) {
	chunks := par.Chunks(len(x), finitePiece)
	hits, maxes := make([]int, len(chunks)-1), make([]float32, len(chunks)-1)
	par.Run(chunks, func(c, lo, hi int) {
		hits[c] = -1
		for p := lo; p < hi && !par.Stopped(); p += finitePiece {
			m, i := scan.MaxAbs(x[p:min(hi, p+finitePiece)])
			if i >= 0 {
				hits[c] = p + i
				return
			}
			maxes[c] = max(maxes[c], m)
		}
	})
	var m float32
	for c, h := range hits {
		if h >= 0 {
			return h, 0
		}
		m = max(m, maxes[c])
	}
	return -1, m
}
