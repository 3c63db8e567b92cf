package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// directTile bounds the partial sums of a direct or depthwise unit
// (elements, per worker).
const directTile = 1 << 14

// addRow adds w (-1, 0 or +1) times the input values x[start],
// x[start+stride], ... to the len(dst) sums of dst: a ternary weight's
// contribution to a run of outputs of one row. For w = 0 it adds 0*x, which
// changes nothing but NaN and ±Inf (0*NaN = 0*Inf = NaN, as in torch): the
// kernels skip zero weights where x is known finite.
func addRow[T elem, A accum](dst []A, x []T, start, stride int, w int8) {
	if len(dst) == 0 {
		return
	}
	if w == 0 {
		for i := range dst {
			dst[i] += A(x[start+i*stride]) * 0
		}
		return
	}
	plus := w > 0
	if stride == 1 {
		xs := x[start : start+len(dst)]
		if plus {
			for i, v := range xs {
				dst[i] += A(v)
			}
		} else {
			for i, v := range xs {
				dst[i] -= A(v)
			}
		}
		return
	}
	_ = x[start+(len(dst)-1)*stride]
	if plus {
		for i := range dst {
			dst[i] += A(x[start+i*stride])
		}
	} else {
		for i := range dst {
			dst[i] -= A(x[start+i*stride])
		}
	}
}

// depthwise is the direct kernel for groups == C (one input channel per
// group; O/C output channels per input channel). Units are (sample, output
// channel, band of output rows); for each nonzero weight it adds or subtracts
// a shifted, strided window of the input plane into the band's sums; zero
// weights are skipped when skipZero (src holds no NaN or Inf), else added
// as 0*x.
func depthwise[T elem, A accum](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	fold foldFn[A], skipZero bool) {
	np := gemm.Panels(d.Og)
	rows := max(1, min(d.Ho, directTile/d.Wo))
	bands := ceilDivPos(d.Ho, rows)
	hw := d.H * d.W
	par.Run(par.Chunks(d.N*d.O*bands, 1), func(_, lo, hi int) {
		acc := make([]A, rows*d.Wo)
		wk := make([]int8, d.K)
		for u := lo; u < hi && !par.Stopped(); u++ {
			band := u % bands
			o := u / bands % d.O
			n := u / (bands * d.O)
			g, row := o/d.Og, o%d.Og
			panel := apan[(g*np+row/gemm.MR)*d.K:][:d.K]
			for k, code := range panel {
				wk[k] = gemm.Weights(code)[row%gemm.MR]
			}
			oh0 := band * rows
			oh1 := min(d.Ho, oh0+rows)
			plane := src[(n*d.C+g)*hw:][:hw]
			dst := out[(n*d.O+o)*d.P+oh0*d.Wo : (n*d.O+o)*d.P+oh1*d.Wo]
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			sums := acc[:len(dst)]
			for b := range sc.nb {
				clear(sums)
				for k := b * sc.bl; k < (b+1)*sc.bl; k++ {
					w := wk[k]
					if w == 0 && skipZero {
						continue
					}
					offW := k%d.KW*d.DilW - d.PadL
					owLo, owHi := validRange(d.Wo, d.W, d.StrideW, offW)
					offH := k/d.KW*d.DilH - d.PadT
					ohLo, ohHi := validRange(d.Ho, d.H, d.StrideH, offH)
					for oh := max(oh0, ohLo); oh < min(oh1, ohHi); oh++ {
						ih := oh*d.StrideH + offH
						addRow(sums[(oh-oh0)*d.Wo:][owLo:owHi], plane[ih*d.W:][:d.W], owLo*d.StrideW+offW, d.StrideW, w)
					}
				}
				fold(sc, dst, sums, o, b, a)
			}
		}
	})
}

// direct is the general direct kernel: no column buffer. Units are (sample,
// group, A panel of MR output channels, band of output rows); for each k it
// decodes the panel byte (four weights) once and adds or subtracts the
// shifted input rows into the sums of the channels whose weight is nonzero
// (every channel unless skipZero: see depthwise).
func direct[T elem, A accum](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	fold foldFn[A], skipZero bool) {
	np := gemm.Panels(d.Og)
	rows := max(1, min(d.Ho, directTile/(gemm.MR*d.Wo)))
	bands := ceilDivPos(d.Ho, rows)
	hw := d.H * d.W
	khw := d.KH * d.KW
	par.Run(par.Chunks(d.N*d.Groups*np*bands, 1), func(_, lo, hi int) {
		acc := make([]A, gemm.MR*rows*d.Wo)
		for u := lo; u < hi && !par.Stopped(); u++ {
			band := u % bands
			i := u / bands % np
			g := u / (bands * np) % d.Groups
			n := u / (bands * np * d.Groups)
			panel := apan[(g*np+i)*d.K:][:d.K]
			oh0 := band * rows
			oh1 := min(d.Ho, oh0+rows)
			span := (oh1 - oh0) * d.Wo
			xs := src[(n*d.C+g*d.Cg)*hw:][:d.Cg*hw]
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			valid := min(gemm.MR, d.Og-i*gemm.MR)
			sums := acc[:gemm.MR*span]
			for b := range sc.nb {
				clear(sums)
				for k := b * sc.bl; k < (b+1)*sc.bl; k++ {
					if par.Stopped() { // a unit runs K steps of up to 16K adds
						return
					}
					code := panel[k]
					if code == gemm.ZeroByte && skipZero {
						continue
					}
					w4 := gemm.Weights(code)
					c, r := k/khw, k%khw
					offW := r%d.KW*d.DilW - d.PadL
					owLo, owHi := validRange(d.Wo, d.W, d.StrideW, offW)
					offH := r/d.KW*d.DilH - d.PadT
					ohLo, ohHi := validRange(d.Ho, d.H, d.StrideH, offH)
					plane := xs[c*hw:][:hw]
					for oh := max(oh0, ohLo); oh < min(oh1, ohHi); oh++ {
						xrow := plane[(oh*d.StrideH+offH)*d.W:][:d.W]
						base := (oh - oh0) * d.Wo
						for r, w := range w4[:valid] {
							if w != 0 || !skipZero {
								addRow(sums[r*span+base:][owLo:owHi], xrow, owLo*d.StrideW+offW, d.StrideW, w)
							}
						}
					}
				}
				for r := range valid {
					o := g*d.Og + i*gemm.MR + r
					dst := out[(n*d.O+o)*d.P+oh0*d.Wo:][:span]
					fold(sc, dst, sums[r*span:][:span], o, b, a)
				}
			}
		}
	})
}
