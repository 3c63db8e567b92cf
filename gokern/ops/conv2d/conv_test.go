package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// testCase is a random convolution: geometry, data, ternary weight.
type testCase struct {
	d    Dims
	x    []float32
	q    []int8 // the weight's ternary values
	w    Weights
	bias []float32
}

func (tc *testCase) String() string {
	s := tc.d.Shape
	return fmt.Sprintf("N%d C%d %dx%d O%d k%dx%d g%d s%d,%d p%d,%d,%d,%d d%d,%d bs%d bias%v",
		s.N, s.C, s.H, s.W, s.O, s.KH, s.KW, s.Groups, s.StrideH, s.StrideW, s.PadT, s.PadL, s.PadB, s.PadR,
		s.DilH, s.DilW, tc.w.BlockSize, tc.bias != nil)
}

// newCase builds a case for shape s with weight block size bs (0: one scale).
func newCase(t testing.TB, rng *rand.Rand, s Shape, bs int, withBias bool) *testCase {
	d, err := s.Check()
	if err != nil {
		t.Fatalf("%+v: %v", s, err)
	}
	tc := &testCase{d: d, x: make([]float32, d.XLen), q: make([]int8, d.WLen)}
	for i := range tc.x {
		tc.x[i] = float32(rng.NormFloat64())
	}
	for i := range tc.q {
		tc.q[i] = int8(rng.IntN(3) - 1)
	}
	packed := make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(tc.q, packed); err != nil {
		t.Fatal(err)
	}
	scales := make([]float32, ternary.NumBlocks(d.WLen, bs))
	for i := range scales {
		scales[i] = 0.05 + rng.Float32()
	}
	tc.w = Weights{Packed: packed, Scales: scales, BlockSize: bs}
	if withBias {
		tc.bias = make([]float32, d.O)
		for i := range tc.bias {
			tc.bias[i] = float32(rng.NormFloat64())
		}
	}
	return tc
}

// randShape draws a small random geometry that is valid.
func randShape(rng *rand.Rand) Shape {
	for {
		g := []int{1, 1, 2, 4, 0}[rng.IntN(5)]
		cg := 1 + rng.IntN(6)
		if rng.IntN(4) == 0 {
			cg = 16 + rng.IntN(24) // K above the 256-value chunk
		}
		if g == 0 { // depthwise, with a channel multiplier
			g, cg = 1+rng.IntN(6), 1
		}
		s := Shape{
			N: 1 + rng.IntN(2), C: g * cg, H: 1 + rng.IntN(21), W: 1 + rng.IntN(21),
			O: g * (1 + rng.IntN(9)), WC: cg, KH: 1 + rng.IntN(5), KW: 1 + rng.IntN(5), Groups: g,
			StrideH: 1 + rng.IntN(3), StrideW: 1 + rng.IntN(3),
			PadT: rng.IntN(3), PadL: rng.IntN(3), PadB: rng.IntN(3), PadR: rng.IntN(3),
			DilH: 1 + rng.IntN(3), DilW: 1 + rng.IntN(3),
		}
		switch rng.IntN(5) {
		case 0: // pointwise
			s.KH, s.KW, s.StrideH, s.StrideW, s.PadT, s.PadL, s.PadB, s.PadR = 1, 1, 1, 1, 0, 0, 0, 0
		case 1: // larger plane: several column tiles
			s.H, s.W, s.StrideH, s.StrideW, s.DilH, s.DilW = 20+rng.IntN(20), 20+rng.IntN(20), 1, 1, 1, 1
		}
		if _, err := s.Check(); err == nil {
			return s
		}
	}
}

// randBlockSize picks 0 (per tensor), K (per channel) or a divisor of K.
func randBlockSize(rng *rand.Rand, k int) int {
	switch rng.IntN(3) {
	case 0:
		return 0
	case 1:
		return k
	}
	var ds []int
	for i := 1; i <= k; i++ {
		if k%i == 0 && k/i <= 8 {
			ds = append(ds, i)
		}
	}
	return ds[rng.IntN(len(ds))]
}

