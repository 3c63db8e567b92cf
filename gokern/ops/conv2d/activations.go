package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// activations are the int8 path's quantized input, in one of two forms
// (NCHW int8 q, or the implicit GEMM's layout xp), and per-sample scales.
type activations struct {
	q   []int8
	xp  []byte    // the implicit layout (layoutU8's bytes), or nil
	a   []float32 // a_n = 127 / max(max|x_n|, 1e-5)
	bad int       // index of x's first NaN or ±Inf, -1 when none
	buf *[]byte   // q's actScratch buffer, for release
	xh  *[]byte   // xp's layoutScratch buffer, for release
}

// release returns the quantized activations' buffers (if any) for reuse:
// the convolution is done with them.
func (a *activations) release() {
	if a.buf != nil {
		actScratch.Put(a.buf)
	}
	if a.xh != nil {
		layoutScratch.Put(a.xh)
	}
	a.q, a.buf, a.xp, a.xh = nil, nil, nil, nil
}

// actEps is the floor of a sample's max|x| (as float32).
const actEps = float32(1e-5)

// actScales takes the int8 path's per-sample scales a_n (see Conv2D) in
// parallel passes over pieces of at most actPiece values of one sample,
// which also find x's first non-finite element. q and xp stay nil until
// quantize or implicitLayout writes them; with a layout geometry (lay not
// nil: the planner knows the implicit GEMM will run), actScales writes xp
// itself, by chunks of samples of about passChunk bytes (one sample at
// least): each chunk's layout right after its scales, while its values are
// still in the caches (see passChunk).
func actScales(d *Dims, x []float32, scan *ternary.Quantizer, lay *implicitLayoutOf) *activations {
	acts := &activations{a: make([]float32, d.N), bad: -1}
	chunk := d.N
	if lay != nil {
		acts.xp, acts.xh = layoutScratch.Sized(d.N * lay.g.per)
		chunk = max(1, passChunk/max(1, 4*d.C*d.H*d.W))
		defer func() { // an interrupted pass (par.Run panics): the buffer goes back
			if r := recover(); r != nil {
				acts.release()
				panic(r)
			}
		}()
	}
	for n0 := 0; n0 < d.N; n0 += chunk {
		n1 := min(d.N, n0+chunk)
		bad := sampleScales(d, x, scan, acts.a, n0, n1)
		if acts.bad < 0 {
			acts.bad = bad
		}
		if lay != nil {
			if acts.bad >= 0 && lay.stopAtBad {
				chunk = d.N // the scales alone from here: the call will fail
				lay = nil
				continue
			}
			layoutRows(d, x, acts.a, lay.g, lay.k, acts.xp, n0, n1)
		}
	}
	return acts
}

// implicitLayoutOf is the implicit GEMM's layout geometry and kernels, for
// actScales to write the layout; stopAtBad: a NaN or ±Inf in x fails the
// call (Options.CheckFinite), so no layout is written past it.
type implicitLayoutOf struct {
	g         implicitGeom
	k         implicitKernels
	stopAtBad bool
}

// sampleScales sets a[n] for samples n0 <= n < n1 in one parallel pass and
// returns the index of the first NaN or ±Inf among them, or -1.
func sampleScales(d *Dims, x []float32, scan *ternary.Quantizer, a []float32, n0, n1 int) int {
	chunks, pieces, span := actPieces(d, n1-n0)
	first := n0 * pieces
	maxes := make([]float32, (n1-n0)*pieces)
	bads := make([]int, len(maxes))
	par.Run(chunks, func(_, lo, hi int) {
		for i := lo; i < hi && !par.Stopped(); i++ {
			a, b := span(first + i)
			m, bad := scan.MaxAbs(x[a:b])
			maxes[i], bads[i] = m, bad
			if bad >= 0 {
				bads[i] += a
			}
		}
	})
	for j := range n1 - n0 {
		var m float32
		for _, v := range maxes[j*pieces : (j+1)*pieces] {
			if v > m {
				m = v
			}
		}
		a[n0+j] = float32(127) / max(m, actEps)
	}
	for _, b := range bads {
		if b >= 0 {
			return b
		}
	}
	return -1
}

// implicitLayout returns the activations in the implicit layout g, written
// now by layoutU8 unless actScales wrote them (released by release).
func (acts *activations) implicitLayout(d *Dims, x []float32, g implicitGeom, k implicitKernels) []byte {
	if acts.xp == nil {
		acts.xp, acts.xh = layoutU8(d, x, acts.a, g, k)
	}
	return acts.xp
}

// actPieces returns the activation passes' split over threads of ns
// samples (par.Chunks of pieces), the pieces per sample and the span of
// piece i (sample i/pieces) in x.
func actPieces(d *Dims, ns int) ([]int, int, func(i int) (lo, hi int)) {
	per := d.C * d.H * d.W
	pieces := ceilDivPos(per, actPiece)
	return par.ChunksWork(ns*pieces, min(per, actPiece)*passWork), pieces, func(i int) (lo, hi int) {
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
	chunks, pieces, span := actPieces(d, d.N)
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

// passChunk is the most bytes of input whose scales are taken before
// the implicit layout of those samples is written (actScales): the layout
// pass then reads them from the L3 cache, not from memory. One pass over
// all samples first (26 MB of float32 for 8 samples of a 1x1 256->64 layer
// on 56x56 pixels) had evicted the first samples before the layout pass
// came to them, and the layout pass, reading 8 channels' rows a call,
// runs at a quarter of a plain read's speed from memory (Zen 4, 1 thread:
// 3.4-3.5 ms for both passes of those 8 samples, 2.2 ms a sample at a
// time). Below it, one chunk: the extra pass over the threads costs more
// than it saves on inputs that fit in the caches anyway (3x3 128->128 on
// 28x28, 8 samples, 3.2 MB: 2 threads, 108-125 us in one chunk, 166-240
// a sample at a time).
var passChunk = 4 << 20 // tests lower it
