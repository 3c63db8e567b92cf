package qelem

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// Every family's kernels against the generic ones bit for bit (lengths
// 0..300 and a few large ones: every tail of the 32- and 128-code blocks),
// and the ops (broadcasting, relu, requantize, errors) against plain
// element-by-element references.

var lengths = func() []int {
	var ns []int
	for n := 0; n <= 300; n++ {
		ns = append(ns, n)
	}
	return append(ns, 511, 512, 513, 4095, 4097, 10007)
}()

// randScale returns a scale: a power of two (sums land on rounding ties), a
// random float, or an extreme one.
func randScale(r *rand.Rand) float32 {
	switch r.IntN(6) {
	case 0, 1:
		return float32(math.Ldexp(1, r.IntN(12)-9))
	case 2:
		return float32(math.Ldexp(1, r.IntN(200)-100)) * (1 + float32(r.IntN(8))/8)
	default:
		return float32(r.Float64()*2 + 1e-3)
	}
}

// randParams returns an add's parameters for one dtype: random scales and
// zero points (0, the middle, the ends or random), relu or not.
func randParams(r *rand.Rand, dt qtensor.DType) (a, b, out Operand, relu bool) {
	lo, hi, _ := quant.Range(dt)
	zp := func() int32 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return (lo + hi + 1) / 2
		case 2:
			return []int32{lo, hi}[r.IntN(2)]
		}
		return lo + r.Int32N(hi-lo+1)
	}
	mk := func(name string) Operand {
		return Operand{Name: name, DType: dt, Scale: randScale(r), ZeroPoint: zp()}
	}
	a, b, out = mk("a"), mk("b"), mk("out")
	if r.IntN(3) == 0 { // the output scale of the inputs: many exact ties
		out.Scale = a.Scale
	}
	return a, b, out, r.IntN(2) == 0
}

func randBytes(r *rand.Rand, n int) []byte {
	x := make([]byte, n)
	for i := range x {
		x[i] = byte(r.IntN(256))
	}
	return x
}