// ref64 is an independent float64 statement of the float path: sum over
// taps of value*scale*x, plus bias; it also returns the sum of |terms|.
func ref64(tc *testCase) (out, mag []float64) {
	d := &tc.d
	out, mag = make([]float64, d.OutLen), make([]float64, d.OutLen)
	nb, bl := 1, d.K
	if len(tc.w.Scales) > 1 {
		bl = tc.w.BlockSize
		nb = d.K / bl
	}
	for n := range d.N {
		for o := range d.O {
			g := o / d.Og
			for oh := range d.Ho {
				for ow := range d.Wo {
					var s, m float64
					for k := range d.K {
						c, i, j := k/(d.KH*d.KW), k/d.KW%d.KH, k%d.KW
						ih, iw := oh*d.StrideH-d.PadT+i*d.DilH, ow*d.StrideW-d.PadL+j*d.DilW
						if ih < 0 || ih >= d.H || iw < 0 || iw >= d.W {
							continue
						}
						sc := tc.w.Scales[0]
						if nb > 1 || len(tc.w.Scales) > 1 {
							sc = tc.w.Scales[o*nb+k/bl]
						}
						v := float64(tc.q[o*d.K+k]) * float64(sc) * float64(tc.x[((n*d.C+g*d.Cg+c)*d.H+ih)*d.W+iw])
						s += v
						m += math.Abs(v)
					}
					if tc.bias != nil {
						s += float64(tc.bias[o])
						m += math.Abs(float64(tc.bias[o]))
					}
					idx := ((n*d.O+o)*d.Ho+oh)*d.Wo + ow
					out[idx], mag[idx] = s, m
				}
			}
		}
	}
	return out, mag
}

// ref8 states the int8 path independently: quantize each sample, integer
// sums per scale block in int64, then the documented float32 operations.
func ref8(tc *testCase) []float32 {
	d := &tc.d
	per := d.C * d.H * d.W
	out := make([]float32, d.OutLen)
	nb, bl := 1, d.K
	if len(tc.w.Scales) > 1 {
		bl = tc.w.BlockSize
		nb = d.K / bl
	}
	for n := range d.N {
		var m float32
		for _, v := range tc.x[n*per : (n+1)*per] {
			m = float32(math.Max(float64(m), math.Abs(float64(v))))
		}
		a := float32(127) / float32(math.Max(float64(m), float64(float32(1e-5))))
		q := make([]int64, per)
		for i, v := range tc.x[n*per : (n+1)*per] {
			q[i] = int64(math.Max(-128, math.Min(127, math.RoundToEven(float64(v*a)))))
		}
		for o := range d.O {
			g := o / d.Og
			for oh := range d.Ho {
				for ow := range d.Wo {
					var y float32
					for b := range nb {
						var acc int64
						for k := b * bl; k < (b+1)*bl; k++ {
							c, i, j := k/(d.KH*d.KW), k/d.KW%d.KH, k%d.KW
							ih, iw := oh*d.StrideH-d.PadT+i*d.DilH, ow*d.StrideW-d.PadL+j*d.DilW
							if ih >= 0 && ih < d.H && iw >= 0 && iw < d.W {
								acc += int64(tc.q[o*d.K+k]) * q[((g*d.Cg+c)*d.H+ih)*d.W+iw]
							}
						}
						sc := tc.w.Scales[0]
						if len(tc.w.Scales) > 1 {
							sc = tc.w.Scales[o*nb+b]
						}
						t := float32(float32(acc)/a) * sc
						if b == 0 {
							y = t
						} else {
							y = y + t
						}
					}
					if tc.bias != nil {
						y = y + tc.bias[o]
					}
					out[((n*d.O+o)*d.Ho+oh)*d.Wo+ow] = y
				}
			}
		}
	}
	return out
}

// kindsFor lists every kernel that can run d.
func kindsFor(d *Dims) []Algo {
	ks := []Algo{Naive, Im2col, Direct}
	if d.Depthwise() {
		ks = append(ks, Depthwise)
	}
	if d.Pointwise() {
		ks = append(ks, Pointwise)
	}
	return ks
}

