package ternary

import (
	"math"
	"sync/atomic"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Scale floors, as float32 (the PyTorch reference clamps in float32 too).
const (
	absMeanEps = float32(1e-5)
	absMaxEps  = float32(1e-8)
)

// The generic kernels (absSumGeneric, absMaxGeneric, codeOf,
// quantRunGeneric) are in generic.go.

// blockScale reduces one block and returns its scale and the index of its
// first non-finite element (-1 if none).
func (ks *Quantizer) blockScale(x []float32, m Method) (float32, int) {
	if m == AbsMax {
		mx, bad := ks.absMax(x)
		return finishScale(m, 0, len(x), mx), bad
	}
	s, bad := ks.absSum(x)
	return finishScale(m, s, len(x), 0), bad
}

// MaxAbs returns max|x| over the elements of x that are not NaN (±Inf
// included; 0 when there are none) and the index of the first NaN or ±Inf
// (-1 when all are finite), with ks's reduction kernel: one pass while x
// is finite. gokern/ops/conv2d takes its int8 activation scales, and the
// finiteness check of x, from it.
func (ks *Quantizer) MaxAbs(x []float32) (float32, int) {
	if len(x) == 0 {
		return 0, -1
	}
	return ks.absMax(x)
}

// CanonicalNaN is the bit pattern of every NaN scale (absmean over a block
// holding NaN, without the finiteness check): the default quiet NaN.
const CanonicalNaN = 0x7FC00000

// finishScale turns a block's reduction into its scale: for absmean the
// float64 mean of |x| rounded once to float32, floored at 1e-5 (NaN stays
// NaN); for absmax max|x| floored at 1e-8.
func finishScale(m Method, sum float64, count int, mx float32) float32 {
	if m == AbsMax {
		if mx < absMaxEps {
			return absMaxEps
		}
		return mx
	}
	g := float32(sum / float64(count))
	if g != g {
		// One NaN for every input NaN payload, on every path and on the GPU
		// (whose arithmetic makes 0x7FFFFFFF): the result is bit-for-bit
		// defined.
		return math.Float32frombits(CanonicalNaN)
	}
	if g < absMeanEps {
		return absMeanEps
	}
	return g
}

// fusedUnit bounds the work unit of the one-pass path: a whole number of
// blocks that is also a whole number of 128-value groups.
const fusedUnit = 1 << 16

// Quantize quantizes x into I2_S with the kernels the process selected
// (QuantizeOp.Get()); see Quantizer.Quantize.
func Quantize(x []float32, blockSize int, m Method, checkFinite bool, packed []byte, scales []float32) error {
	return QuantizeOp.Get().Quantize(x, blockSize, m, checkFinite, packed, scales)
}

// MaxAbs is Quantizer.MaxAbs with the kernels the process selected.
func MaxAbs(x []float32) (float32, int) { return QuantizeOp.Get().MaxAbs(x) }

// Quantize quantizes x into I2_S with ks's kernels: packed receives PackedLen(len(x)) bytes and
// scales NumBlocks(len(x), blockSize) float32 scales. blockSize 0 means one
// scale for the tensor. With checkFinite, a NaN or ±Inf input is a ValueError
// naming the first such index; without it, non-finite input is quantized as
// the comparisons fall (see codeOf) and never crashes.
//
// Work is spread over par.Threads() goroutines. When blocks and 128-value
// groups share a small common multiple, each worker owns whole units of it and
// reads every block once (scale, then codes from cache). One scale for a
// large tensor is found in one pass as well (quantizeSpec). Otherwise
// the scales are computed first and the codes in a second parallel pass over
// groups.
func (ks *Quantizer) Quantize(x []float32, blockSize int, m Method, checkFinite bool, packed []byte, scales []float32) error {
	n := len(x)
	if err := CheckSizes(n, blockSize); err != nil {
		return err
	}
	if m != AbsMean && m != AbsMax {
		return errs.Value("unknown method %d", m)
	}
	if len(packed) != PackedLen(n) {
		return errs.Value("packed must have %d bytes for %d values, got %d", PackedLen(n), n, len(packed))
	}
	bs, err := scaleBlock(n, blockSize, scales)
	if err != nil {
		return err
	}
	nb := len(scales) // NumBlocks(n, blockSize), checked
	var fb int
	done := false
	if unit := lcm(bs, GroupValues, fusedUnit); unit != 0 && nb > 1 {
		fb, done = ks.quantizeFused(x, bs, unit, m, packed, scales), true
	} else if nb == 1 && n >= specMinValues && ks.family != cpu.Generic {
		// The one-pass path pays only with SIMD kernels; in plain Go the
		// two-pass path (with the threshold comparisons of generic.go) is
		// faster. TestQuantizeSpecBands runs quantizeSpecBand with the generic
		// kernels too.
		fb, done = -1, ks.quantizeSpec(specSource{f32: x}, m, packed, scales)
	}
	if !done {
		fb = ks.quantizeTwoPass(x, bs, m, packed, scales)
	}
	if checkFinite && fb >= 0 {
		return qtensor.NonFinite(x, fb)
	}
	return nil
}

// firstBad returns the first non-negative entry of per-chunk first-bad
// indexes (chunks are in order), or -1.
func firstBad(idx []int) int {
	for _, i := range idx {
		if i >= 0 {
			return i
		}
	}
	return -1
}

// badSlots returns one -1 slot per chunk.
func badSlots(bounds []int) []int {
	b := make([]int, len(bounds)-1)
	for i := range b {
		b[i] = -1
	}
	return b
}

func (ks *Quantizer) quantizeFused(x []float32, bs, unit int, m Method, packed []byte, scales []float32) int {
	n := len(x)
	batch := max(1, fusedBatch/unit) * unit
	batches := (n + batch - 1) / batch
	// Workers take batches in turn, so that a core shared with another
	// process does less of the work.
	workers := par.Chunks(batches, 1)
	bad := badSlots(workers)
	var next atomic.Int64
	par.Run(workers, func(c, _, _ int) {
		for {
			bt := int(next.Add(1) - 1)
			if bt >= batches || par.Stopped() {
				break
			}
			s := bt * batch
			e := min(s+batch, n)
			// Batches come in increasing order: the first bad index a
			// worker sees is its smallest.
			if b := ks.quantBlocks(x[s:e], bs, s, m, packed, scales); b >= 0 && bad[c] < 0 {
				bad[c] = s + b
			}
			if e == n {
				padTail(packed, n)
			}
		}
	})
	fb := -1
	for _, b := range bad {
		if b >= 0 && (fb < 0 || b < fb) {
			fb = b
		}
	}
	return fb
}

// fusedBatch is about how many values quantBlocks gets at a time (whole
// units): small enough to stay in the L2 cache between the scales and the
// codes. The AVX2 block-code kernels prefetch one batch ahead
// (blockBatchBytes in _gen/ternary.go): keep the two in step.
const fusedBatch = 1 << 14

// quantBlocksGeneric quantizes x, the values at flat positions pos, pos+1,
// ...: whole blocks of bs (the last one may be short where the tensor ends),
// pos a multiple of bs and of 128. It writes their scales (scales is the
// whole tensor's) and codes, and returns the index in x of the first NaN or
// Inf, or -1.
func quantBlocksGeneric(x []float32, bs, pos int, m Method, packed []byte, scales []float32) int {
	return quantBlocksWith(genericBlock, x, bs, pos, m, packed, scales)
}

// blockKernels are the kernels quantBlocksWith uses.
type blockKernels struct {
	absSum   func(x []float32) (float64, int)
	absMax   func(x []float32) (float32, int)
	quantRun func(x []float32, scale float32, pos int, dst []byte)
}

var genericBlock = blockKernels{absSumGeneric, absMaxGeneric, quantRunGeneric}

// quantBlocksWith is quantBlocksGeneric one block at a time with the given
// kernels.
func quantBlocksWith(k blockKernels, x []float32, bs, pos int, m Method, packed []byte, scales []float32) int {
	bad := -1
	for s := 0; s < len(x); s += bs {
		blk := x[s:min(s+bs, len(x))]
		var sc float32
		var b int
		if m == AbsMax {
			var mx float32
			mx, b = k.absMax(blk)
			sc = finishScale(m, 0, len(blk), mx)
		} else {
			var sum float64
			sum, b = k.absSum(blk)
			sc = finishScale(m, sum, len(blk), 0)
		}
		scales[(pos+s)/bs] = sc
		if b >= 0 && bad < 0 {
			bad = s + b
		}
		k.quantRun(blk, sc, pos+s, packed)
	}
	return bad
}

func (ks *Quantizer) quantizeTwoPass(x []float32, bs int, m Method, packed []byte, scales []float32) int {
	n := len(x)
	nb := len(scales)
	var fb int
	if nb == 1 {
		fb = ks.tensorScale(x, m, scales)
	} else {
		chunks := par.Chunks(nb, 1)
		bad := badSlots(chunks)
		par.Run(chunks, func(c, b0, b1 int) {
			for b := b0; b < b1; b++ {
				if b&63 == 0 && par.Stopped() {
					return
				}
				s := b * bs
				sc, i := ks.blockScale(x[s:min(s+bs, n)], m)
				scales[b] = sc
				if i >= 0 && bad[c] < 0 {
					bad[c] = s + i
				}
			}
		})
		fb = firstBad(bad)
	}
	ks.quantizeGroups(x, bs, scales, packed)
	return fb
}

// quantizeGroups writes the codes of all of x, blocks of bs values with the
// given scales, and the padding, in parallel over whole groups.
func (ks *Quantizer) quantizeGroups(x []float32, bs int, scales []float32, packed []byte) {
	n := len(x)
	groups := (n + GroupValues - 1) / GroupValues
	par.For(groups, 64, func(g0, g1 int) {
		lo, hi := g0*GroupValues, min(g1*GroupValues, n)
		for s := lo; s < hi; {
			if par.Stopped() {
				return
			}
			blk := s / bs
			e := min((blk+1)*bs, hi, s+stopStep)
			ks.quantRun(x[s:e], scales[blk], s, packed)
			s = e
		}
		if hi == n {
			padTail(packed, n)
		}
	})
}

// stopStep is the most values a loop quantizes between two checks of
// par.Stopped (about a millisecond with the generic kernels).
const stopStep = 1 << 18

// tensorScale computes the one scale of the whole tensor with a parallel
// reduction (float64 partial sums; the float32 result does not depend on the
// split in practice, see DESIGN.md).
func (ks *Quantizer) tensorScale(x []float32, m Method, scales []float32) int {
	// pieces of at least par.MinWork values, up to par.ChunksPerThread a
	// thread: a few milliseconds each, so that an interrupt is seen soon
	chunks := par.ChunksWork(len(x), 1)
	k := len(chunks) - 1
	sums := make([]float64, k)
	maxs := make([]float32, k)
	bad := badSlots(chunks)
	par.Run(chunks, func(c, lo, hi int) {
		var b int
		if m == AbsMax {
			maxs[c], b = ks.absMax(x[lo:hi])
		} else {
			sums[c], b = ks.absSum(x[lo:hi])
		}
		if b >= 0 {
			bad[c] = lo + b
		}
	})
	var s float64
	var mx float32
	for c := 0; c < k; c++ {
		s += sums[c]
		mx = max(mx, maxs[c])
	}
	scales[0] = finishScale(m, s, len(x), mx)
	return firstBad(bad)
}
