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
				naiveI8(d, acts.q, acts.a[n], wo, sc, dst, n, o, g)
			} else {
				naiveF32(d, x, wo, sc, dst, n, o, g)
			}
		}
	})
	return nil
}

// naiveF32 and naiveI8 compute one output plane; they return early, a row
// at a time, once the call is interrupted (par.Stopped).
func naiveF32(d *Dims, x []float32, wo []int8, sc *scaler, dst []float32, n, o, g int) {
	for oh := 0; oh < d.Ho && !par.Stopped(); oh++ {
		for ow := range d.Wo {
			var y, acc float32
			k, b := 0, 0
			for c := range d.Cg {
				for i := range d.KH {
					for j := range d.KW {
						ih := oh*d.StrideH - d.PadT + i*d.DilH
						iw := ow*d.StrideW - d.PadL + j*d.DilW
						if ih >= 0 && ih < d.H && iw >= 0 && iw < d.W {
							acc += float32(wo[k]) * x[((n*d.C+g*d.Cg+c)*d.H+ih)*d.W+iw]
						}
						k++
						if k%sc.bl == 0 {
							t := float32(sc.scale(o, b) * acc)
							if b > 0 {
								t = y + t
							}
							y, acc = t, 0
							b++
						}
					}
				}
			}
			if sc.bias != nil {
				y += sc.bias[o]
			}
			dst[oh*d.Wo+ow] = y
		}
	}
}

func naiveI8(d *Dims, q []int8, a float32, wo []int8, sc *scaler, dst []float32, n, o, g int) {
	for oh := 0; oh < d.Ho && !par.Stopped(); oh++ {
		for ow := range d.Wo {
			var y float32
			var acc int32
			k, b := 0, 0
			for c := range d.Cg {
				for i := range d.KH {
					for j := range d.KW {
						ih := oh*d.StrideH - d.PadT + i*d.DilH
						iw := ow*d.StrideW - d.PadL + j*d.DilW
						if ih >= 0 && ih < d.H && iw >= 0 && iw < d.W {
							acc += int32(wo[k]) * int32(q[((n*d.C+g*d.Cg+c)*d.H+ih)*d.W+iw])
						}
						k++
						if k%sc.bl == 0 {
							y = sc.fold1I32(y, acc, o, b, a)
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
