package quant

import (
	"math"
	"strconv"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Spec describes one quantized tensor: its format, its groups and their
// parameters. Quantize reads Scales (and ZeroPoints) as inputs, except for
// binary with ComputeScales, which writes Scales.
type Spec struct {
	DType  qtensor.DType
	Groups Groups
	Scales []float32
	// ZeroPoints: one per group, or nil (all 0). Binary has none.
	ZeroPoints []int32
	// QMin, QMax: the integer range (resolved: see QRange).
	QMin, QMax int32
}

// unit is the granule of the parallel split: chunks start at multiples of
// it, so a chunk's packed bytes (4 and 1 bits per value) are its own.
const unit = 1024

// batch is how many values a worker quantizes into its scratch buffer
// before packing them (int4/uint4), and how many it unpacks at a time.
const batch = 4096

// chunkBounds splits [0, n) into par.ChunksWork chunks aligned to unit.
func chunkBounds(n int) []int {
	units := (n + unit - 1) / unit
	b := par.ChunksWork(units, unit)
	for i := range b {
		b[i] = min(b[i]*unit, n)
	}
	return b
}

// firstOf returns the smallest non-negative entry, or -1.
func firstOf(idx []int) int {
	f := -1
	for _, i := range idx {
		if i >= 0 && (f < 0 || i < f) {
			f = i
		}
	}
	return f
}

// checkScales checks scales (finite, > 0) and zero points (inside the
// range) against the groups.
func (s *Spec) check(n int, packed int) error {
	g := &s.Groups
	if g.N != n {
		return errs.Value("x has %d elements but the quantized tensor has %d", n, g.N)
	}
	if len(s.Scales) != g.Count {
		return errs.Value("scales must have %d entries (%s), got %d", g.Count, g.describe(), len(s.Scales))
	}
	if s.ZeroPoints != nil && len(s.ZeroPoints) != g.Count {
		return errs.Value("zero_points must have %d entries (%s), got %d", g.Count, g.describe(), len(s.ZeroPoints))
	}
	if want := PackedLen(s.DType, n); packed != want {
		return errs.Value("out must have %d bytes for %d %s values, got %d", want, n, s.DType, packed)
	}
	return nil
}

// checkParams checks that every scale is finite and > 0 and every zero
// point lies in [QMin, QMax].
func (s *Spec) checkParams() error {
	for i, v := range s.Scales {
		if !ValidScale(v) {
			return CheckScale(paramName("scale", i, len(s.Scales)), "", v)
		}
	}
	for i, z := range s.ZeroPoints {
		if z < s.QMin || z > s.QMax {
			return errs.Value("%s must be in [quant_min, quant_max] = [%d, %d], got %d",
				paramName("zero_point", i, len(s.ZeroPoints)), s.QMin, s.QMax, z)
		}
	}
	return nil
}

// paramName names entry i of n scales or zero points in messages as the
// Python API's argument ("scale" for one per tensor, "scale[3]" else).
func paramName(name string, i, n int) string {
	if n == 1 {
		return name
	}
	return name + "[" + strconv.Itoa(i) + "]"
}

// describe names the grouping for messages.
func (g *Groups) describe() string {
	switch {
	case g.Axis >= 0:
		return "one per channel along axis " + strconv.Itoa(g.Axis)
	case g.Block > 0:
		return "one per block of " + strconv.Itoa(g.Block) + " elements"
	}
	return "one per tensor"
}

// NaNCode is the code a NaN input gets. One scale per tensor: what torch's
// fbgemm quantize_per_tensor gives on x86 (its AVX2 path clips the product
// at 2147483520 with min_ps, which turns NaN into 2147483520, then adds the
// zero point in wrapping int32 arithmetic and clamps): qmax when zp <= 127,
// qmin when zp >= 128 (the sum wraps negative). Per channel or per block:
// 0 clamped into [qmin, qmax], what torch's quantize_per_channel and
// torchao's quantize_affine give (a NaN float cast to an integer is 0 there).
// The 4-bit types take that rule per tensor too: torch's quint4x2
// quantize_per_tensor does not run fbgemm's path and gives qmin (0) for NaN,
// and torchao's int4 gives 0.
func NaNCode(d qtensor.DType, perTensor bool, zp, qmin, qmax int32) int32 {
	if perTensor && d != qtensor.I4 && d != qtensor.U4 {
		if int64(2147483520)+int64(zp) > math.MaxInt32 {
			return qmin
		}
		return qmax
	}
	return min(max(0, qmin), qmax)
}

// Quantize writes the codes of x into dst (PackedLen bytes) with the
// process's kernels; see QuantizeKernels.Quantize.
func Quantize(x []float32, s *Spec, checkFinite bool, dst []byte) error {
	return QuantizeOp.Get().Quantize(x, s, checkFinite, dst)
}

// Quantize writes the codes of x (int8/uint8/int4/uint4) into dst with the
// given scales and zero points: q = clamp(zp + nearbyint(x * (1/scale)),
// qmin, qmax), the reciprocal and the product in float32, ties to even,
// clamped before the integer conversion (so +Inf -> qmax, -Inf -> qmin;
// NaN -> NaNCode). With checkFinite a NaN or ±Inf in x is a ValueError
// naming the first one (dst is then partly written).
func (k *QuantizeKernels) Quantize(x []float32, s *Spec, checkFinite bool, dst []byte) error {
	if s.DType == qtensor.Binary {
		return errs.Value("binary tensors are quantized with QuantizeBinary")
	}
	if _, _, ok := Range(s.DType); !ok {
		return errs.Type("out: dtype must be int8, uint8, int4, uint4 or binary, got %s", s.DType)
	}
	if err := s.check(len(x), len(dst)); err != nil {
		return err
	}
	if err := s.checkParams(); err != nil {
		return err
	}
	n := len(x)
	if n == 0 {
		return nil
	}
	g := &s.Groups
	inv := make([]float32, g.Count)
	for i, v := range s.Scales {
		inv[i] = float32(1) / v
	}
	zps := s.ZeroPoints
	if zps == nil {
		zps = make([]int32, g.Count)
	}
	c := Clamp{QMin: s.QMin, QMax: s.QMax, NaN: NaNCode(s.DType, g.PerTensor(), zps[0], s.QMin, s.QMax)}
	var invP []float32
	var zpP []int32
	if g.rowWise() {
		invP, zpP = expand(g, inv), expand(g, zps)
	}
	four := s.DType == qtensor.I4 || s.DType == qtensor.U4
	bounds := chunkBounds(n)
	bad := make([]int, len(bounds)-1)
	par.Run(bounds, func(ci, lo, hi int) {
		bad[ci] = -1
		var scratch []byte
		if four {
			scratch = make([]byte, batch)
		}
		for a := lo; a < hi; a += batch {
			b := min(a+batch, hi)
			var out []byte
			if four {
				out = scratch[:b-a]
			} else {
				out = dst[a:b]
			}
			f := -1
			for p := a; p < b; {
				var e, r int
				if invP != nil {
					off := p % len(invP)
					e = min(b, p+len(invP)-off)
					r = k.Row(x[p:e], invP[off:off+e-p], zpP[off:off+e-p], c, out[p-a:e-a])
				} else {
					gi := g.Of(p)
					e = g.runEnd(p, b)
					r = k.Run(x[p:e], inv[gi], zps[gi], c, out[p-a:e-a])
				}
				if r >= 0 && f < 0 {
					f = p + r
				}
				p = e
			}
			if four {
				k.Pack4(out, dst[a/2:(b+1)/2])
			}
			if f >= 0 && bad[ci] < 0 {
				bad[ci] = f
			}
		}
	})
	if fb := firstOf(bad); checkFinite && fb >= 0 {
		return qtensor.NonFinite(x, fb)
	}
	return nil
}

// expand spreads one value per channel over a period of Dim*Inner
// elements.
func expand[T any](g *Groups, v []T) []T {
	out := make([]T, g.period())
	for j := range out {
		out[j] = v[(j/g.Inner)%g.Dim]
	}
	return out
}

// QuantizeBinary writes the sign bits of x into dst (PackedLen(Binary, n)
// bytes) with the process's kernels; see QuantizeKernels.QuantizeBinary.
func QuantizeBinary(x []float32, s *Spec, computeScales, checkFinite bool, dst []byte) error {
	return QuantizeOp.Get().QuantizeBinary(x, s, computeScales, checkFinite, dst)
}

// CanonicalNaN is the bit pattern of a NaN scale computed from a group that
// holds NaN (check_finite off): the default quiet NaN.
const CanonicalNaN = 0x7FC00000

// pieceLen is the length of the pieces a block's |x| is summed in.
const pieceLen = 1 << 16

// QuantizeBinary writes x's sign bits (bit 1: x >= 0, -0.0 included; NaN:
// 0) into dst. With computeScales it writes s.Scales: mean|x| per group,
// the |x| summed in float64, divided by the group's count in float64 and
// rounded once to float32 (a group of zeros gets scale 0, so its values
// dequantize to 0; a group with NaN gets the canonical NaN, with ±Inf
// +Inf). A block (per tensor: the one block of n values) is summed in
// consecutive pieces of 65536 values (each in order) whose sums are added in
// order; a channel as its runs of Inner consecutive values (each in order)
// whose sums are added in flat order: the result does not depend on the
// thread count. Otherwise s.Scales are checked (finite, > 0).
func (k *QuantizeKernels) QuantizeBinary(x []float32, s *Spec, computeScales, checkFinite bool, dst []byte) error {
	if s.DType != qtensor.Binary {
		return errs.Value("QuantizeBinary writes binary tensors, got %s", s.DType)
	}
	if s.ZeroPoints != nil {
		return errs.Value("zero_points: binary tensors have no zero points")
	}
	if err := s.check(len(x), len(dst)); err != nil {
		return err
	}
	if !computeScales {
		if err := s.checkParams(); err != nil {
			return err
		}
	}
	n := len(x)
	if n == 0 {
		return nil
	}
	bounds := chunkBounds(n)
	bad := make([]int, len(bounds)-1)
	par.Run(bounds, func(ci, lo, hi int) {
		bad[ci] = -1
		if r := k.Signs(x[lo:hi], dst[lo/8:(hi+7)/8]); r >= 0 {
			bad[ci] = lo + r
		}
	})
	fb := firstOf(bad)
	if checkFinite && fb >= 0 {
		return qtensor.NonFinite(x, fb)
	}
	if computeScales {
		k.absMeans(x, &s.Groups, s.Scales)
	}
	return nil
}

// absMeans writes mean|x| per group into scales (see QuantizeBinary).
func (k *QuantizeKernels) absMeans(x []float32, g *Groups, scales []float32) {
	mean := func(sum float64, count int) float32 {
		m := float32(sum / float64(count))
		if m != m {
			return math.Float32frombits(CanonicalNaN)
		}
		return m
	}
	if g.Axis >= 0 {
		per := g.period()
		par.Run(par.ChunksWork(g.Dim, g.N/max(g.Dim, 1)), func(_, lo, hi int) {
			// Row by row, so the last axis (Inner 1) reads each row's slice
			// of channels contiguously; per channel the sums are added in
			// the same order as a channel-by-channel loop.
			sums := make([]float64, hi-lo)
			for r := 0; r < g.N; r += per {
				if g.Inner == 1 {
					for i, v := range x[r+lo : r+hi] {
						sums[i] += math.Abs(float64(v))
					}
					continue
				}
				for c := lo; c < hi; c++ {
					s := r + c*g.Inner
					sums[c-lo] += k.AbsSum(x[s : s+g.Inner])
				}
			}
			for i, sum := range sums {
				scales[lo+i] = mean(sum, g.N/g.Dim)
			}
		})
		return
	}
	bs := g.Block
	if bs == 0 {
		bs = g.N
	}
	if bs <= pieceLen {
		par.Run(par.ChunksWork(g.Count, bs), func(_, lo, hi int) {
			for gi := lo; gi < hi; gi++ {
				e := min((gi+1)*bs, g.N)
				scales[gi] = mean(k.AbsSum(x[gi*bs:e]), e-gi*bs)
			}
		})
		return
	}
	// Blocks longer than a piece: pieces of pieceLen values (the last of a
	// block shorter), summed in parallel and added in order.
	perBlock := (bs + pieceLen - 1) / pieceLen
	sums := make([]float64, g.Count*perBlock)
	par.Run(par.ChunksWork(len(sums), pieceLen), func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			b, p := i/perBlock, i%perBlock
			s := b*bs + p*pieceLen
			e := min(s+pieceLen, (b+1)*bs, g.N)
			if s < e {
				sums[i] = k.AbsSum(x[s:e])
			}
		}
	})
	for gi := range scales {
		var acc float64
		for _, v := range sums[gi*perBlock : (gi+1)*perBlock] {
			acc += v
		}
		scales[gi] = mean(acc, min(bs, g.N-gi*bs))
	}
}
