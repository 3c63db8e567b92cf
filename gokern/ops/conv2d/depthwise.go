package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The depthwise kernel on a conv_dw family's SIMD rows (gemm.DepthwiseKernels):
// the generic family runs depthwise (direct.go), the oracle.
//
// depthwisePadded vectorises over the output positions of one channel. A
// unit (sample, output channel, band of output rows) first copies the input
// rows the band reads into sH*sW phase planes of the zero-padded input, for
// strides (sH, sW): phase (ph, pw) holds padded rows ph, ph+sH, ... and
// columns pw, pw+sW, ..., Wq = ceil(Wp/sW) columns a row. Output position
// (oh, ow) at q = oh*Wq + ow reads, for tap (kh, kw), phase
// ((kh*dilH)%sH, (kw*dilW)%sW) at q + (kh*dilH/sH)*Wq + kw*dilW/sW: every
// tap is then one run of consecutive outputs and consecutive inputs over
// the whole band, Ho*Wq sums, one row-kernel call. Columns ow >= Wo are
// computed and dropped. Padding adds w*0 = ±0, which leaves every sum as
// it is (a sum that starts at +0 never becomes -0 by adding ±0), so the
// results are the generic kernel's bits.

// dwTaps adds the taps at offsets offs of x into dst (see
// gemm.DepthwiseKernels): float32 in the order of offs with the weights w
// (-1, 0 or +1), int8 adding the first npos and subtracting the rest.
type dwTaps[T elem, A accum] func(dst []A, x []T, offs []int, w []float32, npos int)

// dwKernels returns the float32 and int8 taps of the conv_dw family k.
func dwKernels(k *gemm.DepthwiseKernels) (dwTaps[float32, float32], dwTaps[int8, int32]) {
	f32 := func(dst, x []float32, offs []int, w []float32, _ int) { k.TapsF32(dst, x, offs, w) }
	i8 := func(dst []int32, x []int8, offs []int, _ []float32, npos int) { k.TapsI8(dst, x, offs, npos) }
	return f32, i8
}

// dwRound is the multiple of positions a unit's taps run over (the widest
// conv_dw vector): the kernels then never run their scalar tails; the
// positions past the band are computed and dropped.
const dwRound = 16

// dwGeom is the phase-plane layout of depthwisePadded.
type dwGeom struct {
	wq    int // columns of a phase row
	rows  int // output rows per band
	extra int // phase rows a band reads past its own: (KH-1)*dilH/sH
	prow  int // rows of a phase plane: rows + extra
}

func newDWGeom(d *Dims) dwGeom {
	wq := ceilDivPos(d.W+d.PadL+d.PadR, d.StrideW)
	rows := max(1, min(d.Ho, directTile/wq))
	extra := (d.KH - 1) * d.DilH / d.StrideH
	return dwGeom{wq: wq, rows: rows, extra: extra, prow: rows + extra}
}

// fillPhases writes the phase planes of output rows [oh0, oh1) of plane
// into buf: phase (ph, pw) at buf[(ph*sW+pw)*g.prow*g.wq:], band row r at
// r*g.wq. It clears the rows of padding; the columns of padding of the other
// rows it never writes, so they hold the zeros of a buffer made zero for
// the call (the same columns in every unit).
func fillPhases[T elem](d *Dims, g dwGeom, plane, buf []T, oh0, oh1 int) {
	n := oh1 - oh0 + g.extra
	sw := d.StrideW
	for pw := range sw {
		// column c of a phase row is padded column c*sW+pw, input column
		// c*sW+pw-PadL: input columns for lo <= c < hi.
		lo := min(g.wq, ceilDivPos(max(0, d.PadL-pw), sw))
		hi := max(lo, min(g.wq, ceilDivPos(max(0, d.W+d.PadL-pw), sw)))
		if lo == hi { // every column of this phase is padding
			continue
		}
		first := lo*sw + pw - d.PadL
		for ph := range d.StrideH {
			base := buf[(ph*sw+pw)*g.prow*g.wq:]
			for r := range n {
				dst := base[r*g.wq:][:g.wq]
				ih := (oh0+r)*d.StrideH + ph - d.PadT
				if ih < 0 || ih >= d.H {
					clear(dst)
					continue
				}
				in := plane[ih*d.W+first : (ih+1)*d.W]
				out := dst[lo:hi]
				if sw == 1 {
					copy(out, in)
					continue
				}
				if sw == 2 {
					in = in[:2*len(out)-1]
					for c := range out {
						out[c] = in[2*c]
					}
					continue
				}
				for c := range out {
					out[c] = in[c*sw]
				}
			}
		}
	}
}

