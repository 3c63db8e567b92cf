package ternary

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// One scale for the whole tensor, in one pass over memory.
//
// The scale needs all of x before any code can be written, so the obvious
// way reads x twice (sum, then codes). Instead, quantizeSpec estimates the
// scale from evenly spread samples and bounds it, [sLo, sHi]. For every scale
// in those bounds an element with |x| < lo (= 0.5*sLo rounded down) has
// |x/scale| < 0.5, code 1, and one with |x| >= hi (> sHi*(0.5+2^-25)) has
// |x/scale| > 0.5+2^-25, so its float32 quotient rounds above 0.5: code 0 or
// 2 by sign. One pass then sums |x| in float64 and writes those codes, and
// code 3 (never a valid I2_S code) for the few elements in between. Once the
// exact scale is known, only the code-3 elements are recomputed, with the
// same float32 division as the generic code (codeOf). If the scale falls
// outside the bounds (unusual data, or a non-finite sum), everything is
// redone the two-pass way; the result is the same either way, bit for bit.
//
// absmean bounds the mean both ways from the spread of the sampled runs.
// absmax has only a lower bound (the largest |x| sampled, raised as the
// pass sees larger ones); every |x| at or above half of it waits.
//
// For normally distributed data, 16M values, 4% of x is sampled and 0.25%
// of the elements need a fix-up, against the whole second pass that they
// replace.

// specMinValues: smaller tensors take the two-pass path (they are mostly in
// cache, and the sampling would not pay). A variable for the tests.
var specMinValues = 1 << 20

const (
	specSampleRuns = 64      // sampled runs, evenly spread
	specPiece      = 256     // groups per kernel call (32K values)
	specZ          = 4.5     // bound half-width, in standard errors of the estimate
	specSlack      = 0x1p-20 // relative slack for rounding of the mean to float32
)

// specBand bounds the scale and gives the kernel's thresholds on |x|.
type specBand struct {
	sLo, sHi float64
	lo, hi   float32
}

// newSpecBand returns the band for a scale in [sLo, sHi] (0 <= sLo <= sHi).
// hi is kept positive, as the kernels need (a band that low contains no
// scale anyway: they are at least 1e-8).
func newSpecBand(sLo, sHi float64) specBand {
	return specBand{
		sLo: sLo, sHi: sHi,
		lo: roundDown32(0.5 * sLo),
		hi: max(roundUp32(sHi*(0.5+0x1p-24)), math.SmallestNonzeroFloat32),
	}
}

// contains reports whether the scale lies in the band.
func (b specBand) contains(s float32) bool {
	return float64(s) >= b.sLo && float64(s) <= b.sHi
}

func roundDown32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

func roundUp32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// sampleRuns returns how many runs to sample from n values and their
// length.
func sampleRuns(n int) (runs, l int) {
	runs = specSampleRuns
	l = int(math.Cbrt(1024*float64(n)*float64(n))) / runs
	l = max(64, (l+15)&^15)
	if runs*l > n/2 {
		l = max(1, n/(2*runs))
	}
	return runs, l
}

// runStart is where run r of runs, each l long, starts in n values: evenly
// spread from the first value to the last.
func runStart(n, l, r, runs int) int {
	return int(int64(n-l) * int64(r) / int64(runs-1))
}

// forSamples calls fn(r, run) for each of the runs runs (sampleRuns) of
// x, l values each, in parallel.
func forSamples(x specSource, runs, l int, fn func(r int, run []float32)) {
	par.For(runs, 16, func(r0, r1 int) {
		var scratch []float32
		if x.bf != nil {
			scratch = make([]float32, l)
		}
		for r := r0; r < r1; r++ {
			start := runStart(x.len(), l, r, runs)
			fn(r, x.get(start, start+l, scratch))
		}
	})
}

// specSource is the one-pass path's input: float32 values, or bfloat16
// bits, which the pass's kernels (quantSpecBF16) widen as they load them
// and the rest (samples, a piece redone, the tail) a run at a time into a
// cache-sized scratch, so that a bfloat16 tensor is read once from memory
// and never widened whole. Every reduction sees the same float32 values in
// the same pieces either way: the same sums, scale and codes, bit for bit.
type specSource struct {
	f32 []float32
	bf  []uint16
}

func (x specSource) len() int {
	if x.bf != nil {
		return len(x.bf)
	}
	return len(x.f32)
}