func runKind(t testing.TB, tc *testCase, kind Algo, act8 bool, ks *gemm.Kernels) []float32 {
	sc, err := newScaler(&tc.d, tc.w, tc.bias)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, tc.d.OutLen)
	for i := range out {
		out[i] = float32(math.NaN()) // every element must be written
	}
	k := selected()
	k.gemm = ks
	var acts *activations
	if act8 {
		acts = actScales(&tc.d, tc.x, k.scan, nil)
		acts.quantize(&tc.d, tc.x, ks.QuantI8)
		defer acts.release()
	}
	if _, err := run(kind, &tc.d, tc.x, acts, tc.w, sc, out, k, unknownMax); err != nil {
		t.Fatalf("%v %v: %v", tc, kind, err)
	}
	return out
}

func checkF32(t *testing.T, what string, got []float32, want, mag []float64) {
	t.Helper()
	var num, den float64
	for i, g := range got {
		e := float64(g) - want[i]
		num += e * e
		den += want[i] * want[i]
		if !(math.Abs(e) <= 2e-6*mag[i]+1e-6) {
			t.Fatalf("%s: out[%d] = %g, want %g (terms' magnitude %g)", what, i, g, want[i], mag[i])
		}
	}
	if num > 1e-10*den+1e-12 {
		t.Fatalf("%s: relative error %g", what, math.Sqrt(num/den))
	}
}

func checkExact(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: out[%d] = %g (%#x), want %g (%#x)", what, i, got[i], math.Float32bits(got[i]),
				want[i], math.Float32bits(want[i]))
		}
	}
}

// splitSmall makes the parallel drivers split even the tests' small shapes
// over every thread (par.MinWork 1) until t ends.
func splitSmall(t *testing.T) {
	old := par.SetMinWork(1)
	t.Cleanup(func() { par.SetMinWork(old) })
}

// keepThreads restores the thread count when tb ends.
func keepThreads(tb testing.TB) {
	old := par.Threads()
	tb.Cleanup(func() { _ = par.SetThreads(old) })
}

// forRandomCases runs fn(ci) for n cases (short of them with -short), the
// thread count cycling over 1..threads and the drivers splitting even small
// shapes (splitSmall); the thread count is restored when t ends.
func forRandomCases(t *testing.T, n, short, threads int, fn func(ci int)) {
	keepThreads(t)
	splitSmall(t)
	if testing.Short() {
		n = short
	}
	for ci := range n {
		_ = par.SetThreads(1 + ci%threads)
		fn(ci)
	}
}

// randCase builds a case for shape s with a random block size and, every
// other time at random, a bias.
func randCase(t testing.TB, rng *rand.Rand, s Shape) *testCase {
	d, err := s.Check()
	if err != nil {
		t.Fatalf("%+v: %v", s, err)
	}
	return newCase(t, rng, s, randBlockSize(rng, d.K), rng.IntN(2) == 0)
}

// longKShape draws a pointwise shape with a long K (100 to 100+cSpan-1
// channels), up to oSpan output channels and planes up to hwSpan square:
// every remainder of K mod 2 and 3, wide O, the LUT planner's shapes.
func longKShape(rng *rand.Rand, cSpan, hwSpan, oSpan int) Shape {
	s := Shape{N: 1 + rng.IntN(2), C: 100 + rng.IntN(cSpan), H: 1 + rng.IntN(hwSpan), W: 1 + rng.IntN(hwSpan),
		O: 1 + rng.IntN(oSpan), KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	s.WC = s.C
	return s
}

// TestKernelsAgree runs every kernel (and every gemm family) on random
// shapes: the float path against the float64 reference, the int8 path bit
// for bit against the independent reference and against naive.
func TestKernelsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	forRandomCases(t, 120, 30, 3, func(ci int) {
		tc := randCase(t, rng, randShape(rng))
		want, mag := ref64(tc)
		want8 := ref8(tc)
		for _, ks := range gemm.Families() {
			for _, kind := range kindsFor(&tc.d) {
				what := fmt.Sprintf("case %d %v %v/%s", ci, tc, kind, ks.Family)
				checkF32(t, what+" float", runKind(t, tc, kind, false, ks), want, mag)
				checkExact(t, what+" int8", runKind(t, tc, kind, true, ks), want8)
			}
		}
	})
}

