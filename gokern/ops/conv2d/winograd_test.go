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
)

// runWinograd runs tc through winogradConvF32 on family k (runF32).
func runWinograd(t *testing.T, tc *testCase, k *gemm.DirectF32Kernels) []float32 {
	t.Helper()
	return runF32(t, tc, k, winogradConvF32)
}

// winoShape draws a 3x3 stride-1 shape Winograd takes: 16 to 80 input
// channels (whole and partial 16-channel blocks), 1 to 80 output channels
// (past one and two tiles of 32), planes from 1x1 to 19 wide (odd and even
// outputs: tiles cut at the right and bottom), padding 0 to 2 on each
// side, N up to 3.
func winoShape(rng *rand.Rand) Shape {
	for {
		c := 16 + rng.IntN(65)
		s := Shape{N: 1 + rng.IntN(3), C: c, WC: c, H: 1 + rng.IntN(19), W: 1 + rng.IntN(19), O: 1 + rng.IntN(80),
			KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1,
			PadT: rng.IntN(3), PadL: rng.IntN(3), PadB: rng.IntN(3), PadR: rng.IntN(3)}
		if _, err := s.Check(); err == nil {
			return s
		}
	}
}

// TestWinogradConv runs every family's Winograd path on random shapes with
// every scale mode, with and without bias, at 1 to 3 threads, in one pass
// and a sample a pass (winoChunk), against the float64 reference within
// the conv2d tests' float32 bound.
func TestWinogradConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	defer func(c int) { winoChunk = c }(winoChunk)
	forRandomCases(t, 80, 20, 3, func(ci int) {
		tc := randCase(t, rng, winoShape(rng))
		want, mag := ref64(tc)
		for _, k := range gemm.DirectF32Op.Impls() {
			if k.WinoIn == nil {
				continue
			}
			for _, chunk := range []int{4 << 20, 1} {
				winoChunk = chunk
				checkF32(t, fmt.Sprintf("case %d %v winograd/%s chunk %d", ci, tc, k.Family, chunk), runWinograd(t, tc, k), want, mag)
			}
		}
	})
}

// TestWinogradTable covers the ResNet 3x3 layers and the edges: one output
// position (a tile cut to 1x1), a 1-wide row of tiles, no padding.
func TestWinogradTable(t *testing.T) {
	keepThreads(t)
	rng := rand.New(rand.NewPCG(43, 44))
	sq := func(n, c, hw, o, pad int) Shape {
		return Shape{N: n, C: c, H: hw, W: hw, O: o, WC: c, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1,
			PadT: pad, PadL: pad, PadB: pad, PadR: pad, DilH: 1, DilW: 1}
	}
	for _, c := range []struct {
		name string
		s    Shape
		bs   int
	}{
		{"64@56", sq(1, 64, 56, 64, 1), 0},
		{"128@28 N2 per channel", sq(2, 128, 28, 128, 1), 128 * 9},
		{"256@14 blocks", sq(1, 256, 14, 40, 1), 9 * 32},
		{"512@7 N2", sq(2, 512, 7, 33, 1), 0},
		{"one position", sq(1, 16, 1, 5, 1), 16 * 9},
		{"no padding 3x5", Shape{N: 1, C: 17, H: 3, W: 5, O: 31, WC: 17, KH: 3, KW: 3, Groups: 1, StrideH: 1,
			StrideW: 1, DilH: 1, DilW: 1}, 0},
	} {
		tc := newCase(t, rng, c.s, c.bs, true)
		want, mag := ref64(tc)
		for _, k := range gemm.DirectF32Op.Impls() {
			if k.WinoIn == nil {
				continue
			}
			checkF32(t, fmt.Sprintf("%s %s", c.name, k.Family), runWinograd(t, tc, k), want, mag)
		}
	}
}

