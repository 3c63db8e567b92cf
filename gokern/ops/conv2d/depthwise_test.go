package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// runDW runs the depthwise kernel on tc with the conv_dw family dw (the
// other ops as selected), on float32 activations or int8 ones.
func runDW(t *testing.T, tc *testCase, dw *gemm.DepthwiseKernels, act8 bool) ([]float32, string) {
	t.Helper()
	sc, err := newScaler(&tc.d, tc.w, tc.bias)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, tc.d.OutLen)
	for i := range out {
		out[i] = float32(math.NaN()) // every element must be written
	}
	k := selected()
	k.dw = dw
	var acts *activations
	if act8 {
		acts = actScales(&tc.d, tc.x, k.scan, nil)
		acts.quantize(&tc.d, tc.x, k.gemm.QuantI8)
		defer acts.release()
	}
	name, err := run(Depthwise, &tc.d, tc.x, acts, tc.w, sc, out, k, unknownMax)
	if err != nil {
		t.Fatalf("%v: %v", tc, err)
	}
	return out, name
}

// TestDepthwiseFamilies runs every conv_dw family's depthwise kernel
// against the generic one (addRow, the oracle) and the references on odd
// shapes: odd and even H/W, strides 1 to 3 (2 runs the even/odd split, 3
// the generic rows), padding, dilation, N > 1, channel multipliers,
// per-tensor / per-channel / block scales, bias or none. Float32 agrees
// with the generic kernel to the bit (the weights are -1, 0, +1, so fused
// and unfused adds round the same) and with ref64 within checkF32's
// tolerance; int8 gives ref8's bits.
func TestDepthwiseFamilies(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	lanesOff(t) // the per-channel kernel (TestDepthwiseLanes: the lanes one)
	rng := rand.New(rand.NewPCG(2026, 1124))
	gen, _ := gemm.DepthwiseOp.Impl("generic")
	dw := func(n, c, h, w, mult, k, s, pad, dil int) Shape {
		return Shape{N: n, C: c, H: h, W: w, O: c * mult, WC: 1, KH: k, KW: k, Groups: c,
			StrideH: s, StrideW: s, PadT: pad, PadL: pad, PadB: pad, PadR: pad, DilH: dil, DilW: dil}
	}
	shapes := []Shape{
		dw(1, 3, 7, 7, 1, 3, 1, 1, 1),
		dw(2, 5, 13, 11, 1, 3, 1, 1, 1),
		dw(1, 4, 37, 41, 1, 3, 1, 1, 1), // two vectors and a tail per row
		dw(2, 3, 15, 17, 1, 3, 2, 1, 1),
		dw(1, 6, 36, 34, 1, 3, 2, 1, 1), // even W, stride 2
		dw(1, 3, 33, 35, 2, 3, 2, 0, 1), // multiplier 2, no padding
		dw(1, 2, 19, 23, 1, 5, 1, 2, 1),
		dw(2, 3, 21, 29, 1, 5, 2, 2, 1),
		dw(1, 3, 17, 19, 1, 3, 1, 2, 2), // dilation 2
		dw(1, 2, 25, 27, 1, 3, 2, 2, 2),
		dw(1, 2, 20, 22, 1, 3, 3, 1, 1), // stride 3: generic rows
		dw(1, 2, 1, 50, 1, 1, 2, 0, 1),  // 1x1, one row
		dw(1, 3, 2, 2, 1, 5, 1, 2, 1),   // taps that read only padding
		dw(2, 2, 3, 4, 1, 5, 2, 3, 1),
		dw(1, 2, 3, 1, 1, 5, 1, 2, 1), // W = 1
		dw(1, 1, 3, 3, 1, 3, 5, 0, 1), // stride 5 > W: phases of padding only
		dw(2, 3, 9, 11, 1, 3, 4, 2, 2),
		{N: 1, C: 3, H: 18, W: 31, O: 3, WC: 1, KH: 3, KW: 5, Groups: 3, StrideH: 1, StrideW: 2,
			PadT: 1, PadL: 2, PadB: 0, PadR: 1, DilH: 2, DilW: 1}, // uneven everything
		{N: 2, C: 4, H: 31, W: 18, O: 8, WC: 1, KH: 5, KW: 3, Groups: 4, StrideH: 2, StrideW: 1,
			PadT: 0, PadL: 1, PadB: 2, PadR: 0, DilH: 1, DilW: 2},
	}
	for si, s := range shapes {
		d, err := s.Check()
		if err != nil {
			t.Fatalf("shape %d: %v", si, err)
		}
		for _, bs := range []int{0, d.K, 1} {
			for _, bias := range []bool{false, true} {
				tc := newCase(t, rng, s, bs, bias)
				want64, mag := ref64(tc)
				want8 := ref8(tc)
				wantF, _ := runDW(t, tc, gen, false)
				wantI, _ := runDW(t, tc, gen, true)
				for _, k := range gemm.DepthwiseFamilies() {
					what := fmt.Sprintf("%v %s", tc, k.Family)
					_ = par.SetThreads(1 + si%2)
					gotF, name := runDW(t, tc, k, false)
					if name != "depthwise/"+string(k.Family) {
						t.Fatalf("%s: ran %q", what, name)
					}
					checkExact(t, what+" f32 vs generic", gotF, wantF)
					checkF32(t, what+" f32", gotF, want64, mag)
					gotI, _ := runDW(t, tc, k, true)
					checkExact(t, what+" i8 vs generic", gotI, wantI)
					checkExact(t, what+" i8", gotI, want8)
				}
			}
		}
	}
}

