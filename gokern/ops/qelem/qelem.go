// Package qelem implements the element-wise ops on quantized tensors, bit
// for bit as torch's quantized CPU kernels compute them (FBGEMM engine):
//
//   - Add (torch.ops.quantized.add, add_relu): both operands dequantized,
//     added in float32, the sum quantized with the output's scale and zero
//     point; NumPy broadcasting, as torch's TensorIterator broadcasts.
//   - Relu (torch.relu of a quantized tensor): max(q, zero point), the
//     input's scale and zero point kept.
//   - Requantize: torch.quantize_per_tensor(q.dequantize(), scale, zp,
//     dtype), through the quantizer's own kernels (gokern/quant).
//
// Operands are uint8 or int8 codes with one scale and zero point each (per
// tensor). The arithmetic of Add is torch's vectorised qadd kernel's for
// every element (kernels.go); torch runs its scalar formula, scale*(q-zp),
// on the last n mod 64 elements of each thread's range, which can differ
// from the vectorised one by one code where a sum lands on a rounding tie.
// The hot loops are kernels of the kernel registry (KernelOp): a generic Go
// oracle, an AVX2 family and an AVX-512 one (the default on amd-zen4, see
// gokern/cpu Measurements).
package qelem

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// Operand is one per-tensor quantized tensor: C-contiguous codes (one byte
// each) of DType (int8 or uint8) and Shape, with one scale and zero point.
type Operand struct {
	Name      string // for error messages
	DType     qtensor.DType
	Shape     []int
	Data      []byte
	Scale     float32
	ZeroPoint int32
}

// check validates an operand: its dtype, byte count, scale (finite, > 0)
// and zero point (in the dtype's range).
func (o *Operand) check() error {
	if o.DType != qtensor.I8 && o.DType != qtensor.U8 {
		return errs.Type("%s: dtype must be int8 or uint8, got %s", o.Name, o.DType)
	}
	n := 1
	for _, d := range o.Shape {
		n *= d
	}
	if len(o.Data) != n {
		return errs.Value("%s: %d bytes do not hold its %d values (shape %v)", o.Name, len(o.Data), n, o.Shape)
	}
	if err := quant.CheckScale(o.Name, "'s scale", o.Scale); err != nil {
		return err
	}
	return quant.CheckZeroPoint(o.Name, "'s zero point", o.ZeroPoint, o.DType)
}

// Kernel returns the name of the family ks belongs to, "generic" when none
// matches (a test's own set).
func Kernel(ks *Kernels) string {
	for _, f := range KernelOp.Families() {
		if k, _ := KernelOp.Impl(f); k == ks {
			return string(f)
		}
	}
	return string(cpu.Generic)
}

// BroadcastShape returns the NumPy broadcast of shapes a and b, or a
// ValueError naming the first dimension that does not match.
func BroadcastShape(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := dimFromEnd(a, n-1-i), dimFromEnd(b, n-1-i)
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, errs.Value("shapes %v and %v do not broadcast: %d and %d at dimension %d of the result", a, b, da, db, i)
		}
	}
	return out, nil
}

// dimFromEnd returns s[len(s)-1-k], or 1 where s has fewer dimensions.
func dimFromEnd(s []int, k int) int {
	if k >= len(s) {
		return 1
	}
	return s[len(s)-1-k]
}

// sameShape reports whether a and b are the same shape.
func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// NewAddParams returns the constants of an add of a and b into out (see
// AddParams): the scales and zero points as torch's qadd takes them.
func NewAddParams(a, b, out *Operand, relu bool) AddParams {
	qmin, qmax, _ := quant.Range(out.DType)
	p := AddParams{
		SA: a.Scale, PA: float32(a.Scale * -float32(a.ZeroPoint)),
		SB: b.Scale, PB: float32(b.Scale * -float32(b.ZeroPoint)),
		Inv: float32(1) / out.Scale,
		Lo:  float32(qmin - out.ZeroPoint), Hi: float32(qmax - out.ZeroPoint),
		ZO: out.ZeroPoint,
	}
	if relu {
		p.Lo = 0 // max(sum, 0) then quantize: every negative sum gives ZO, as t = 0 does
	}
	lo, hi, _ := quant.Range(a.DType)
	p.Bounded = bounded(&p, lo, hi)
	return p
}

// bounded reports whether every c*Inv of p stays below 2^31 in magnitude
// (see AddParams.Bounded) for input codes in [lo, hi]: the float64 bound
// (max |deq a| + max |deq b|) * |Inv| below 2^30 leaves room for the
// float32 roundings (each a factor of at most 1 + 2^-24); a NaN or
// infinite parameter gives false.
func bounded(p *AddParams, lo, hi int32) bool {
	most := func(s, z float32) float64 {
		return max(math.Abs(float64(s)*float64(lo)+float64(z)), math.Abs(float64(s)*float64(hi)+float64(z)))
	}
	return (most(p.SA, p.PA)+most(p.SB, p.PB))*math.Abs(float64(p.Inv)) < 1<<30
}