// TestTable covers named shapes of interest, each against the references.
func TestTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, c := range []struct {
		name string
		s    Shape
		bs   int
	}{
		{"1x1 pointwise", Shape{N: 2, C: 8, H: 5, W: 7, O: 6, WC: 8, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 0},
		{"1x1 strided", Shape{N: 1, C: 8, H: 9, W: 9, O: 5, WC: 8, KH: 1, KW: 1, Groups: 1, StrideH: 2, StrideW: 2, DilH: 1, DilW: 1}, 8},
		{"3x3 same", Shape{N: 1, C: 3, H: 13, W: 11, O: 4, WC: 3, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 27},
		{"even kernel same (asymmetric)", Shape{N: 1, C: 2, H: 6, W: 7, O: 3, WC: 2, KH: 4, KW: 2, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 0, PadB: 2, PadR: 1, DilH: 1, DilW: 1}, 0},
		{"depthwise x2", Shape{N: 2, C: 4, H: 10, W: 9, O: 8, WC: 1, KH: 3, KW: 3, Groups: 4, StrideH: 2, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 2, DilW: 1}, 9},
		{"stem 7x7 s2", Shape{N: 1, C: 3, H: 30, W: 30, O: 8, WC: 3, KH: 7, KW: 7, Groups: 1, StrideH: 2, StrideW: 2, PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 1, DilW: 1}, 147},
		{"K above chunk, sub-blocks", Shape{N: 1, C: 64, H: 6, W: 6, O: 9, WC: 64, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 192},
		{"one output", Shape{N: 1, C: 1, H: 3, W: 3, O: 1, WC: 1, KH: 3, KW: 3, Groups: 1, StrideH: 5, StrideW: 5, DilH: 1, DilW: 1}, 0},
		{"padding wider than input", Shape{N: 1, C: 2, H: 1, W: 1, O: 2, WC: 2, KH: 2, KW: 2, Groups: 1, StrideH: 1, StrideW: 1, PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 3, DilW: 3}, 1},
	} {
		tc := newCase(t, rng, c.s, c.bs, true)
		want, mag := ref64(tc)
		want8 := ref8(tc)
		for _, kind := range kindsFor(&tc.d) {
			checkF32(t, c.name+" "+kind.String(), runKind(t, tc, kind, false, gemm.KernelOp.Get()), want, mag)
			checkExact(t, c.name+" "+kind.String()+" int8", runKind(t, tc, kind, true, gemm.KernelOp.Get()), want8)
		}
	}
}

func TestPlan(t *testing.T) {
	base := Shape{N: 1, C: 4, H: 8, W: 8, O: 4, WC: 4, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	dw := base
	dw.WC, dw.Groups = 1, 4
	pw := base
	pw.KH, pw.KW = 1, 1
	for _, c := range []struct {
		s    Shape
		req  Algo
		want Algo
		err  string
	}{
		{base, Auto, Im2col, ""}, {dw, Auto, Depthwise, ""}, {pw, Auto, Pointwise, ""},
		{base, Direct, Direct, ""}, {dw, Direct, Depthwise, ""}, {pw, Direct, Pointwise, ""},
		{base, Naive, Naive, ""}, {pw, Im2col, Im2col, ""},
		{base, Depthwise, 0, "needs groups == C"}, {base, Pointwise, 0, "needs a 1x1 kernel"},
		{base, Algo(9), 0, "algorithm must be"},
	} {
		d, err := c.s.Check()
		if err != nil {
			t.Fatal(err)
		}
		got, err := Plan(c.req, &d)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Plan(%v): err %v, want %q", c.req, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Plan(%v) = %v, %v; want %v", c.req, got, err, c.want)
		}
	}
}

// TestConv2DErrors checks the validation of Conv2D and Shape.Check: each
// message names the argument.
func TestConv2DErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	good := Shape{N: 1, C: 4, H: 6, W: 6, O: 6, WC: 2, KH: 3, KW: 3, Groups: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, good, 0, true)
	out := make([]float32, tc.d.OutLen)
	call := func(mod func(*Dims, *[]float32, *Weights, *[]float32, *[]float32, *Options)) error {
		d, x, w, b, o := tc.d, tc.x, tc.w, tc.bias, out
		opt := Options{CheckFinite: true}
		mod(&d, &x, &w, &b, &o, &opt)
		_, err := Conv2D(d, x, w, b, o, opt)
		return err
	}
	type mod = func(*Dims, *[]float32, *Weights, *[]float32, *[]float32, *Options)
	nan := []float32{float32(math.NaN())}
	for _, c := range []struct {
		name string
		m    mod
		want string
	}{
		{"ok", func(*Dims, *[]float32, *Weights, *[]float32, *[]float32, *Options) {}, ""},
		{"x short", func(_ *Dims, x *[]float32, _ *Weights, _ *[]float32, _ *[]float32, _ *Options) { *x = (*x)[1:] }, "x must have"},
		{"out short", func(_ *Dims, _ *[]float32, _ *Weights, _ *[]float32, o *[]float32, _ *Options) { *o = (*o)[1:] }, "out must have"},
		{"bias", func(_ *Dims, _ *[]float32, _ *Weights, b *[]float32, _ *[]float32, _ *Options) { *b = (*b)[1:] }, "bias must have"},
		{"block size", func(_ *Dims, _ *[]float32, w *Weights, _ *[]float32, _ *[]float32, _ *Options) { w.BlockSize = 5 }, "block_size=5 must be None"},
		{"scales", func(_ *Dims, _ *[]float32, w *Weights, _ *[]float32, _ *[]float32, _ *Options) {
			w.Scales = make([]float32, 2)
		}, "scales must have"},
		{"packed", func(_ *Dims, _ *[]float32, w *Weights, _ *[]float32, _ *[]float32, _ *Options) {
			w.Packed = w.Packed[1:]
		}, "packed must have"},
		{"qtype", func(_ *Dims, _ *[]float32, w *Weights, _ *[]float32, _ *[]float32, _ *Options) { w.QType = 7 }, "qtype must be"},
		{"act bits", func(_ *Dims, _ *[]float32, _ *Weights, _ *[]float32, _ *[]float32, o *Options) { o.ActBits = 4 }, "act_bits"},
		{"algo", func(_ *Dims, _ *[]float32, _ *Weights, _ *[]float32, _ *[]float32, o *Options) { o.Algo = Depthwise }, "depthwise"},
		{"nan x", func(_ *Dims, x *[]float32, _ *Weights, _ *[]float32, _ *[]float32, _ *Options) {
			*x = append([]float32(nil), *x...)
			(*x)[37] = float32(math.Inf(-1))
		}, "x contains NaN or Inf (first at index (0, 1, 0, 1)"},
		{"nan bias", func(_ *Dims, _ *[]float32, _ *Weights, b *[]float32, _ *[]float32, _ *Options) {
			*b = append(append([]float32(nil), (*b)[:5]...), nan...)
		}, "bias contains NaN"},
		{"nan scale", func(_ *Dims, _ *[]float32, w *Weights, _ *[]float32, _ *[]float32, _ *Options) { w.Scales = nan }, "scales contain NaN"},
	} {
		err := call(c.m)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || errs.KindOf(err) != errs.KindValue {
			t.Errorf("%s: err %v, want ValueError containing %q", c.name, err, c.want)
		}
	}
	// NaN passes with CheckFinite off, without a crash, on every kernel.
	x := append([]float32(nil), tc.x...)
	x[3] = float32(math.NaN())
	x[9] = float32(math.Inf(1))
	for _, kind := range []Algo{Naive, Im2col, Direct} {
		for _, bits := range []int{0, 8} {
			if _, err := Conv2D(tc.d, x, tc.w, tc.bias, out, Options{ActBits: bits, Algo: kind}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The first non-finite element of x is reported at its index on both paths:
// the int8 path finds it in its max|x| pass, per piece of actPiece values
// (two pieces per sample here), the float32 path in a separate scan.
func TestCheckFiniteIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	s := Shape{N: 3, C: 2, H: 130, W: 130, O: 2, WC: 2, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s, 0, false)
	out := make([]float32, tc.d.OutLen)
	per := 2 * 130 * 130
	old := passChunk
	t.Cleanup(func() { passChunk = old })
	for _, c := range []struct {
		bad  []int // indices set to NaN / Inf in turn
		want string
	}{
		{[]int{2*per + actPiece + 5, 2*per + actPiece + 9}, "(2, 1, 122, 13)"},
		{[]int{per - 1, 2 * per}, "(0, 1, 129, 129)"},
		{[]int{2*per + 7, per + actPiece + 1}, "(1, 1, 122, 9)"},
	} {
		x := append([]float32(nil), tc.x...)
		for i, j := range c.bad {
			x[j] = [2]float32{float32(math.NaN()), float32(math.Inf(-1))}[i%2]
		}
		for _, run := range []struct{ bits, chunk int }{{0, old}, {8, old}, {8, 1}} { // int8: a sample a chunk too
			passChunk = run.chunk
			_, err := Conv2D(tc.d, x, tc.w, nil, out, Options{ActBits: run.bits, CheckFinite: true})
			if err == nil || !strings.Contains(err.Error(), "first at index "+c.want) {
				t.Errorf("act%d, chunk %d, bad %v: err %v, want index %s", run.bits, run.chunk, c.bad, err, c.want)
			}
		}
	}
}

func TestShapeErrors(t *testing.T) {
	good := Shape{N: 1, C: 4, H: 6, W: 6, O: 6, WC: 2, KH: 3, KW: 3, Groups: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	if _, err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Shape)
		want string
	}{
		{func(s *Shape) { s.N = -1 }, "batch size N must be >= 0"},
		{func(s *Shape) { s.C = 0 }, "channels C must be >= 1"},
		{func(s *Shape) { s.Groups = 3 }, "groups=3 must divide the input channels C=4"},
		{func(s *Shape) { s.O = 5 }, "must divide the weight's output channels O=5"},
		{func(s *Shape) { s.WC = 4 }, "weight has 4 input channels per group"},
		{func(s *Shape) { s.StrideW = 0 }, "stride (width) must be >= 1"},
		{func(s *Shape) { s.DilH = -2 }, "dilation (height) must be >= 1"},
		{func(s *Shape) { s.PadB = -1 }, "padding (bottom) must be >= 0"},
		{func(s *Shape) { s.KH = 7 }, "output size would be 0x4"},
		{func(s *Shape) { s.H = MaxDim + 1 }, "height H must be <="},
		{func(s *Shape) { s.N, s.C, s.H, s.W, s.WC, s.Groups = MaxDim, MaxDim, MaxDim, 4, MaxDim, 1 }, "weight: K"},
		{func(s *Shape) { s.N, s.H, s.W = MaxDim, MaxDim, MaxDim }, "x: shape"},
	} {
		s := good
		c.mod(&s)
		if _, err := s.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", s, err, c.want)
		}
	}
}

func TestEmptyBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	s := Shape{N: 0, C: 2, H: 4, W: 4, O: 2, WC: 2, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s, 0, false)
	if _, err := Conv2D(tc.d, tc.x, tc.w, nil, nil, Options{ActBits: 8}); err != nil {
		t.Fatal(err)
	}
}