// get returns values [lo, hi): a slice of f32, or bf's widened into
// scratch (at least hi-lo long).
func (x specSource) get(lo, hi int, scratch []float32) []float32 {
	if x.bf == nil {
		return x.f32[lo:hi]
	}
	d := scratch[:hi-lo]
	cast.WidenOp.Get()(d, x.bf[lo:hi])
	return d
}

// whole returns all the values as float32 (bf's widened into the kept
// scratch of QuantizeBF16) and what gives the scratch back.
func (x specSource) whole() ([]float32, func()) {
	if x.bf == nil {
		return x.f32, func() {}
	}
	f, h := widened.Sized(len(x.bf))
	if err := cast.BF16ToF32(f, x.bf); err != nil {
		panic(err) // the lengths are equal
	}
	return f, func() { widened.Put(h) }
}

// pieceScratch keeps the workers' widened pieces (specPiece groups each,
// for a piece the kernels give up on) between calls.
var pieceScratch = buf.List[float32]{MaxCap: specPiece * GroupValues, MaxCount: par.MaxThreads}

// absMeanBand samples specSampleRuns runs of x, together about (32n)^(2/3)
// values (the size that balances sampling against fix-ups), and bounds the
// absmean scale by the runs' mean ± specZ standard errors (measured from the
// spread of the run means, so uneven tensors get a wider band). ok is false
// when a sample holds NaN or Inf.
func (ks *Quantizer) absMeanBand(x specSource) (b specBand, ok bool) {
	k, l := sampleRuns(x.len())
	means := make([]float64, k)
	forSamples(x, k, l, func(r int, run []float32) {
		s, bad := ks.absSum(run)
		means[r] = s / float64(l)
		if bad >= 0 {
			means[r] = math.NaN()
		}
	})
	var mu float64
	for _, m := range means {
		mu += m
	}
	mu /= float64(k)
	var v float64
	for _, m := range means {
		v += (m - mu) * (m - mu)
	}
	if !(mu <= math.MaxFloat64) || !(v <= math.MaxFloat64) {
		return specBand{}, false
	}
	se := math.Sqrt(v / float64(k-1) / float64(k))
	w := specZ*se + mu*specSlack
	floor := float64(absMeanEps)
	return newSpecBand(max(mu-w, floor), max(mu+w, floor)), true
}

// absMaxBand bounds the absmax scale from below by the largest |x| of the
// same samples; above, it is unbounded (any sample may miss the maximum).
// Every |x| of at least half the sampled maximum then waits for the true
// scale: about 1.4% of normally distributed data, far fewer for heavy
// tails; uniform data has too many, which quantizeSpecBand notices in its
// first piece and gives up on.
func (ks *Quantizer) absMaxBand(x specSource) (b specBand, ok bool) {
	runs, l := sampleRuns(x.len())
	maxs := make([]uint32, runs)
	forSamples(x, runs, l, func(r int, run []float32) { maxs[r] = ks.maxBits(run) })
	m := slices.Max(maxs)
	if m >= 0x7f800000 {
		return specBand{}, false
	}
	lo := max(float64(math.Float32frombits(m)), float64(absMaxEps))
	return newSpecBand(lo, math.Inf(1)), true
}

// maxBits is the unsigned maximum of the bits of |x| (NaN and Inf above all
// finite values), through the absMax seam.
func (ks *Quantizer) maxBits(x []float32) uint32 {
	m, bad := ks.absMax(x)
	if bad >= 0 {
		return 0x7fffffff
	}
	return math.Float32bits(m)
}

// quantizeSpec quantizes x (len >= specMinValues) with one scale of method
// m as described above. It returns false, having written nothing that
// counts, when x holds NaN or Inf: the two-pass path then does the work and
// finds the first such index.
func (ks *Quantizer) quantizeSpec(x specSource, m Method, packed []byte, scales []float32) bool {
	var b specBand
	ok := false
	if m == AbsMax {
		b, ok = ks.absMaxBand(x)
	} else {
		b, ok = ks.absMeanBand(x)
	}
	if !ok {
		return false
	}
	return ks.quantizeSpecBand(x, m, b, packed, scales)
}