// loop is the broadcast iteration of a binary op: the output's dimensions
// coalesced (size-1 dimensions dropped, neighbours merged where both inputs
// step through them as through one), the innermost of length Inner, and
// the input strides (in elements; 0 where an input is broadcast).
type loop struct {
	dims     []int // outer dimensions, outermost first (the innermost is Inner)
	sa, sb   []int // strides of a and b along dims
	inner    int
	ia, ib   int // strides of a and b along the innermost dimension: 0 or 1
	elements int
}

// newLoop plans the iteration of out = a op b over the broadcast shape out.
func newLoop(a, b, out []int) loop {
	n := len(out)
	stride := func(s []int) []int {
		st := make([]int, n)
		acc := 1
		for i := n - 1; i >= 0; i-- {
			d := dimFromEnd(s, n-1-i)
			if d == 1 {
				st[i] = 0
			} else {
				st[i] = acc
			}
			acc *= d
		}
		return st
	}
	sa, sb := stride(a), stride(b)
	var dims, xa, xb []int
	for i := range n {
		if out[i] == 1 {
			continue
		}
		if k := len(dims) - 1; k >= 0 && xa[k] == sa[i]*out[i] && xb[k] == sb[i]*out[i] {
			dims[k] *= out[i]
			xa[k], xb[k] = sa[i], sb[i]
			continue
		}
		dims, xa, xb = append(dims, out[i]), append(xa, sa[i]), append(xb, sb[i])
	}
	l := loop{inner: 1, elements: 1}
	if k := len(dims) - 1; k >= 0 {
		l.inner, l.ia, l.ib = dims[k], xa[k], xb[k]
		l.dims, l.sa, l.sb = dims[:k], xa[:k], xb[:k]
	}
	for _, d := range dims {
		l.elements *= d
	}
	return l
}

// offsets returns the offsets in a and b of the first element of row r
// (the r-th innermost run of the output).
func (l *loop) offsets(r int) (oa, ob int) {
	for k := len(l.dims) - 1; k >= 0; k-- {
		i := r % l.dims[k]
		r /= l.dims[k]
		oa += i * l.sa[k]
		ob += i * l.sb[k]
	}
	return oa, ob
}

// addWork is an add's work per element for par.ChunksWork, in units of one
// element of a pass over memory: the AVX-512 kernel does about 8 G elements
// a second on a Zen 4 core (the AVX2 one about 6), a quarter to a third of
// the speed of a plain pass.
const addWork = 4

// reluWork is a relu's work per element for par.ChunksWork (see addWork):
// a byte read and one written, about as long as an element of a plain
// float32 pass each. At 1 as before, 1M codes (33 us on one Zen 4 core)
// stayed on one thread: 35 us at 2 threads, against 22 us split (medians of
// 300 calls, 4 alternated rounds; torch.relu on the same quint8 tensor:
// 19 us).
const reluWork = 2

// Add writes the quantized sum of a and b (broadcast as NumPy broadcasts)
// into out, whose shape must be the broadcast shape and whose dtype a's and
// b's; relu fuses max(., zero point) (torch's add_relu). ks is the kernel
// set (KernelOp.Get() in the library).
func Add(ks *Kernels, a, b, out *Operand, relu bool) error {
	for _, o := range []*Operand{a, b, out} {
		if err := o.check(); err != nil {
			return err
		}
	}
	if a.DType != b.DType || out.DType != a.DType {
		return errs.Type("a, b and out must have one dtype (torch adds only tensors of one dtype), got %s, %s and %s",
			a.DType, b.DType, out.DType)
	}
	shape, err := BroadcastShape(a.Shape, b.Shape)
	if err != nil {
		return err
	}
	if !sameShape(shape, out.Shape) {
		return errs.Value("out: shape %v must be the broadcast shape of a and b, %v", out.Shape, shape)
	}
	p := NewAddParams(a, b, out, relu)
	l := newLoop(a.Shape, b.Shape, shape)
	if l.elements == 0 {
		return nil
	}
	signed := a.DType == qtensor.I8
	add, addConst := ks.AddU8, ks.AddConstU8
	deq := func(v byte) int32 { return int32(v) }
	if signed {
		add, addConst = ks.AddI8, ks.AddConstI8
		deq = func(v byte) int32 { return int32(int8(v)) }
	}
	// One row's part [lo, hi) of the innermost run at offsets oa, ob.
	row := func(oa, ob, lo, hi int) {
		dst := out.Data[lo:hi]
		switch {
		case l.ia == 1 && l.ib == 1:
			add(a.Data[oa:oa+hi-lo], b.Data[ob:ob+hi-lo], &p, dst)
		case l.ia == 1:
			addConst(a.Data[oa:oa+hi-lo], Deq(p.SB, p.PB, deq(b.Data[ob])), &p, dst)
		case l.ib == 1:
			q := p
			q.SA, q.PA = p.SB, p.PB
			addConst(b.Data[ob:ob+hi-lo], Deq(p.SA, p.PA, deq(a.Data[oa])), &q, dst)
		default: // one element (inner == 1)
			c := float32(Deq(p.SA, p.PA, deq(a.Data[oa])) + Deq(p.SB, p.PB, deq(b.Data[ob])))
			for i := range dst {
				dst[i] = byte(Code(c, &p))
			}
		}
	}
	par.Run(par.ChunksWork(l.elements, addWork), func(_, lo, hi int) {
		for s := lo; s < hi; {
			r, col := s/l.inner, s%l.inner
			e := min(hi, s-col+l.inner)
			oa, ob := l.offsets(r)
			row(oa+col*l.ia, ob+col*l.ib, s, e)
			s = e
		}
	})
	return nil
}

