package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// lanesFamilies returns the conv_dw families with lanes kernels and the
// generic loops at 16 and 8 lanes (which run on every build, noasm too).
func lanesFamilies() []*gemm.DepthwiseKernels {
	out := []*gemm.DepthwiseKernels{gemm.LanesGeneric(16), gemm.LanesGeneric(8)}
	for _, k := range gemm.DepthwiseFamilies() {
		if k.Lanes > 0 {
			out = append(out, k)
		}
	}
	return out
}

// lanesOff turns depthwiseLanes off for the test.
func lanesOff(t testing.TB) {
	old := dwLanesOn
	dwLanesOn = false
	t.Cleanup(func() { dwLanesOn = old })
}

// TestDepthwiseLanes runs depthwiseLanes on every family with lanes
// kernels against the generic depthwise kernel (the oracle) to the bit on
// odd shapes: C not a multiple of the lanes (tail blocks), odd and even
// H/W, strides 1 and 2, padding (uneven too), dilation, N > 1, 3x3, 5x5 and
// mixed kernels, bands split by a small tile, per-tensor / per-channel /
// block scales, bias or none; and against ref64 within checkF32's
// tolerance. Int8 activations (one scale block: the lanes kernel; several:
// the per-channel one) give the generic kernel's and ref8's bits.
func TestDepthwiseLanes(t *testing.T) {
	keepThreads(t)
	rng := rand.New(rand.NewPCG(2026, 11242))
	gen, _ := gemm.DepthwiseOp.Impl("generic")
	dw := func(n, c, h, w, k, s, pad, dil int) Shape {
		return Shape{N: n, C: c, H: h, W: w, O: c, WC: 1, KH: k, KW: k, Groups: c,
			StrideH: s, StrideW: s, PadT: pad, PadL: pad, PadB: pad, PadR: pad, DilH: dil, DilW: dil}
	}
	shapes := []Shape{
		dw(1, 16, 7, 7, 3, 1, 1, 1),
		dw(2, 19, 7, 7, 3, 1, 1, 1), // a tail block of 3 (16 lanes) / 3 (8 lanes)
		dw(1, 37, 13, 11, 3, 1, 1, 1),
		dw(3, 8, 14, 14, 3, 1, 1, 1),
		dw(1, 5, 9, 9, 3, 1, 1, 1), // fewer channels than lanes
		dw(2, 33, 15, 17, 3, 2, 1, 1),
		dw(1, 24, 16, 14, 3, 2, 1, 1), // even H/W, stride 2
		dw(1, 17, 19, 23, 5, 1, 2, 1),
		dw(2, 40, 21, 29, 5, 2, 2, 1),
		dw(1, 18, 17, 19, 3, 1, 2, 2), // dilation 2
		dw(1, 20, 25, 27, 3, 2, 2, 2),
		dw(1, 16, 1, 50, 1, 2, 0, 1), // 1x1, one row
		dw(1, 17, 2, 2, 5, 1, 2, 1),  // taps that read only padding
		dw(2, 9, 3, 4, 5, 2, 3, 1),
		dw(1, 16, 3, 1, 5, 1, 2, 1), // W = 1
		dw(1, 16, 5, 5, 3, 1, 0, 1), // no padding
		dw(1, 16, 70, 66, 3, 2, 1, 1),
		dw(1, 21, 90, 40, 3, 1, 1, 1), // several bands
		{N: 1, C: 19, H: 18, W: 31, O: 19, WC: 1, KH: 3, KW: 5, Groups: 19, StrideH: 2, StrideW: 2,
			PadT: 1, PadL: 2, PadB: 0, PadR: 1, DilH: 2, DilW: 1}, // uneven everything
		{N: 2, C: 12, H: 31, W: 18, O: 12, WC: 1, KH: 5, KW: 3, Groups: 12, StrideH: 1, StrideW: 1,
			PadT: 0, PadL: 1, PadB: 2, PadR: 0, DilH: 1, DilW: 2},
		{N: 1, C: 17, H: 20, W: 15, O: 17, WC: 1, KH: 3, KW: 3, Groups: 17, StrideH: 3, StrideW: 1,
			PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, // row stride 3
		{N: 1, C: 23, H: 13, W: 21, O: 23, WC: 1, KH: 3, KW: 5, Groups: 23, StrideH: 1, StrideW: 2,
			PadT: 2, PadL: 1, PadB: 1, PadR: 2, DilH: 1, DilW: 1},
	}
	lanesI8 := 0
	for si, s := range shapes {
		d, err := s.Check()
		if err != nil {
			t.Fatalf("shape %d: %v", si, err)
		}
		for _, bs := range []int{0, d.K, 1, d.KW} {
			if bs > 0 && d.K%bs != 0 {
				continue
			}
			for _, bias := range []bool{false, true} {
				tc := newCase(t, rng, s, bs, bias)
				want64, mag := ref64(tc)
				wantF, _ := runDW(t, tc, gen, false)
				want8 := ref8(tc)
				wantI, _ := runDW(t, tc, gen, true)
				sc, err := newScaler(&tc.d, tc.w, tc.bias)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range lanesFamilies() {
					what := fmt.Sprintf("%v %s/%d", tc, k.Family, k.Lanes)
					_ = par.SetThreads(1 + si%2)
					gotF, name := runDW(t, tc, k, false)
					if name != "depthwise_lanes/"+string(k.Family) {
						t.Fatalf("%s: ran %q", what, name)
					}
					checkExact(t, what+" f32 vs generic", gotF, wantF)
					checkF32(t, what+" f32", gotF, want64, mag)
					gotI, name := runDW(t, tc, k, true)
					lanes := name == "depthwise_lanes/"+string(k.Family)
					if lanes != useLanesI8(&tc.d, sc, k) || lanes && sc.nb != 1 {
						t.Fatalf("%s: int8 with %d scale blocks ran %q", what, sc.nb, name)
					}
					if lanes {
						lanesI8++
					}
					checkExact(t, what+" i8 vs generic", gotI, wantI)
					checkExact(t, what+" i8", gotI, want8)
				}
			}
		}
	}
	if lanesI8 < len(shapes) {
		t.Fatalf("int8 ran the lanes kernel %d times, want at least %d", lanesI8, len(shapes))
	}
}

// TestDepthwiseLanesNonFinite: with NaN and Inf in x (not known finite),
// the lanes kernels add zero weights as 0*x as the generic kernel does.
func TestDepthwiseLanesNonFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	gen, _ := gemm.DepthwiseOp.Impl("generic")
	for _, s := range []Shape{
		{N: 1, C: 19, H: 11, W: 13, O: 19, WC: 1, KH: 3, KW: 3, Groups: 19, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
		{N: 2, C: 21, H: 11, W: 17, O: 21, WC: 1, KH: 3, KW: 3, Groups: 21, StrideH: 2, StrideW: 2, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
	} {
		tc := newCase(t, rng, s, 0, true)
		for range 4 {
			tc.x[rng.IntN(len(tc.x))] = float32(math.NaN())
			tc.x[rng.IntN(len(tc.x))] = float32(math.Inf(1 - 2*rng.IntN(2)))
		}
		want, _ := runDW(t, tc, gen, false)
		for _, k := range lanesFamilies() {
			got, name := runDW(t, tc, k, false)
			if name != "depthwise_lanes/"+string(k.Family) {
				t.Fatalf("%v: ran %q", tc, name)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%v %s/%d: out[%d] = %g, want %g", tc, k.Family, k.Lanes, i, got[i], want[i])
				}
			}
		}
	}
}

// BenchmarkDepthwiseLanes times the float32 depthwise kernel with the
// lanes path forced on and off (depthwisePadded) on the selected conv_dw
// families with lanes kernels, on MobileNet-like layers at N = 1 and 8,
// float32 and int8 activations (-threads threads): the measurements behind
// useLanes' and useLanesI8's rules.
func BenchmarkDepthwiseLanes(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 2))
	old := dwLanesOn
	b.Cleanup(func() { dwLanesOn = old })
	for _, l := range []struct{ c, hw, k, s int }{{32, 28, 3, 1}, {32, 112, 3, 1}, {96, 112, 3, 2}, {144, 56, 3, 1}, {144, 56, 3, 2},
		{192, 28, 3, 1}, {192, 28, 3, 2}, {384, 14, 3, 1}, {576, 14, 3, 2}, {960, 7, 3, 1}, {240, 14, 5, 1}, {240, 28, 5, 1}} {
		for _, n := range []int{1, 8} {
			s := Shape{N: n, C: l.c, H: l.hw, W: l.hw, O: l.c, WC: 1, KH: l.k, KW: l.k, Groups: l.c,
				StrideH: l.s, StrideW: l.s, PadT: l.k / 2, PadL: l.k / 2, PadB: l.k / 2, PadR: l.k / 2, DilH: 1, DilW: 1}
			d, _ := s.Check()
			tc := newCase(b, rng, s, d.K, false)
			out := make([]float32, d.OutLen)
			for _, dw := range gemm.DepthwiseFamilies() {
				if dw.Lanes == 0 {
					continue
				}
				for _, bits := range []int{0, 8} {
					for _, lanes := range []bool{false, true} {
						ks := selected()
						ks.dw = dw
						b.Run(fmt.Sprintf("%dx%d_%d@%d/s%d/N%d/act%d/lanes=%v/%s", l.k, l.k, l.c, l.hw, l.s, n, bits, lanes, dw.Family), func(b *testing.B) {
							if err := par.SetThreads(*benchThreads); err != nil {
								b.Fatal(err)
							}
							dwLanesOn = lanes
							for b.Loop() {
								if _, err := conv2d(&d, tc.x, tc.w, nil, out, Options{ActBits: bits, Algo: Depthwise}, ks); err != nil {
									b.Fatal(err)
								}
							}
						})
					}
				}
			}
		}
	}
}