func TestQuant8(t *testing.T) {
	for _, c := range []struct {
		v, a float32
		want int8
	}{
		{0.5, 1, 0}, {1.5, 1, 2}, {2.5, 1, 2}, {-0.5, 1, 0}, {-1.5, 1, -2}, {127.5, 1, 127}, {-200, 1, -128},
		{float32(math.NaN()), 1, 0}, {float32(math.Inf(1)), 1, 127}, {float32(math.Inf(1)), 0, 0},
	} {
		if got := gemm.Quant8(c.v, c.a); got != c.want {
			t.Errorf("gemm.Quant8(%v, %v) = %d, want %d", c.v, c.a, got, c.want)
		}
	}
}

// TestQuant8Rounding compares quant8 with math.RoundToEven on random and
// on every half-integer product.
func TestQuant8Rounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	ref := func(v, a float32) int8 {
		return int8(math.Max(-128, math.Min(127, math.RoundToEven(float64(v*a)))))
	}
	for i := range 1 << 20 {
		v := float32(rng.NormFloat64() * 40)
		a := float32(0.5 + rng.Float64()*3)
		if i < 600 {
			v, a = float32(i-300)/2, 1 // ties: -150, -149.5, ..., 149.5
		}
		if got, want := gemm.Quant8(v, a), ref(v, a); got != want {
			t.Fatalf("gemm.Quant8(%v, %v) = %d, want %d", v, a, got, want)
		}
	}
}

