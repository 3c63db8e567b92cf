package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// naive is the reference: the weight unpacked to int8 with gokern/ternary
// (independently of the GEMM panels), then seven plain loops per output
// element (sample, channel, row, column; input channel, kernel row, kernel
// column) with a bounds test per tap. Sums run in k order, in float32 (float
// path) or int32 (int8 path), and are folded at each scale-block boundary
// exactly as Conv2D documents. Parallel over (sample, output channel).
func naive(d *Dims, x []float32, acts *activations, w Weights, sc *scaler, out []float32) error {
	wq := make([]int8, d.WLen)
	if err := ternary.Unpack(w.Packed, wq); err != nil {
		return errs.Value("weight: %v", err)
	}
	par.For(d.N*d.O, 1, func(lo, hi int) {
		for u := lo; u < hi && !par.Stopped(); u++ {
			n, o := u/d.O, u%d.O
			g := o / d.Og
			wo := wq[o*d.K:][:d.K]
			dst := out[u*d.P:][:d.P]
			if acts != nil {
				naivePlane(d, acts.q, acts.a[n], wo, sc, sc.fold1I32, dst, n, o, g)
			} else {
				naivePlane(d, x, 0, wo, sc, sc.fold1F32, dst, n, o, g)
			}
		}
	})
	return nil
}

// naivePlane computes one output plane from x (float32 activations, or
// the int8 path's quantized ones), summing in S (float32 or int32) and
// folding each scale block with fold (scaler.fold1F32 / fold1I32, a the
// sample's activation scale); it returns early, a row at a time, once the
// call is interrupted (par.Stopped).
func naivePlane[X float32 | int8, S float32 | int32](d *Dims, x []X, a float32, wo []int8, sc *scaler,
	fold func(y float32, acc S, o, b int, a float32) float32, dst []float32, n, o, g int) {
	for oh := 0; oh < d.Ho && !par.Stopped(); oh++ {
		for ow := range d.Wo {
			var y float32
			var acc S
			k, b := 0, 0
			for c := range d.Cg {
				for i := range d.KH {
					for j := range d.KW {
						ih := oh*d.StrideH - d.PadT + i*d.DilH
						iw := ow*d.StrideW - d.PadL + j*d.DilW
						if ih >= 0 && ih < d.H && iw >= 0 && iw < d.W {
							acc += S(wo[k]) * S(x[((n*d.C+g*d.Cg+c)*d.H+ih)*d.W+iw])
						}
						k++
						if k%sc.bl == 0 {
							y = fold(y, acc, o, b, a)
							acc = 0
							b++
						}
					}
				}
			}
			dst[oh*d.Wo+ow] = y
		}
	}
}