// depthwisePadded is depthwise (same arguments and results) on the row
// taps of a conv_dw family: see the comment above. ordered says that taps
// adds in the order of its offsets (float32), else the weights +1 come
// first (int8).
func depthwisePadded[T elem, A accum](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	fold foldFn[A], skipZero bool, taps dwTaps[T, A], ordered bool) {
	np := gemm.Panels(d.Og)
	g := newDWGeom(d)
	bands := ceilDivPos(d.Ho, g.rows)
	hw := d.H * d.W
	phases := d.StrideH * d.StrideW
	tapAt := make([]int, d.K) // tap k's offset in a unit's phase planes
	for k := range tapAt {
		kh, kw := k/d.KW*d.DilH, k%d.KW*d.DilW
		tapAt[k] = ((kh%d.StrideH*d.StrideW+kw%d.StrideW)*g.prow+kh/d.StrideH)*g.wq + kw/d.StrideW
	}
	par.Run(par.Chunks(d.N*d.O*bands, 1), func(_, lo, hi int) {
		acc := make([]A, g.rows*g.wq+dwRound)
		wk := make([]int8, d.K)
		offs, neg, wf := make([]int, 0, d.K), make([]int, 0, d.K), make([]float32, 0, d.K)
		// the last phase's last row reads up to (KW-1)*dilW/sW < wq past it
		// and the sums run on to a multiple of dwRound
		buf := make([]T, phases*g.prow*g.wq+g.wq+dwRound)
		for u := lo; u < hi && !par.Stopped(); u++ {
			band := u % bands
			o := u / bands % d.O
			n := u / (bands * d.O)
			grp, r := o/d.Og, o%d.Og
			panel := apan[(grp*np+r/gemm.MR)*d.K:][:d.K]
			for k, code := range panel {
				wk[k] = gemm.Weights(code)[r%gemm.MR]
			}
			oh0 := band * g.rows
			oh1 := min(d.Ho, oh0+g.rows)
			fillPhases(d, g, src[(n*d.C+grp)*hw:][:hw], buf, oh0, oh1)
			dst := out[(n*d.O+o)*d.P+oh0*d.Wo : (n*d.O+o)*d.P+oh1*d.Wo]
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			sums := acc[:((oh1-oh0)*g.wq+dwRound-1)/dwRound*dwRound] // no scalar tail
			for b := range sc.nb {
				clear(sums)
				offs, neg, wf = offs[:0], neg[:0], wf[:0]
				for k := b * sc.bl; k < (b+1)*sc.bl; k++ {
					w := wk[k]
					if w == 0 && (skipZero || !ordered) { // int8 values are finite: 0*x adds nothing
						continue
					}
					at := tapAt[k]
					if !ordered && w < 0 {
						neg = append(neg, at)
						continue
					}
					offs = append(offs, at)
					wf = append(wf, float32(w))
				}
				npos := len(offs)
				offs = append(offs, neg...)
				if len(offs) > 0 {
					taps(sums, buf, offs, wf, npos)
				}
				for oh := 1; oh < oh1-oh0; oh++ { // drop the columns ow >= Wo
					copy(sums[oh*d.Wo:][:d.Wo], sums[oh*g.wq:][:d.Wo])
				}
				fold(sc, dst, sums[:len(dst)], o, b, a)
			}
		}
	})
}
