package conv2d

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// nonFiniteMismatch returns the first index where got and want differ in
// their NaN / ±Inf pattern (NaN for NaN, infinity for the same infinity),
// or -1.
func nonFiniteMismatch(got []float32, want []float64) int {
	for i, g := range got {
		w := want[i]
		if math.IsNaN(float64(g)) != math.IsNaN(w) || math.IsInf(float64(g), 1) != math.IsInf(w, 1) ||
			math.IsInf(float64(g), -1) != math.IsInf(w, -1) {
			return i
		}
	}
	return -1
}

// sameOrBothNaN reports the first index where got and want differ in bits,
// NaN matching any NaN, or -1.
func sameOrBothNaN(got, want []float32) int {
	for i, g := range got {
		if math.Float32bits(g) != math.Float32bits(want[i]) && !(g != g && want[i] != want[i]) {
			return i
		}
	}
	return -1
}

// withZeroWeights gives tc a weight with many zeros and output channel 0
// all zero, so that NaN and Inf meet zero weights in every kernel.
func withZeroWeights(t *testing.T, rng *rand.Rand, tc *testCase) {
	for i := range tc.q {
		tc.q[i] = [4]int8{-1, 0, 0, 1}[rng.IntN(4)]
		if i < tc.d.K {
			tc.q[i] = 0
		}
	}
	if err := ternary.Pack(tc.q, tc.w.Packed); err != nil {
		t.Fatal(err)
	}
}

// TestNonFinitePropagates: with check_finite off, NaN and ±Inf in x
// propagate through every float32 kernel (zero weights included: 0*Inf
// and 0*NaN are NaN, as in torch) with the pattern of the float64
// reference, and every int8 kernel gives naive's result (NaN activations
// quantize to 0, an Inf makes its sample's outputs NaN).
func TestNonFinitePropagates(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(21, 21))
	nan, pinf, ninf := float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	one := func(s Shape) Shape {
		s.Groups, s.StrideH, s.StrideW, s.DilH, s.DilW = max(s.Groups, 1), 1, 1, 1, 1
		return s
	}
	for _, c := range []struct {
		name string
		s    Shape
		bs   int
	}{
		{"one value", one(Shape{N: 1, C: 1, H: 1, W: 1, O: 1, WC: 1, KH: 1, KW: 1}), 0},
		{"gemv 1x1", one(Shape{N: 2, C: 128, H: 2, W: 2, O: 6, WC: 128, KH: 1, KW: 1}), 0},
		{"gemv 1x1 blocks", one(Shape{N: 1, C: 256, H: 1, W: 3, O: 5, WC: 256, KH: 1, KW: 1}), 128},
		{"gemm1x1", one(Shape{N: 1, C: 12, H: 6, W: 7, O: 9, WC: 12, KH: 1, KW: 1}), 0},
		{"3x3 padded", Shape{N: 2, C: 5, H: 7, W: 8, O: 7, WC: 5, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 2,
			PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 15},
		{"grouped strided", Shape{N: 1, C: 8, H: 9, W: 9, O: 8, WC: 4, KH: 3, KW: 2, Groups: 2, StrideH: 2, StrideW: 1,
			PadT: 1, PadL: 0, PadB: 1, PadR: 1, DilH: 1, DilW: 2}, 0},
		{"depthwise", Shape{N: 2, C: 6, H: 7, W: 7, O: 12, WC: 1, KH: 3, KW: 3, Groups: 6, StrideH: 1, StrideW: 1,
			PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, 3},
	} {
		tc := newCase(t, rng, c.s, c.bs, true)
		withZeroWeights(t, rng, tc)
		d := &tc.d
		per := d.C * d.H * d.W
		clean := tc.x
		// NaN, +Inf, -Inf alone, and +Inf next to -Inf (NaN where both meet).
		for vi, vals := range [][]float32{{nan}, {pinf}, {ninf}, {pinf, ninf}, {nan, pinf}} {
			for _, at := range []int{0, per - 1, per / 2, d.XLen - 1} {
				tc.x = append([]float32(nil), clean...)
				for i, v := range vals {
					tc.x[min(at+i*d.W, d.XLen-1)] = v
				}
				want, _ := ref64(tc)
				var naive8 []float32
				for _, ks := range gemm.Families() {
					for _, kind := range kindsFor(d) {
						what := fmt.Sprintf("%s values %d at %d: %v/%s", c.name, vi, at, kind, ks.Family)
						got := runKind(t, tc, kind, false, ks)
						if i := nonFiniteMismatch(got, want); i >= 0 {
							t.Fatalf("%s float: out[%d] = %g, want %g", what, i, got[i], want[i])
						}
						got8 := runKind(t, tc, kind, true, ks)
						if naive8 == nil {
							naive8 = got8
							checkInt8NonFinite(t, what, d, tc.x, got8)
						}
						if i := sameOrBothNaN(got8, naive8); i >= 0 {
							t.Fatalf("%s int8: out[%d] = %g, naive %g", what, i, got8[i], naive8[i])
						}
					}
				}
				if i := sameOrBothNaN(runKind(t, tc, LUT, true, gemm.KernelOp.Get()), naive8); i >= 0 {
					t.Fatalf("%s values %d at %d: lut int8: out[%d] differs from naive's %g", c.name, vi, at, i, naive8[i])
				}
				// Conv2D itself, as the C ABI calls it, on every request.
				for _, req := range []Algo{Auto, Naive, Im2col, Direct} {
					got := make([]float32, d.OutLen)
					if _, err := Conv2D(*d, tc.x, tc.w, tc.bias, got, Options{Algo: req}); err != nil {
						t.Fatal(err)
					}
					if i := nonFiniteMismatch(got, want); i >= 0 {
						t.Fatalf("%s values %d at %d: Conv2D %v: out[%d] = %g, want %g", c.name, vi, at, req, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// checkInt8NonFinite checks the int8 path's documented semantics: a
// sample with an Inf has only NaN outputs, any other sample none.
func checkInt8NonFinite(t *testing.T, what string, d *Dims, x, out []float32) {
	t.Helper()
	per, oper := d.C*d.H*d.W, d.O*d.P
	for n := range d.N {
		inf := false
		for _, v := range x[n*per : (n+1)*per] {
			inf = inf || math.IsInf(float64(v), 0)
		}
		for i, v := range out[n*oper : (n+1)*oper] {
			if inf != (v != v) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s int8: sample %d (Inf in x: %v): out[%d] = %g", what, n, inf, n*oper+i, v)
			}
		}
	}
}
