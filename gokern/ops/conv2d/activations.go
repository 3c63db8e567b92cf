package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// activations are the int8 path's quantized input and per-sample scales.
type activations struct {
	q   []int8
	a   []float32 // a_n = 127 / max(max|x_n|, 1e-5)
	bad int       // index of x's first NaN or ±Inf, -1 when none
	buf *[]byte   // q's actScratch buffer, for release
}

// release returns the quantized activations' buffer (if any) for reuse:
// the convolution is done with them.
func (a *activations) release() {
	if a.buf != nil {
		actScratch.Put(a.buf)
	}
	a.q, a.buf = nil, nil
}

// actEps is the floor of a sample's max|x| (as float32).
const actEps = float32(1e-5)

// actScales takes the int8 path's per-sample scales a_n (see Conv2D) in one
// parallel pass over pieces of at most actPiece values of one sample, which
// also finds x's first non-finite element; q stays nil until quantize (the
// implicit GEMM quantizes straight into its own layout instead).
func actScales(d *Dims, x []float32, scan *ternary.Quantizer) *activations {
	acts := &activations{a: make([]float32, d.N), bad: -1}
	chunks, pieces, span := actPieces(d)
	maxes := make([]float32, d.N*pieces)
	bads := make([]int, d.N*pieces)
	par.Run(chunks, func(_, lo, hi int) {
		for i := lo; i < hi && !par.Stopped(); i++ {
			a, b := span(i)
			m, bad := scan.MaxAbs(x[a:b])
			maxes[i], bads[i] = m, bad
			if bad >= 0 {
				bads[i] += a
			}
		}
	})
	for _, b := range bads {
		if b >= 0 {
			acts.bad = b
			break
		}
	}
	for n := range d.N {
		var m float32
		for _, v := range maxes[n*pieces : (n+1)*pieces] {
			if v > m {
				m = v
			}
		}
		acts.a[n] = float32(127) / max(m, actEps)
	}
	return acts
}

// actPieces returns the activation passes' split over threads (par.Chunks
// of pieces), the pieces per sample and the span of piece i (sample
// i/pieces) in x.
func actPieces(d *Dims) ([]int, int, func(i int) (lo, hi int)) {
	per := d.C * d.H * d.W
	pieces := ceilDivPos(per, actPiece)
	return par.ChunksWork(d.N*pieces, min(per, actPiece)*passWork), pieces, func(i int) (lo, hi int) {
		n, j := i/pieces, i%pieces
		return n*per + j*actPiece, n*per + min(per, (j+1)*actPiece)
	}
}

// quantize writes q, x quantized with the scales a by quant (a kernel set's
// QuantI8; NCHW int8, into an actScratch buffer that release returns), in
// one parallel pass.
func (acts *activations) quantize(d *Dims, x []float32, quant func(dst []int8, src []float32, a float32)) {
	if acts.q != nil {
		return
	}
	qb, h := actScratch.Sized(len(x))
	acts.q, acts.buf = asInt8(qb), h
	chunks, pieces, span := actPieces(d)
	par.Run(chunks, func(_, lo, hi int) {
		for i := lo; i < hi && !par.Stopped(); i++ {
			a, b := span(i)
			quant(acts.q[a:b], x[a:b], acts.a[i/pieces])
		}
	})
}

// actPiece is the most values of one piece of the activation passes.
const actPiece = 1 << 15

// passWork is the work of one value of the passes that open a convolution
// (the int8 activations' max|x|, quantization and implicit layout; the
// float kernels' padded and channel-blocked copies) for par.ChunksWork, in
// elements of a plain pass: more than one, so that a sample of a few
// hundred thousand values is split over the threads. The convolution's
// kernel runs on every thread next, so waking the threads for these passes
// costs nothing more; unsplit, they made a 1x1 256->64 layer on 56x56
// pixels (800K values) scale 1.1x from 1 to 2 threads on Zen 4 and not at
// all on a Xeon, where a pass over its 3.2 MB takes 136 us.
const passWork = 8