func TestValidRange(t *testing.T) {
	for n := 1; n < 9; n++ {
		for in := 1; in < 9; in++ {
			for stride := 1; stride < 4; stride++ {
				for off := -40; off < 12; off++ {
					lo, hi := validRange(n, in, stride, off)
					if lo < 0 || hi < lo || hi > n {
						t.Fatalf("validRange(%d,%d,%d,%d) = [%d,%d) out of [0,%d]", n, in, stride, off, lo, hi, n)
					}
					for o := range n {
						p := o*stride + off
						inside := p >= 0 && p < in
						if inside != (o >= lo && o < hi) {
							t.Fatalf("validRange(%d,%d,%d,%d) = [%d,%d) wrong at %d", n, in, stride, off, lo, hi, o)
						}
					}
				}
			}
		}
	}
}

// The activation scale's max|x| leaves NaN out and finds the first
// non-finite element (ternary.MaxAbs).
func TestAbsMaxNoNaN(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, c := range []struct {
		x    []float32
		want float32
		bad  int
	}{
		{nil, 0, -1}, {[]float32{-3}, 3, -1}, {[]float32{1, -2, 0.5}, 2, -1}, {[]float32{nan, -2, 1}, 2, 0},
		{[]float32{1, nan, inf, 2}, float32(math.Inf(1)), 1}, {[]float32{nan, nan, nan}, 0, 0},
		{[]float32{1, 2, inf}, float32(math.Inf(1)), 2},
	} {
		if got, bad := ternary.MaxAbs(c.x); got != c.want || bad != c.bad {
			t.Errorf("MaxAbs(%v) = %v, %d, want %v, %d", c.x, got, bad, c.want, c.bad)
		}
	}
}

