package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// f32Conv is the signature of the implicit float32 paths (directConvF32,
// blockedConvF32, winogradConvF32).
type f32Conv func(d *Dims, w Weights, x []float32, sc *scaler, out []float32, k *gemm.DirectF32Kernels) error

// runF32 runs the float32 path conv of family k on tc; every output starts
// as NaN, so one not written fails the comparison.
func runF32(t *testing.T, tc *testCase, k *gemm.DirectF32Kernels, conv f32Conv) []float32 {
	t.Helper()
	sc, err := newScaler(&tc.d, tc.w, tc.bias)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, tc.d.OutLen)
	for i := range out {
		out[i] = float32(math.NaN())
	}
	if err := conv(&tc.d, tc.w, tc.x, sc, out, k); err != nil {
		t.Fatalf("%v: %v", tc, err)
	}
	return out
}

// runImplicitF32 runs the implicit float32 kernel of family k on tc in
// the flat layout (blocked false) or the blocked one.
func runImplicitF32(t *testing.T, tc *testCase, k *gemm.DirectF32Kernels, blocked bool) []float32 {
	t.Helper()
	if blocked {
		return runF32(t, tc, k, blockedConvF32)
	}
	return runF32(t, tc, k, directConvF32)
}

// layouts lists the layouts family k runs on d (blocked: stride 1).
func layouts(k *gemm.DirectF32Kernels, d *Dims) []bool {
	if k.Blocked != nil && d.StrideH == 1 && d.StrideW == 1 {
		return []bool{false, true}
	}
	return []bool{false}
}

// implicitShape draws a random geometry, stride 1 two times in three:
// odd channel counts, groups, padding on each side, dilation, N up to 3,
// planes from 1x1 to several tiles wide.
func implicitShape(rng *rand.Rand) Shape {
	for {
		s := randShape(rng)
		if rng.IntN(3) > 0 {
			s.StrideH, s.StrideW = 1, 1
		}
		if rng.IntN(3) == 0 {
			s.N = 1 + rng.IntN(3)
		}
		if rng.IntN(4) == 0 { // channels past one ZMM of output channels
			s.O = s.Groups * (9 + rng.IntN(20))
		}
		if _, err := s.Check(); err == nil {
			return s
		}
	}
}

// TestImplicitF32Families runs every conv_directf family through the
// implicit float32 kernel on random stride-1 shapes with every scale mode
// and with and without bias, against the float64 reference.
func TestImplicitF32Families(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	fams := gemm.DirectF32Op.Impls()
	forRandomCases(t, 150, 40, 3, func(ci int) {
		tc := randCase(t, rng, implicitShape(rng))
		want, mag := ref64(tc)
		for _, k := range fams {
			for _, b := range layouts(k, &tc.d) {
				checkF32(t, fmt.Sprintf("case %d %v implicit_f32/%s blocked %v", ci, tc, k.Family, b), runImplicitF32(t, tc, k, b), want, mag)
			}
		}
	})
}