// TestWinogradPlan checks where the planner runs Winograd: 3x3, stride 1,
// no dilation, one group, 32 input and output channels or more, 4M
// multiply-adds a thread, a finite input and finite scales up to 2^100;
// an Inf pixel, an Inf scale or a value past 2^100 takes the direct
// kernels, whose NaN and Inf pattern it then gives.
func TestWinogradPlan(t *testing.T) {
	keepThreads(t)
	k := gemm.DirectF32Op.Get()
	if k.Family == cpu.Generic || k.WinoIn == nil {
		t.Skipf("the selected conv_directf family (%s) runs no implicit float32 path (noasm, or no AVX2)", k.Family)
	}
	rng := rand.New(rand.NewPCG(45, 46))
	_ = par.SetThreads(1)
	base := Shape{N: 1, C: 32, WC: 32, H: 24, W: 24, O: 40, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1,
		DilH: 1, DilW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1} // 6.6M multiply-adds
	for _, c := range []struct {
		name string
		edit func(s *Shape)
		want bool
	}{
		{"3x3", func(*Shape) {}, true},
		{"31 channels", func(s *Shape) { s.C, s.WC = 31, 31 }, false},
		{"31 outputs", func(s *Shape) { s.O = 31 }, false},
		{"3.3M multiply-adds", func(s *Shape) { s.H, s.W = 17, 17 }, false},
		{"stride 2", func(s *Shape) { s.StrideH, s.StrideW = 2, 2 }, false},
		{"dilation 2", func(s *Shape) { s.DilW = 2 }, false},
		{"two groups", func(s *Shape) { s.C, s.Groups, s.O = 64, 2, 80 }, false},
		{"3x1", func(s *Shape) { s.KW = 1 }, false},
	} {
		s := base
		c.edit(&s)
		tc := newCase(t, rng, s, 0, true)
		out := make([]float32, tc.d.OutLen)
		info, err := Conv2DInfo(tc.d, tc.x, tc.w, tc.bias, out, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.HasPrefix(info.Kernel, "implicit_f32_winograd/"); got != c.want {
			t.Errorf("%s: kernel %s, Winograd want %v", c.name, info.Kernel, c.want)
		}
		want, mag := ref64(tc)
		checkF32(t, c.name, out, want, mag)
	}
	// non-finite: the direct kernels' bits
	tc := newCase(t, rng, base, 0, true)
	tc.x[5*24+7] = float32(math.Inf(1))
	tc.x[3*576+40] = float32(math.Inf(-1))
	out := make([]float32, tc.d.OutLen)
	info, err := Conv2DInfo(tc.d, tc.x, tc.w, tc.bias, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(info.Kernel, "implicit_f32_winograd/") {
		t.Fatalf("an Inf input ran %s", info.Kernel)
	}
	direct := runImplicitF32(t, tc, k, useBlockedF32(&tc.d, k))
	checkExact(t, "Inf input", out, direct)
	// an Inf scale, and values that could overflow in the transforms
	for _, c := range []struct {
		name string
		edit func(tc *testCase)
	}{
		{"an Inf scale", func(tc *testCase) { tc.w.Scales[0] = float32(math.Inf(1)) }},
		{"a scale of 2^101", func(tc *testCase) { tc.w.Scales[0] = 0x1p101 }},
		{"an input of 2^101", func(tc *testCase) { tc.x[777] = -0x1p101 }},
	} {
		tc = newCase(t, rng, base, 0, true)
		c.edit(tc)
		// with CheckFinite, max|x| comes from its scan; without, from Winograd's own
		for _, check := range []bool{false, true} {
			if c.name == "an Inf scale" && check {
				continue // refused by the check
			}
			if info, err = Conv2DInfo(tc.d, tc.x, tc.w, tc.bias, out, Options{CheckFinite: check}); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(info.Kernel, "implicit_f32_winograd/") {
				t.Fatalf("%s (CheckFinite %v) ran %s", c.name, check, info.Kernel)
			}
		}
	}
	// 2^100 is still taken
	tc = newCase(t, rng, base, 0, true)
	tc.x[777] = 0x1p100
	for _, check := range []bool{false, true} {
		if info, err = Conv2DInfo(tc.d, tc.x, tc.w, tc.bias, out, Options{CheckFinite: check}); err != nil || !strings.HasPrefix(info.Kernel, "implicit_f32_winograd/") {
			t.Fatalf("an input of 2^100 (CheckFinite %v) ran %s (%v)", check, info.Kernel, err)
		}
	}
}