// quantizeSpecBand is quantizeSpec with a given band (any band gives the
// same result; a poor one only costs time).
func (ks *Quantizer) quantizeSpecBand(x specSource, m Method, b specBand, packed []byte, scales []float32) bool {
	n := x.len()
	if n > specMaxValues {
		return false
	}
	whole := n / GroupValues
	pieces := (whole + specPiece - 1) / specPiece
	// Workers take pieces in turn (a busy core does fewer); the partial
	// sums are kept per piece and added in order, so the result does not
	// depend on who took what.
	workers := par.Chunks(pieces, 1)
	k := len(workers) - 1
	sums := make([]float64, pieces)
	maxs := make([]uint32, pieces) // absmax: the bits of max|x|, as absMaxBitsAVX2
	redo := make([]bool, pieces)   // requantize the whole piece at the end
	fix := make([]*[]uint64, k)    // code-3 elements, see quantSpecGeneric
	var next atomic.Int64
	var seen atomic.Uint32 // absmax: the bits of the largest |x| seen so far
	par.Run(workers, func(c, _, _ int) {
		var scratch []float32 // a poor piece of bf, widened
		if x.bf != nil {
			s, h := pieceScratch.Sized(specPiece * GroupValues)
			defer pieceScratch.Put(h)
			scratch = s
		}
		list := fixLists.Get()
		l := (*list)[:0]
		poor := false // the band gave too many fix-ups: stop guessing
		lo := b.lo
		for {
			pc := int(next.Add(1) - 1)
			if pc >= pieces || par.Stopped() {
				break
			}
			if m == AbsMax {
				// The maximum so far, of any worker, bounds the scale
				// from below too: fewer values wait from here on.
				lo = max(lo, roundDown32(0.5*float64(math.Float32frombits(seen.Load()))))
			}
			g := pc * specPiece
			e := min(g+specPiece, whole)
			ne := -1
			if !poor {
				l = slices.Grow(l, specMaxFix)
				dst, off, ent := packed[g*GroupBytes:e*GroupBytes], uint32(g*GroupValues), l[len(l):len(l)+specMaxFix]
				switch {
				case x.bf != nil && m == AbsMax:
					maxs[pc], ne = ks.quantSpecMaxBF16(x.bf[g*GroupValues:e*GroupValues], dst, lo, b.hi, off, ent)
				case x.bf != nil:
					sums[pc], ne = ks.quantSpecBF16(x.bf[g*GroupValues:e*GroupValues], dst, lo, b.hi, off, ent)
				case m == AbsMax:
					maxs[pc], ne = ks.quantSpecMax(x.f32[g*GroupValues:e*GroupValues], dst, lo, b.hi, off, ent)
				default:
					sums[pc], ne = ks.quantSpec(x.f32[g*GroupValues:e*GroupValues], dst, lo, b.hi, off, ent)
				}
				if ne >= 0 && m == AbsMax && maxs[pc] < 0x7f800000 {
					for v := seen.Load(); maxs[pc] > v && !seen.CompareAndSwap(v, maxs[pc]); v = seen.Load() {
					}
				}
			}
			if ne < 0 { // too many fix-ups: reduce now, the whole piece later
				poor = true
				xs := x.get(g*GroupValues, e*GroupValues, scratch)
				if m == AbsMax {
					maxs[pc] = ks.maxBits(xs)
				} else {
					sums[pc], _ = ks.absSum(xs)
				}
				redo[pc] = true
				ne = 0
			}
			l = l[:len(l)+ne]
		}
		*list = l
		fix[c] = list
	})
	defer func() {
		for _, l := range fix {
			fixLists.Put(l)
		}
	}()
	tail := x.get(whole*GroupValues, n, make([]float32, n-whole*GroupValues))
	var sc float32
	if m == AbsMax {
		mx := max(ks.maxBits(tail), slices.Max(append(maxs, 0)))
		if mx >= 0x7f800000 { // Inf or NaN
			return false
		}
		sc = finishScale(AbsMax, 0, n, math.Float32frombits(mx))
	} else {
		var sum float64
		for _, s := range sums {
			sum += s
		}
		t, _ := ks.absSum(tail)
		sum += t
		if !(sum <= math.MaxFloat64) {
			return false
		}
		sc = finishScale(AbsMean, sum, n, 0)
	}
	scales[0] = sc
	if !b.contains(sc) {
		all, release := x.whole()
		defer release()
		ks.quantizeGroups(all, n, scales, packed)
		return true
	}
	par.Run(workers, func(c, p0, p1 int) {
		ks.fixCodes(packed, *fix[c], 0, sc)
		var scratch []float32
		for pc := p0; pc < p1; pc++ {
			if redo[pc] {
				g := pc * specPiece
				e := min(g+specPiece, whole)
				if scratch == nil && x.bf != nil {
					scratch = make([]float32, specPiece*GroupValues)
				}
				ks.quantRun(x.get(g*GroupValues, e*GroupValues, scratch), sc, g*GroupValues, packed)
			}
		}
	})
	ks.quantRun(tail, sc, whole*GroupValues, packed)
	padTail(packed, n)
	return true
}