// TestImplicitF32Table covers the ResNet shapes and the edges: a plane of
// one position, padding wider than the input, one output channel, C not a
// multiple of any vector, TL1 weights (converted, not cached).
func TestImplicitF32Table(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	sq := func(n, c, hw, o, k, pad, dil, groups int) Shape {
		return Shape{N: n, C: c, H: hw, W: hw, O: o, WC: c / groups, KH: k, KW: k, Groups: groups, StrideH: 1, StrideW: 1,
			PadT: pad, PadL: pad, PadB: pad, PadR: pad, DilH: dil, DilW: dil}
	}
	for _, c := range []struct {
		name string
		s    Shape
		bs   int
	}{
		{"3x3 64@56", sq(1, 64, 56, 64, 3, 1, 1, 1), 0},
		{"stem 7x7/2", Shape{N: 2, C: 3, H: 33, W: 36, O: 10, WC: 3, KH: 7, KW: 7, Groups: 1, StrideH: 2, StrideW: 2,
			PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 1, DilW: 1}, 0},
		{"3x3/2 odd", Shape{N: 1, C: 9, H: 15, W: 16, O: 12, WC: 9, KH: 3, KW: 3, Groups: 1, StrideH: 2, StrideW: 3,
			PadT: 1, PadL: 0, PadB: 2, PadR: 1, DilH: 1, DilW: 2}, 27},
		{"3x3 512@7 N2 per channel", sq(2, 512, 7, 24, 3, 1, 1, 1), 512 * 9},
		{"3x3 17@13 blocks", sq(3, 17, 13, 19, 3, 1, 1, 1), 17 * 3},
		{"5x5 dilated groups", sq(2, 12, 11, 18, 5, 4, 2, 3), 0},
		{"blocks before samples", sq(2, 16, 5, 70, 3, 1, 1, 1), 0},
		{"samples before blocks", sq(3, 16, 20, 40, 3, 1, 1, 1), 16 * 3},
		{"one position", sq(1, 5, 1, 3, 3, 1, 1, 1), 15},
		{"no padding", sq(1, 3, 9, 7, 2, 0, 1, 1), 0},
		{"padding wider than input", sq(1, 2, 1, 2, 2, 3, 3, 1), 1},
		{"asymmetric", Shape{N: 1, C: 3, H: 6, W: 29, O: 9, WC: 3, KH: 4, KW: 2, Groups: 1, StrideH: 1, StrideW: 1,
			PadT: 1, PadL: 0, PadB: 2, PadR: 1, DilH: 1, DilW: 3}, 0},
		// row tiles (output rows of whole vectors, written in place):
		// one and two tiles a row, a short last tile, panels cut short
		{"row tiles stem 7x7/2 Wo 32", Shape{N: 2, C: 3, H: 20, W: 64, O: 10, WC: 3, KH: 7, KW: 7, Groups: 1,
			StrideH: 2, StrideW: 2, PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 1, DilW: 1}, 0},
		{"row tiles 3x3 Wo 48", sq(1, 5, 48, 20, 3, 1, 1, 1), 0},
		{"row tiles 3x3 Wo 80 groups", sq(2, 6, 80, 12, 3, 1, 1, 2), 27},
		{"row tiles 3x3 Wo 8 dilated", Shape{N: 1, C: 4, H: 5, W: 12, O: 9, WC: 4, KH: 3, KW: 3, Groups: 1,
			StrideH: 1, StrideW: 1, PadT: 0, PadL: 0, PadB: 0, PadR: 0, DilH: 1, DilW: 2}, 0},
	} {
		tc := newCase(t, rng, c.s, c.bs, true)
		want, mag := ref64(tc)
		for _, k := range gemm.DirectF32Op.Impls() {
			for _, b := range layouts(k, &tc.d) {
				checkF32(t, fmt.Sprintf("%s %s blocked %v", c.name, k.Family, b), runImplicitF32(t, tc, k, b), want, mag)
			}
		}
		tl := newCase(t, rng, c.s, 0, false)
		if tl.d.K%4 == 0 && tl.d.O%2 == 0 {
			tl.w = withQType(t, tl, ternary.TL1)
		}
		want, mag = ref64(tl)
		got := make([]float32, tl.d.OutLen)
		if _, err := Conv2D(tl.d, tl.x, tl.w, nil, got, Options{}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		checkF32(t, c.name+" Conv2D", got, want, mag)
	}
}

// TestImplicitF32Cache: a second call reuses the expanded weight, and
// new scales with the same codes at the same address are not served the
// old expansion (the scales are folded into it).
func TestImplicitF32Cache(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	tc := newCase(t, rng, Shape{N: 1, C: 6, H: 9, W: 9, O: 10, WC: 6, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1,
		PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 0, true)
	for _, k := range gemm.DirectF32Op.Impls() {
		for range 2 {
			for i := range tc.w.Scales {
				tc.w.Scales[i] = 0.05 + rng.Float32()
			}
			want, mag := ref64(tc)
			for _, b := range layouts(k, &tc.d) {
				checkF32(t, fmt.Sprintf("cache %s blocked %v", k.Family, b), runImplicitF32(t, tc, k, b), want, mag)
			}
		}
	}
}

// TestImplicitF32Planner: auto with float32 activations runs the kernel
// on layers wider than 1x1 (reported as im2col; blocked for stride 1 and
// rows up to 28 wide where the family has the blocked tiles) when the
// conv_directf family is SIMD; explicit requests, 1x1 layers and int8
// activations keep their kernels.
func TestImplicitF32Planner(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	s3 := Shape{N: 1, C: 8, H: 9, W: 9, O: 8, WC: 8, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1,
		PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}
	s2 := s3
	s2.StrideH, s2.StrideW = 2, 2
	wide := s3
	wide.H, wide.W = 6, 31 // rows past 28: the flat layout
	p1 := s3
	p1.KH, p1.KW, p1.StrideH, p1.StrideW, p1.PadT, p1.PadL, p1.PadB, p1.PadR = 1, 1, 2, 2, 0, 0, 0, 0
	pw := wide // 1x1, rows 31 wide
	pw.KH, pw.KW, pw.PadT, pw.PadL, pw.PadB, pw.PadR = 1, 1, 0, 0, 0, 0
	pn := pw // 1x1, rows 7 wide: blocked
	pn.W = 7
	// a weight whose expansion the cache would not keep (budget set below):
	// im2col for 81 positions, the implicit kernel for 324
	big := s3
	big.C, big.WC, big.O = 64, 64, 64
	bigN := big
	bigN.N = 4
	huge := s3 // padding and stride 2^20: 3x3 outputs, a padded layout of 2^40 values
	huge.PadT, huge.PadL, huge.PadB, huge.PadR, huge.StrideH, huge.StrideW = 1<<20, 1<<20, 1<<20, 1<<20, 1<<20, 1<<20
	old := layoutCache.MaxBytes
	t.Cleanup(func() { layoutCache.MaxBytes = old })
	layoutCache.MaxBytes = 200 << 10 // big's 147 KB expansion is not kept, s3's 9 KB is
	for _, off := range []string{"", "avx512vnni,avx512", "avx512vnni,avx512,avx2"} {
		ks := selectKernels(cpu.ParseDisable(off))
		simd := ks.directf.Family != cpu.Generic
		for _, c := range []struct {
			s    Shape
			req  Algo
			bits int
			want string
		}{
			{s3, Auto, 0, "implicit_f32_blocked/" + string(ks.directf.Family)},
			{wide, Auto, 0, "implicit_f32/" + string(ks.directf.Family)},
			{s3, Im2col, 0, "im2col_gemm/" + string(ks.gemm.Family)},
			{s2, Auto, 0, "implicit_f32/" + string(ks.directf.Family)},
			{p1, Auto, 0, "im2col_gemm/" + string(ks.gemm.Family)},
			{pw, Auto, 0, "implicit_f32/" + string(ks.directf.Family)},
			{pn, Auto, 0, "implicit_f32_blocked/" + string(ks.directf.Family)},
			{huge, Auto, 0, "im2col_gemm/" + string(ks.gemm.Family)},
			{big, Auto, 0, "im2col_gemm/" + string(ks.gemm.Family)},
			{bigN, Auto, 0, "implicit_f32_blocked/" + string(ks.directf.Family)},
		} {
			if c.req == Auto && (c.s == s3 || c.s == pn || c.s == bigN) && ks.directf.Blocked == nil {
				c.want = "implicit_f32/" + string(ks.directf.Family)
			}
			if !simd && c.req == Auto {
				c.want = "im2col_gemm/" + string(ks.gemm.Family)
				if c.s == pw || c.s == pn {
					c.want = "gemm1x1/" + string(ks.gemm.Family)
				}
			}
			tc := newCase(t, rng, c.s, 0, true)
			out := make([]float32, tc.d.OutLen)
			info, err := conv2d(&tc.d, tc.x, tc.w, tc.bias, out, Options{Algo: c.req, ActBits: c.bits}, ks)
			if err != nil {
				t.Fatal(err)
			}
			algo := Im2col
			if c.s == pw || c.s == pn {
				algo = Pointwise
			}
			if info.Algo != algo || info.Kernel != c.want {
				t.Errorf("disable=%q %v req %v: ran %v %q, want %v %q", off, tc, c.req, info.Algo, info.Kernel, algo, c.want)
			}
			want, mag := ref64(tc)
			checkF32(t, "planner "+off, out, want, mag)
		}
	}
}

// TestImplicitF32Code3: a code 3 among the weight's values is reported by
// its flat position, as the other kernels report it, even when the
// padding after the last value is invalid too; invalid padding alone is
// ternary's padding error. Every family, both layouts.
func TestImplicitF32Code3(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	// O*K = 10*54 = 540 values: the last group holds 28, the rest is padding
	tc := newCase(t, rng, Shape{N: 1, C: 6, H: 7, W: 7, O: 10, WC: 6, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1,
		PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 0, true)
	n := tc.d.WLen
	for _, c := range []struct {
		bad  []int // positions given code 3 (n and above: padding)
		want string
	}{
		{[]int{7, 300}, "code 3 at element 7"},
		{[]int{n - 1, n + 2}, fmt.Sprintf("code 3 at element %d", n-1)},
		{[]int{n + 2, 130}, "code 3 at element 130"},
		{[]int{n + 2}, "padding"},
	} {
		w := tc.w
		for _, p := range c.bad {
			w = withCode3(w, p)
		}
		bad := *tc
		bad.w = w
		for _, k := range gemm.DirectF32Op.Impls() {
			for _, blocked := range layouts(k, &bad.d) {
				sc, err := newScaler(&bad.d, bad.w, nil)
				if err != nil {
					t.Fatal(err)
				}
				out := make([]float32, bad.d.OutLen)
				if blocked {
					err = blockedConvF32(&bad.d, bad.w, bad.x, sc, out, k)
				} else {
					err = directConvF32(&bad.d, bad.w, bad.x, sc, out, k)
				}
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("codes 3 at %v, %s blocked %v: err %v, want %q", c.bad, k.Family, blocked, err, c.want)
				}
			}
		}
	}
}

// TestImplicitF32Misaligned runs the in-place 1x1 path on inputs that start
// 0 to 15 floats past a 64-byte line (a NumPy array starts 16 bytes past
// one; the tiles then start with a head tile up to the next vector
// boundary): every family gives the bits of the aligned input, planes
// whose size is and is not a multiple of the vector, up to 3 samples,
// output channels past whole panels.
func TestImplicitF32Misaligned(t *testing.T) {
	keepThreads(t)
	rng := rand.New(rand.NewPCG(35, 36))
	for ci, s := range []Shape{
		{N: 1, C: 20, H: 8, W: 8, O: 11, WC: 20},
		{N: 3, C: 7, H: 4, W: 12, O: 9, WC: 7},
		{N: 2, C: 33, H: 5, W: 7, O: 16, WC: 33},
		{N: 1, C: 16, H: 1, W: 16, O: 5, WC: 16},
		{N: 2, C: 9, H: 2, W: 5, O: 8, WC: 9},
	} {
		s.KH, s.KW, s.Groups, s.StrideH, s.StrideW, s.DilH, s.DilW = 1, 1, 1, 1, 1, 1, 1
		tc := newCase(t, rng, s, 0, ci%2 == 0)
		for _, k := range gemm.DirectF32Op.Impls() {
			if k.Family == cpu.Generic {
				continue
			}
			_ = par.SetThreads(1 + ci%3)
			want := runImplicitF32(t, tc, k, false)
			x := tc.x
			for a := 1; a < 16; a++ {
				buf := make([]float32, len(x)+16)
				tc.x = buf[a:][:len(x)]
				copy(tc.x, x)
				checkExact(t, fmt.Sprintf("case %d %s x at +%d floats", ci, k.Family, a), runImplicitF32(t, tc, k, false), want)
			}
			tc.x = x
		}
	}
}