// K = 2^24 would let an int32 sum reach 2^31 (activations -128, weights -1):
// the shape check must refuse it and accept one less.
func TestMaxKKeepsInt32Exact(t *testing.T) {
	if 128*int64(MaxK) > math.MaxInt32 {
		t.Fatalf("MaxK=%d allows |sum| = %d > MaxInt32", MaxK, 128*int64(MaxK))
	}
	ok := Shape{N: 1, C: MaxK, H: 1, W: 1, O: 1, WC: MaxK, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	if _, err := ok.Check(); err != nil {
		t.Fatalf("K=MaxK refused: %v", err)
	}
	over := ok
	over.C, over.WC = MaxK+1, MaxK+1
	if _, err := over.Check(); err == nil {
		t.Fatal("K=MaxK+1 accepted")
	}
}

// TestOneBlockIsPerTensor: a block size at least the weight's size is one
// scale for the tensor (whether or not it divides K) and gives the
// per-tensor results on every kernel; blocks that cut the tensor must
// still divide K.
func TestOneBlockIsPerTensor(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	s := Shape{N: 2, C: 3, H: 7, W: 6, O: 4, WC: 3, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 2,
		PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s, 0, true) // K = 27, 108 values, one scale
	d := &tc.d
	for _, c := range []struct {
		bs   int
		want string // error, "" for the per-tensor result
	}{
		{0, ""}, {108, ""}, {109, ""}, {1000, ""}, {1 << 40, ""},
		{54, "block_size=54 must be None"}, {5, "block_size=5 must be None"}, {-1, "block_size=-1 must be None"},
	} {
		w := tc.w
		w.BlockSize = c.bs
		for _, req := range []Algo{Auto, Naive, Im2col, Direct, LUT} {
			for _, bits := range []int{0, 8} {
				if req == LUT && bits == 0 {
					continue
				}
				got, want := make([]float32, d.OutLen), make([]float32, d.OutLen)
				_, err := Conv2D(*d, tc.x, w, tc.bias, got, Options{Algo: req, ActBits: bits})
				if c.want != "" {
					if err == nil || !strings.Contains(err.Error(), c.want) {
						t.Errorf("block size %d %v act%d: err %v, want %q", c.bs, req, bits, err, c.want)
					}
					continue
				}
				if err != nil {
					t.Fatalf("block size %d %v act%d: %v", c.bs, req, bits, err)
				}
				if _, err := Conv2D(*d, tc.x, tc.w, tc.bias, want, Options{Algo: req, ActBits: bits}); err != nil {
					t.Fatal(err)
				}
				checkExact(t, fmt.Sprintf("block size %d %v act%d", c.bs, req, bits), got, want)
			}
		}
	}
}