// Relu writes max(x, x's zero point) into out (x's dtype and shape; the
// output keeps x's scale and zero point, which out's must equal).
func Relu(ks *Kernels, x, out *Operand) error {
	for _, o := range []*Operand{x, out} {
		if err := o.check(); err != nil {
			return err
		}
	}
	if out.DType != x.DType || !sameShape(x.Shape, out.Shape) {
		return errs.Value("out must have x's dtype and shape (%s %v), got %s %v", x.DType, x.Shape, out.DType, out.Shape)
	}
	if out.Scale != x.Scale || out.ZeroPoint != x.ZeroPoint {
		return errs.Value("out: relu keeps x's scale and zero point (%v, %d), got %v, %d", x.Scale, x.ZeroPoint, out.Scale, out.ZeroPoint)
	}
	k := ks.ReluU8
	if x.DType == qtensor.I8 {
		k = ks.ReluI8
	}
	par.Run(par.ChunksWork(len(x.Data), reluWork), func(_, lo, hi int) {
		k(x.Data[lo:hi], x.ZeroPoint, out.Data[lo:hi])
	})
	return nil
}

// requantBatch is how many values Requantize dequantizes into a worker's
// float32 buffer before quantizing them.
const requantBatch = 4096

// Requantize writes x requantized to out's dtype, scale and zero point:
// torch.quantize_per_tensor(x.dequantize(), scale, zero_point, dtype), i.e.
// the quantizer's dequantize (scale * float32(q - zp)) and quantize
// (clamp(zp + nearbyint(v * float32(1/scale)))). With a finite 1/scale the
// fused kernel of ks does both (no value is NaN); otherwise (a subnormal
// out scale: 0 * Inf is NaN, whose code the quantizer decides) the
// quantizer's kernels of dk and qk, one batch at a time. x and out have
// one shape; their dtypes may differ.
func Requantize(ks *Kernels, dk *quant.DequantizeKernels, qk *quant.QuantizeKernels, x, out *Operand) error {
	for _, o := range []*Operand{x, out} {
		if err := o.check(); err != nil {
			return err
		}
	}
	if !sameShape(x.Shape, out.Shape) {
		return errs.Value("out: shape %v must be x's shape %v", out.Shape, x.Shape)
	}
	qmin, qmax, _ := quant.Range(out.DType)
	inv := float32(1) / out.Scale
	if qtensor.Finite(inv) {
		p := requantParams(out)
		k := ks.Requant[b2i(x.DType == qtensor.I8)][b2i(out.DType == qtensor.I8)]
		par.Run(par.ChunksWork(len(x.Data), addWork), func(_, lo, hi int) {
			k(x.Data[lo:hi], x.Scale, x.ZeroPoint, &p, out.Data[lo:hi])
		})
		return nil
	}
	deq := dk.RunU8
	if x.DType == qtensor.I8 {
		deq = dk.RunI8
	}
	c := quant.Clamp{QMin: qmin, QMax: qmax, NaN: quant.NaNCode(out.DType, true, out.ZeroPoint, qmin, qmax)}
	par.Run(par.ChunksWork(len(x.Data), addWork), func(_, lo, hi int) {
		var buf [requantBatch]float32
		for s := lo; s < hi; s += requantBatch {
			e := min(hi, s+requantBatch)
			v := buf[:e-s]
			deq(x.Data[s:e], x.Scale, x.ZeroPoint, v)
			qk.Run(v, inv, out.ZeroPoint, c, out.Data[s:e])
		}
	})
	return nil
}

// requantParams returns the output constants of a requantize into out (the
// Inv, Lo, Hi and ZO of an AddParams; the rest zero).
func requantParams(out *Operand) AddParams {
	qmin, qmax, _ := quant.Range(out.DType)
	return AddParams{Inv: float32(1) / out.Scale, Lo: float32(qmin - out.ZeroPoint), Hi: float32(qmax - out.ZeroPoint), ZO: out.ZeroPoint}
}

// b2i is 1 for true, 0 for false (an index of Kernels.Requant).
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