// specMaxValues keeps every element's offset in 32 bits (see
// quantSpecGeneric); larger tensors take the two-pass path.
const specMaxValues = 1 << 32

// specMaxFix bounds the fix-ups noted per piece (1/16 of its values); a
// piece with more is requantized whole instead (a poor band).
const specMaxFix = specPiece * GroupValues / 16

// fixLists keeps the workers' fix-up lists between calls (see gokern/buf);
// lists above 2^21 entries (16 MB) are not kept.
var fixLists = buf.List[uint64]{MaxCap: 1 << 21, MaxCount: par.MaxThreads}

// fixCodesGeneric writes, for each entry of ent (see quantSpecGeneric), the
// code of its value with the scale at flat position base + its offset.
func fixCodesGeneric(packed []byte, ent []uint64, base int, scale float32) {
	for _, e := range ent {
		bi, sh := slot(base + int(uint32(e)))
		packed[bi] = packed[bi]&^(3<<sh) | codeOf(math.Float32frombits(uint32(e>>32)), scale)<<sh
	}
}

// quantSpecBF16Generic is quantSpecGeneric of the float32 values of
// bfloat16 bits x (widened first).
func quantSpecBF16Generic(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, int) {
	return quantSpecGeneric(widen(x), dst, lo, hi, off, ent)
}

// quantSpecMaxBF16Generic is quantSpecMaxGeneric of the float32 values of
// bfloat16 bits x.
func quantSpecMaxBF16Generic(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (uint32, int) {
	return quantSpecMaxGeneric(widen(x), dst, lo, hi, off, ent)
}

// widen returns the float32 values of bfloat16 bits x, in a new slice.
func widen(x []uint16) []float32 {
	w := make([]float32, len(x))
	for i, h := range x {
		w[i] = math.Float32frombits(uint32(h) << 16)
	}
	return w
}

// quantSpecMaxGeneric is quantSpecGeneric returning, instead of the sum,
// the unsigned maximum of the bits of |x| (0x7f800000 or more: Inf or NaN).
func quantSpecMaxGeneric(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (uint32, int) {
	_, mb, ne := specCodes(x, dst, lo, hi, off, ent)
	return mb, ne
}

// quantSpecGeneric writes provisional codes of the len(dst)/32 whole groups
// of x (0 <= lo <= hi, 0 < hi): 2 for x >= hi, 0 for x <= -hi, 3 for any
// other |x| >= lo, else 1 (NaN: 1). It returns the float64 sum of |x| and stores in ent one entry
// per code 3, in order of group, byte and lane: the element's float32 bits
// << 32 | (off + its index in x) mod 2^32. It returns their count, or -1 once
// ent is full.
func quantSpecGeneric(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, int) {
	sum, _, ne := specCodes(x, dst, lo, hi, off, ent)
	return sum, ne
}

// specCodes is quantSpecGeneric and quantSpecMaxGeneric: the sum, the
// maximum bits of |x| and the entry count (-1: ent full).
func specCodes(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, uint32, int) {
	var sum float64
	var mb uint32
	ne := 0
	for g := 0; g < len(dst)/GroupBytes; g++ {
		xs := x[g*GroupValues : (g+1)*GroupValues]
		var grp [GroupBytes]byte
		for j, v := range xs {
			a := float32(math.Abs(float64(v)))
			sum += float64(a)
			mb = max(mb, math.Float32bits(v)&0x7fffffff)
			code := byte(1)
			switch {
			case v >= hi:
				code = 2
			case v <= -hi:
				code = 0
			case a >= lo:
				code = 3
			}
			grp[j%LaneValues] |= code << (6 - 2*(j/LaneValues))
		}
		copy(dst[g*GroupBytes:], grp[:])
		for w := 0; w < GroupBytes/8; w++ {
			v := binary.LittleEndian.Uint64(grp[8*w:])
			for m := v & (v >> 1) & 0x5555555555555555; m != 0; m &= m - 1 {
				b := bits.TrailingZeros64(m) // byte 8w + b/8, shift b%8
				j := (3-b%8/2)*LaneValues + 8*w + b/8
				if ne == len(ent) {
					return sum, mb, -1
				}
				ent[ne] = uint64(math.Float32bits(xs[j]))<<32 | uint64(off+uint32(g*GroupValues+j))
				ne++
			}
		}
	}
	return sum, mb, ne
}