// TestDepthwiseFamiliesNonFinite: with NaN and Inf in x (not known finite),
// every family adds zero weights as 0*x as the generic kernel does.
func TestDepthwiseFamiliesNonFinite(t *testing.T) {
	lanesOff(t)
	rng := rand.New(rand.NewPCG(5, 6))
	gen, _ := gemm.DepthwiseOp.Impl("generic")
	for _, s := range []Shape{
		{N: 1, C: 3, H: 11, W: 37, O: 3, WC: 1, KH: 3, KW: 3, Groups: 3, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
		{N: 1, C: 3, H: 11, W: 37, O: 3, WC: 1, KH: 3, KW: 3, Groups: 3, StrideH: 2, StrideW: 2, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
	} {
		tc := newCase(t, rng, s, 0, true)
		tc.x[rng.IntN(len(tc.x))] = float32(math.NaN())
		tc.x[rng.IntN(len(tc.x))] = float32(math.Inf(-1))
		want, _ := runDW(t, tc, gen, false)
		for _, k := range gemm.DepthwiseFamilies() {
			got, _ := runDW(t, tc, k, false)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%v %s: out[%d] = %g, want %g", tc, k.Family, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkDepthwiseFamilies times the depthwise kernel of each conv_dw
// family on MobileNet-like layers (batch 1, -threads threads).
func BenchmarkDepthwiseFamilies(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []struct{ c, hw, k, s int }{{32, 112, 3, 1}, {96, 112, 3, 2}, {144, 56, 3, 1}, {192, 28, 3, 1},
		{576, 14, 3, 1}, {960, 7, 3, 1}, {240, 14, 5, 1}} {
		s := Shape{N: 1, C: l.c, H: l.hw, W: l.hw, O: l.c, WC: 1, KH: l.k, KW: l.k, Groups: l.c,
			StrideH: l.s, StrideW: l.s, PadT: l.k / 2, PadL: l.k / 2, PadB: l.k / 2, PadR: l.k / 2, DilH: 1, DilW: 1}
		d, _ := s.Check()
		tc := newCase(b, rng, s, d.K, false)
		out := make([]float32, d.OutLen)
		for _, bits := range []int{0, 8} {
			for _, dw := range gemm.DepthwiseFamilies() {
				ks := selected()
				ks.dw = dw
				b.Run(fmt.Sprintf("%dx%d_%d@%d/s%d/act%d/%s", l.k, l.k, l.c, l.hw, l.s, bits, dw.Family), func(b *testing.B) {
					if err := par.SetThreads(*benchThreads); err != nil {
						b.Fatal(err)
					}
					for b.Loop() {
						if _, err := conv2d(&d, tc.x, tc.w, nil, out, Options{ActBits: bits, Algo: Depthwise}, ks); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(d.OutLen*d.K)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