func TestFamiliesMatchGeneric(t *testing.T) {
	fams := KernelOp.Families()
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range fams[1:] {
		ks, _ := KernelOp.Impl(f)
		for _, n := range lengths {
			for _, dt := range []qtensor.DType{qtensor.U8, qtensor.I8} {
				a, b, out, relu := randParams(r, dt)
				p := NewAddParams(&a, &b, &out, relu)
				qa, qb := randBytes(r, n), randBytes(r, n)
				lo, _, _ := quant.Range(dt)
				d := Deq(p.SB, p.PB, lo+r.Int32N(256)) // a broadcast b's dequantized code
				type run struct {
					name      string
					got, want func(dst []byte)
				}
				add, gadd, addc, gaddc, relu8, grelu := ks.AddU8, genericKernels.AddU8, ks.AddConstU8, genericKernels.AddConstU8, ks.ReluU8, genericKernels.ReluU8
				if dt == qtensor.I8 {
					add, gadd, addc, gaddc, relu8, grelu = ks.AddI8, genericKernels.AddI8, ks.AddConstI8, genericKernels.AddConstI8, ks.ReluI8, genericKernels.ReluI8
				}
				for _, c := range []run{
					{"add", func(dst []byte) { add(qa, qb, &p, dst) }, func(dst []byte) { gadd(qa, qb, &p, dst) }},
					{"addconst", func(dst []byte) { addc(qa, d, &p, dst) }, func(dst []byte) { gaddc(qa, d, &p, dst) }},
					{"relu", func(dst []byte) { relu8(qa, out.ZeroPoint, dst) }, func(dst []byte) { grelu(qa, out.ZeroPoint, dst) }},
				} {
					got, want := randBytes(r, n+1), randBytes(r, n+1)
					got[n] = want[n]
					c.got(got[:n])
					c.want(want[:n])
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s %s n=%d %s params %+v relu %v: byte %d is %d, generic %d", f, c.name, n, dt, p, relu, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestRequantMatchesGeneric: every family's fused requantize kernels
// against the generic ones, every pair of dtypes, every tail length.
func TestRequantMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dts := []qtensor.DType{qtensor.U8, qtensor.I8}
	for _, f := range KernelOp.Families()[1:] {
		ks, _ := KernelOp.Impl(f)
		for _, n := range lengths {
			for i, in := range dts {
				for o, od := range dts {
					x, _, _, _ := randParams(r, in)
					out, _, _, _ := randParams(r, od)
					if r.IntN(3) == 0 { // the same scale: every value lands on an integer
						out.Scale = x.Scale
					}
					p := requantParams(&out)
					if !qtensor.Finite(p.Inv) {
						continue
					}
					q := randBytes(r, n)
					got, want := randBytes(r, n+1), randBytes(r, n+1)
					got[n] = want[n]
					ks.Requant[i][o](q, x.Scale, x.ZeroPoint, &p, got[:n])
					genericKernels.Requant[i][o](q, x.Scale, x.ZeroPoint, &p, want[:n])
					if j := firstDiff(got, want); j >= 0 {
						t.Fatalf("%s requant %s -> %s n=%d x %+v params %+v: byte %d is %d, generic %d", f, in, od, n, x, p, j, got[j], want[j])
					}
				}
			}
		}
	}
}

// TestKernelsSpecialSums: sums that overflow float32 (huge scales), NaN
// sums (Inf - Inf, through the constant), products far outside the range
// (tiny output scales) and exact ties, for every family.
func TestKernelsSpecialSums(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	inf := float32(math.Inf(1))
	for _, f := range KernelOp.Families() {
		ks, _ := KernelOp.Impl(f)
		for _, tc := range []struct {
			name    string
			p       AddParams
			d       float32
			bounded bool // what bounded gives: the kernels with the clip at Hi, or without
		}{
			{"overflow", AddParams{SA: 3e38, PA: 0, SB: 3e38, PB: 0, Inv: 1, Lo: -128, Hi: 127, ZO: 128}, inf, false},
			{"nan", AddParams{SA: 3e38, PA: 0, SB: 1, PB: 0, Inv: 1, Lo: -255, Hi: 0, ZO: 255}, float32(math.NaN()), false},
			{"tiny out scale", AddParams{SA: 1, PA: -3, SB: 1, PB: 0, Inv: 1e30, Lo: -200, Hi: 55, ZO: 200}, -inf, false},
			// products past int16 but inside int32: the kernels' saturating
			// word packs (and the zero point added with saturation), with
			// no clip at Hi
			{"wide products", AddParams{SA: 1, PA: -128, SB: 1, PB: -100, Inv: 1e4, Lo: -120, Hi: 135, ZO: 120}, -1e2, true},
			{"wide products relu", AddParams{SA: 1, PA: -128, SB: 1, PB: -100, Inv: 3e2, Lo: 0, Hi: 135, ZO: 120}, 1, true},
			{"products near 2^30", AddParams{SA: 1, PA: -128, SB: 1, PB: -100, Inv: 2e6, Lo: -120, Hi: 135, ZO: 120}, 2, true},
			{"products past 2^31", AddParams{SA: 1, PA: -128, SB: 1, PB: -100, Inv: 1e7, Lo: -120, Hi: 135, ZO: 120}, 2, false},
			{"ties", AddParams{SA: 0.5, PA: -64, SB: 0.25, PB: -3, Inv: 1, Lo: 0, Hi: 127, ZO: 128}, 0.5, true},
		} {
			for _, n := range []int{31, 32, 100, 257} {
				a, b := randBytes(r, n), randBytes(r, n)
				for _, signed := range []bool{false, true} {
					add, gadd, addc, gaddc := ks.AddU8, genericKernels.AddU8, ks.AddConstU8, genericKernels.AddConstU8
					if signed {
						add, gadd, addc, gaddc = ks.AddI8, genericKernels.AddI8, ks.AddConstI8, genericKernels.AddConstI8
					}
					p := tc.p // the parameters are uint8's: int8's range is 128 lower
					lo, hi := int32(0), int32(255)
					if signed {
						p.ZO -= 128
						lo, hi = -128, 127
					}
					// bounded's verdict for the dtype's codes (the same
					// for both here); d, where Bounded, is one of b's
					// dequantized codes in both dtypes, as Add passes
					if p.Bounded = bounded(&p, lo, hi); p.Bounded != tc.bounded {
						t.Fatalf("%s signed %v: bounded %v, want %v", tc.name, signed, p.Bounded, tc.bounded)
					}
					got, want := make([]byte, n), make([]byte, n)
					add(a, b, &p, got)
					gadd(a, b, &p, want)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s %s add signed %v: byte %d is %d, generic %d", f, tc.name, signed, i, got[i], want[i])
					}
					addc(a, tc.d, &p, got)
					gaddc(a, tc.d, &p, want)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s %s addconst signed %v: byte %d is %d, generic %d", f, tc.name, signed, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestCodeRules pins the quantization rule the kernels share: the clamp,
// NaN to Hi, ties to even.
func TestCodeRules(t *testing.T) {
	p := AddParams{Inv: 1, Lo: -10, Hi: 20, ZO: 5}
	for _, tc := range []struct {
		c    float32
		want int32
	}{{0.5, 5}, {1.5, 7}, {2.5, 7}, {-0.5, 5}, {-1.5, 3}, {100, 25}, {-100, -5}, {float32(math.NaN()), 25},
		{float32(math.Inf(1)), 25}, {float32(math.Inf(-1)), -5}} {
		if got := Code(tc.c, &p); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.c, got, tc.want)
		}
	}
	// Deq is the float32 FMA: one rounding of s*q + p.
	s, q, pre := float32(0.1), int32(7), float32(float32(0.1)*-3)
	exact := float64(s)*float64(q) + float64(pre)
	if got := Deq(s, pre, q); got != float32(exact) {
		t.Errorf("Deq = %v, want %v", got, float32(exact))
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// refIndex returns the flat index in a tensor of shape s of the output
// element at multi-index idx (broadcast: size-1 dimensions read index 0).
func refIndex(s, idx []int) int {
	off, k := 0, len(idx)-len(s)
	for i, d := range s {
		j := idx[k+i]
		if d == 1 {
			j = 0
		}
		off = off*d + j
	}
	return off
}

// refAdd is Add element by element on the broadcast shape.
func refAdd(a, b, out *Operand, relu bool) []byte {
	p := NewAddParams(a, b, out, relu)
	deq := func(o *Operand, v byte) int32 {
		if o.DType == qtensor.I8 {
			return int32(int8(v))
		}
		return int32(v)
	}
	n := 1
	for _, d := range out.Shape {
		n *= d
	}
	res := make([]byte, n)
	idx := make([]int, len(out.Shape))
	for i := range n {
		rem := i
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k] = rem % out.Shape[k]
			rem /= out.Shape[k]
		}
		c := float32(Deq(p.SA, p.PA, deq(a, a.Data[refIndex(a.Shape, idx)])) + Deq(p.SB, p.PB, deq(b, b.Data[refIndex(b.Shape, idx)])))
		res[i] = byte(Code(c, &p))
	}
	return res
}

// randBroadcast returns two shapes that broadcast: a random output shape,
// each input dropping leading dimensions and setting some to 1.
func randBroadcast(r *rand.Rand) (a, b []int) {
	nd := r.IntN(5)
	out := make([]int, nd)
	for i := range out {
		out[i] = 1 + r.IntN(7)
		if r.IntN(4) == 0 {
			out[i] = 30 + r.IntN(80)
		}
	}
	in := func() []int {
		s := slices.Clone(out[r.IntN(nd+1):])
		for i := range s {
			if r.IntN(3) == 0 {
				s[i] = 1
			}
		}
		return s
	}
	if r.IntN(4) == 0 {
		return out, slices.Clone(out)
	}
	return in(), in()
}

func TestAddBroadcastsLikeTheReference(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1)) // split small shapes over every thread
	defer func(n int) { _ = par.SetThreads(n) }(par.Threads())
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range KernelOp.Families() {
		ks, _ := KernelOp.Impl(f)
		for it := range 300 {
			_ = par.SetThreads(1 + it%3)
			dt := []qtensor.DType{qtensor.U8, qtensor.I8}[it%2]
			a, b, out, relu := randParams(r, dt)
			a.Shape, b.Shape = randBroadcast(r)
			var err error
			if out.Shape, err = BroadcastShape(a.Shape, b.Shape); err != nil {
				t.Fatal(err)
			}
			a.Data, b.Data = randBytes(r, prod(a.Shape)), randBytes(r, prod(b.Shape))
			out.Data = randBytes(r, prod(out.Shape))
			want := refAdd(&a, &b, &out, relu)
			if err := Add(ks, &a, &b, &out, relu); err != nil {
				t.Fatalf("%s %v + %v: %v", f, a.Shape, b.Shape, err)
			}
			if i := firstDiff(out.Data, want); i >= 0 {
				t.Fatalf("%s %s %v + %v relu %v: element %d is %d, want %d", f, dt, a.Shape, b.Shape, relu, i, out.Data[i], want[i])
			}
		}
	}
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func TestNewLoopCoalesces(t *testing.T) {
	for _, tc := range []struct {
		a, b          []int
		dims          []int
		inner, ia, ib int
	}{
		{[]int{4, 5, 6}, []int{4, 5, 6}, nil, 120, 1, 1},
		{[]int{4, 5, 6}, []int{6}, []int{20}, 6, 1, 1},
		{[]int{4, 1}, []int{1, 6}, []int{4}, 6, 0, 1},
		{[]int{4, 6}, []int{4, 1}, []int{4}, 6, 1, 0},
		{[]int{1, 1}, []int{}, nil, 1, 0, 0},
		{[]int{3, 1, 5}, []int{3, 1, 5}, nil, 15, 1, 1},
		{[]int{2, 3, 4}, []int{2, 1, 4}, []int{2, 3}, 4, 1, 1},
	} {
		out, err := BroadcastShape(tc.a, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		l := newLoop(tc.a, tc.b, out)
		if !slices.Equal(l.dims, tc.dims) || l.inner != tc.inner || l.ia != tc.ia || l.ib != tc.ib || l.elements != prod(out) {
			t.Errorf("%v + %v: dims %v inner %d strides %d %d elements %d, want %v %d %d %d", tc.a, tc.b, l.dims, l.inner, l.ia, l.ib, l.elements, tc.dims, tc.inner, tc.ia, tc.ib)
		}
	}
}

func TestReluAndRequantize(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	dk, qk := quant.DequantizeOp.Get(), quant.QuantizeOp.Get()
	for _, f := range KernelOp.Families() {
		ks, _ := KernelOp.Impl(f)
		for _, n := range []int{1, 7, 127, 128, 129, 1000, 70001} {
			for _, dt := range []qtensor.DType{qtensor.U8, qtensor.I8} {
				x, _, out, _ := randParams(r, dt)
				x.Shape, x.Data = []int{n}, randBytes(r, n)
				y := Operand{Name: "out", DType: dt, Shape: x.Shape, Data: make([]byte, n), Scale: x.Scale, ZeroPoint: x.ZeroPoint}
				if err := Relu(ks, &x, &y); err != nil {
					t.Fatal(err)
				}
				for i, v := range x.Data {
					want := max(int32(v), x.ZeroPoint)
					if dt == qtensor.I8 {
						want = max(int32(int8(v)), x.ZeroPoint)
					}
					if y.Data[i] != byte(want) {
						t.Fatalf("%s relu %s n=%d zp %d: element %d is %d, want %d", f, dt, n, x.ZeroPoint, i, y.Data[i], byte(want))
					}
				}
				// Requantize to either dtype: the quantizer's dequantize then quantize.
				out.DType = []qtensor.DType{qtensor.U8, qtensor.I8}[r.IntN(2)]
				lo, hi, _ := quant.Range(out.DType)
				out.ZeroPoint = lo + r.Int32N(hi-lo+1)
				out.Shape, out.Data = x.Shape, make([]byte, n)
				if r.IntN(6) == 0 { // a subnormal scale: 1/scale is +Inf, the quantizer's path (NaN codes)
					out.Scale = 1e-40
				}
				if err := Requantize(ks, dk, qk, &x, &out); err != nil {
					t.Fatal(err)
				}
				v := make([]float32, n)
				zps := []int32{x.ZeroPoint}
				xs := quant.Spec{DType: dt, Groups: quant.Groups{N: n, Count: 1, Axis: -1}, Scales: []float32{x.Scale}, ZeroPoints: zps}
				if err := quant.Dequantize(x.Data, &xs, v); err != nil {
					t.Fatal(err)
				}
				want := make([]byte, n)
				os := quant.Spec{DType: out.DType, Groups: quant.Groups{N: n, Count: 1, Axis: -1}, Scales: []float32{out.Scale},
					ZeroPoints: []int32{out.ZeroPoint}, QMin: lo, QMax: hi}
				if err := quant.Quantize(v, &os, false, want); err != nil {
					t.Fatal(err)
				}
				if i := firstDiff(out.Data, want); i >= 0 {
					t.Fatalf("requantize %s -> %s n=%d: element %d is %d, want %d", dt, out.DType, n, i, out.Data[i], want[i])
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	ks := KernelOp.Get()
	op := func(name string, dt qtensor.DType, shape []int, scale float32, zp int32) *Operand {
		return &Operand{Name: name, DType: dt, Shape: shape, Data: make([]byte, prod(shape)), Scale: scale, ZeroPoint: zp}
	}
	u8 := func(name string, shape ...int) *Operand { return op(name, qtensor.U8, shape, 0.5, 3) }
	for _, tc := range []struct {
		name string
		err  error
		kind errs.Kind
		msg  string
	}{
		{"dtype", Add(ks, op("a", qtensor.I4, []int{4}, 1, 0), u8("b", 4), u8("out", 4), false), errs.KindType, "int8 or uint8"},
		{"mixed", Add(ks, op("a", qtensor.I8, []int{4}, 1, 0), u8("b", 4), u8("out", 4), false), errs.KindType, "one dtype"},
		{"broadcast", Add(ks, u8("a", 2, 3), u8("b", 2, 4), u8("out", 2, 3), false), errs.KindValue, "do not broadcast"},
		{"out shape", Add(ks, u8("a", 2, 3), u8("b", 3), u8("out", 3), false), errs.KindValue, "broadcast shape"},
		{"scale", Add(ks, op("a", qtensor.U8, []int{4}, 0, 0), u8("b", 4), u8("out", 4), false), errs.KindValue, "finite and > 0"},
		{"nan scale", Add(ks, u8("a", 4), u8("b", 4), op("out", qtensor.U8, []int{4}, float32(math.NaN()), 0), false), errs.KindValue, "finite and > 0"},
		{"zero point", Add(ks, u8("a", 4), op("b", qtensor.I8, []int{4}, 1, 200), op("out", qtensor.I8, []int{4}, 1, 0), false), errs.KindValue, "zero point"},
		{"bytes", Add(ks, &Operand{Name: "a", DType: qtensor.U8, Shape: []int{4}, Data: make([]byte, 3), Scale: 1}, u8("b", 4), u8("out", 4), false), errs.KindValue, "bytes"},
		{"relu params", Relu(ks, u8("x", 4), op("out", qtensor.U8, []int{4}, 0.25, 3)), errs.KindValue, "keeps x's scale"},
		{"relu shape", Relu(ks, u8("x", 4), u8("out", 5)), errs.KindValue, "shape"},
		{"requantize shape", Requantize(&genericKernels, quant.DequantizeOp.Get(), quant.QuantizeOp.Get(), u8("x", 4), u8("out", 2, 2)), errs.KindValue, "shape"},
	} {
		if tc.err == nil || errs.KindOf(tc.err) != tc.kind || !strings.Contains(tc.err.Error(), tc.msg) {
			t.Errorf("%s: got %v (kind %v), want kind %v with %q", tc.name, tc.err, errs.KindOf(tc.err), tc.kind, tc.msg)
		}
	}
}

func TestKernelNames(t *testing.T) {
	for _, f := range KernelOp.Families() {
		ks, _ := KernelOp.Impl(f)
		if got := Kernel(ks); got != string(f) {
			t.Errorf("Kernel(%s's set) = %s", f, got)
		}
	}
	if got := Kernel(&Kernels{}); got != string(cpu.Generic) {
		t.Errorf("Kernel(an unknown set) = %s", got)
	}
}
