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

// withQType returns tc's weight packed in q (same values and scales).
func withQType(t testing.TB, tc *testCase, q ternary.QType) Weights {
	n, err := ternary.PackedLenQ(q, tc.d.WLen, tc.d.O)
	if err != nil {
		t.Fatal(err)
	}
	w := tc.w
	w.Packed, w.QType = make([]byte, n), q
	if err := ternary.PackQ(q, tc.q, tc.d.O, w.Packed); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestLUTAgrees runs the LUT algorithm through Conv2D on random shapes
// (odd K, odd O and planes, groups, per-tensor and per-block scales) with
// I2_S, TL1 and TL2 weights: bit for bit against the independent int8
// reference and against im2col.
func TestLUTAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	forRandomCases(t, 150, 40, 3, func(ci int) {
		s := randShape(rng)
		if ci%5 == 0 { // long K with every remainder mod 2 and 3, wide O
			s = longKShape(rng, 700, 4, 150)
		}
		tc := randCase(t, rng, s)
		d := tc.d
		want := ref8(tc)
		im2 := make([]float32, d.OutLen)
		if _, err := Conv2D(d, tc.x, tc.w, tc.bias, im2, Options{ActBits: 8, Algo: Im2col}); err != nil {
			t.Fatal(err)
		}
		checkExact(t, fmt.Sprintf("case %d %v im2col", ci, tc), im2, want)
		for _, q := range []ternary.QType{ternary.I2S, ternary.TL1, ternary.TL2} {
			w := withQType(t, tc, q)
			out := make([]float32, d.OutLen)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			got, err := Conv2D(d, tc.x, w, tc.bias, out, Options{ActBits: 8, Algo: LUT})
			if err != nil || got != LUT {
				t.Fatalf("case %d %v %v: %v, %v", ci, tc, q, got, err)
			}
			checkExact(t, fmt.Sprintf("case %d %v lut/%v", ci, tc, q), out, want)
		}
	})
}

// TestLUTExtremes: activations at the int8 extremes and all-equal weights,
// the largest partial sums the tables hold (|pair| = 256, |triple| = 384).
func TestLUTExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, k := range []int{1, 2, 3, 4, 5, 7, 24, 25, 239, 240, 241, 256, 257, 1001} {
		s := Shape{N: 1, C: k, H: 1, W: 3, O: 5, WC: k, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
		d, _ := s.Check()
		tc := newCase(t, rng, s, 0, false)
		for i := range tc.x {
			tc.x[i] = []float32{-1, 1, -1.01}[i%3]
		}
		for i := range tc.q {
			tc.q[i] = int8(i/k%3) - 1 // row 0 all -1, row 1 all 0, row 2 all +1, ...
		}
		if err := ternary.Pack(tc.q, tc.w.Packed); err != nil {
			t.Fatal(err)
		}
		want := ref8(tc)
		for _, q := range []ternary.QType{ternary.I2S, ternary.TL1, ternary.TL2} {
			out := make([]float32, d.OutLen)
			if _, err := Conv2D(d, tc.x, withQType(t, tc, q), nil, out, Options{ActBits: 8, Algo: LUT}); err != nil {
				t.Fatal(err)
			}
			checkExact(t, fmt.Sprintf("k=%d %v", k, q), out, want)
		}
	}
}

func TestLUTNeedsAct8(t *testing.T) {
	s := Shape{N: 1, C: 4, H: 2, W: 2, O: 2, WC: 4, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	d, _ := s.Check()
	tc := newCase(t, rand.New(rand.NewPCG(1, 2)), s, 0, false)
	_, err := Conv2D(d, tc.x, tc.w, nil, make([]float32, d.OutLen), Options{Algo: LUT})
	if err == nil {
		t.Fatal("algorithm lut with float activations: no error")
	}
}

// BenchmarkLUT compares the LUT algorithm (TL1 pairs, TL2 triples) with the
// multiply-add kernel the planner would otherwise pick, int8 activations,
// one thread.
func BenchmarkLUT(b *testing.B) {
	keepThreads(b)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, l := range []struct {
		name              string
		c, o, k, s, p, hw int
	}{
		{"gemv4096@1", 4096, 4096, 1, 1, 0, 1},
		{"gemv4096@2", 4096, 4096, 1, 1, 0, 2},
		{"gemv4096@4", 4096, 4096, 1, 1, 0, 4},
		{"gemv1024@1", 1024, 1024, 1, 1, 0, 1},
		{"gemv256@1", 256, 256, 1, 1, 0, 1},
		{"3x3_512@7", 512, 512, 3, 1, 1, 7},
		{"3x3_256@14", 256, 256, 3, 1, 1, 14},
		{"3x3_128@28", 128, 128, 3, 1, 1, 28},
		{"3x3_64@56", 64, 64, 3, 1, 1, 56},
		{"1x1_256-64@56", 256, 64, 1, 1, 0, 56},
		{"1x1_64-256@56", 64, 256, 1, 1, 0, 56},
		{"stem7x7", 3, 64, 7, 2, 3, 224},
	} {
		s := Shape{N: 1, C: l.c, H: l.hw, W: l.hw, O: l.o, WC: l.c, KH: l.k, KW: l.k, Groups: 1,
			StrideH: l.s, StrideW: l.s, PadT: l.p, PadL: l.p, PadB: l.p, PadR: l.p, DilH: 1, DilW: 1}
		d, _ := s.Check()
		tc := newCase(b, rng, s, 0, false)
		out := make([]float32, d.OutLen)
		for _, v := range []struct {
			name string
			algo Algo
			q    ternary.QType
		}{{"madd-i2s", Im2col, ternary.I2S}, {"madd-tl1", Im2col, ternary.TL1}, {"madd-tl2", Im2col, ternary.TL2},
			{"lut-i2s", LUT, ternary.I2S}, {"lut-tl1", LUT, ternary.TL1}, {"lut-tl2", LUT, ternary.TL2}} {
			algo := v.algo
			if algo == Im2col && d.Pointwise() {
				algo = Pointwise
			}
			w := withQType(b, tc, v.q)
			b.Run(l.name+"/"+v.name, func(b *testing.B) {
				_ = par.SetThreads(1)
				for b.Loop() {
					if _, err := Conv2D(d, tc.x, w, nil, out, Options{ActBits: 8, Algo: algo}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestLUTRejectsBadIndices: TL weights read as they are are checked as
// ternary.UnpackQ checks them.
func TestLUTRejectsBadIndices(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, k := range []int{1, 2, 3, 4, 5, 31, 32, 33, 34, 100} {
		s := Shape{N: 1, C: k, H: 2, W: 2, O: 3, WC: k, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
		d, _ := s.Check()
		tc := newCase(t, rng, s, 0, false)
		for _, q := range []ternary.QType{ternary.TL1, ternary.TL2} {
			w := withQType(t, tc, q)
			for trial := range 40 {
				bad := Weights{Packed: append([]byte(nil), w.Packed...), Scales: w.Scales, QType: q}
				i := rng.IntN(len(bad.Packed))
				bad.Packed[i] ^= byte(1 << rng.IntN(8))
				vals := make([]int8, d.WLen)
				wantErr := ternary.UnpackQ(q, bad.Packed, d.O, vals) != nil
				out := make([]float32, d.OutLen)
				_, err := Conv2D(d, tc.x, bad, nil, out, Options{ActBits: 8, Algo: LUT})
				if (err != nil) != wantErr {
					t.Fatalf("k=%d %v trial %d: byte %d: err %v, UnpackQ err %v", k, q, trial, i, err, wantErr)
				}
				if err == nil {
					tc2 := *tc
					tc2.q = vals
					checkExact(t, fmt.Sprintf("k=%d %v flipped", k, q), out, ref8(&tc2))
				}
			}
		}
	}
}

func TestLUTRejectsCode3(t *testing.T) {
	s := pointwise(1, 37, 20, 2, 2)
	d, _ := s.Check()
	tc := newCase(t, rand.New(rand.NewPCG(5, 6)), s, 0, false)
	for _, p := range []int{0, 1, 200, d.WLen - 1} {
		w := withCode3(tc.w, p)
		_, err := Conv2D(d, tc.x, w, nil, make([]float32, d.OutLen), Options{ActBits: 8, Algo: LUT})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("code 3 at position %d ", p)) {
			t.Fatalf("code 3 at %d: err %v", p, err)
		}
	}
}

// TestLUTFamilies runs the LUT algorithm with every kernel family usable
// here (the wide SIMD pair kernels, then BITNET_GO_DISABLE=avx2: the
// generic ones) on random shapes, per-tensor and per-block scales, odd K:
// the outputs must be bit-identical across families and to the reference.
func TestLUTFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	forRandomCases(t, 80, 25, 2, func(ci int) {
		s := randShape(rng)
		if ci%3 == 0 { // long K, wide O, few positions: the planner's LUT shapes
			s = longKShape(rng, 900, 5, 100)
		}
		tc := randCase(t, rng, s)
		d := tc.d
		want := ref8(tc)
		for _, q := range []ternary.QType{ternary.I2S, ternary.TL1, ternary.TL2} {
			w := withQType(t, tc, q)
			var first []float32
			for _, off := range []string{"", "avx2"} {
				out := make([]float32, d.OutLen)
				if _, err := conv2d(&d, tc.x, w, tc.bias, out, Options{ActBits: 8, Algo: LUT}, selectKernels(cpu.ParseDisable(off))); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("case %d %v %v disable=%q", ci, tc, q, off)
				checkExact(t, name, out, want)
				if first != nil {
					checkExact(t, name+" vs default", out, first)
				}
				first = out
			}
		}
	})
}

// TestPreferLUT: the planner's rule for TL weights: never with the SIMD LUT
// kernels; with the generic ones, the shapes the GEMV runs (1x1, stride 1,
// no padding, one group, at most gemvMaxP positions); never I2_S or Og < 16.
func TestPreferLUT(t *testing.T) {
	shape := func(n, hw, o, k, groups int) *Dims {
		s := Shape{N: n, C: 64, H: hw, W: hw, O: o, WC: 64 / groups, KH: k, KW: k, Groups: groups,
			StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, PadT: k / 2, PadL: k / 2, PadB: k / 2, PadR: k / 2}
		d, err := s.Check()
		if err != nil {
			t.Fatal(err)
		}
		return &d
	}
	for _, off := range []string{"", "avx2"} {
		k, _ := gemm.LUT16Op.Select(cpu.ParseDisable(off))
		generic := k.Family == cpu.Generic
		for _, c := range []struct {
			n, hw, o, k, groups int
			q                   ternary.QType
			gemv                bool // the generic kernels' choice
		}{
			{1, 1, 64, 1, 1, ternary.TL1, true},
			{1, 1, 15, 1, 1, ternary.TL1, false},
			{1, 1, 64, 1, 1, ternary.I2S, false},
			{2, 2, 64, 1, 1, ternary.TL2, true},
			{5, 2, 64, 1, 1, ternary.TL1, true},  // 4 positions a sample: the GEMV takes every sample
			{1, 3, 64, 1, 1, ternary.TL2, false}, // 9 positions
			{1, 1, 64, 3, 1, ternary.TL1, false}, // 3x3, padded: im2col
			{1, 2, 64, 1, 2, ternary.TL1, false}, // two groups
		} {
			want := generic && c.gemv
			if got := preferLUT(shape(c.n, c.hw, c.o, c.k, c.groups), c.q, k); got != want {
				t.Errorf("disable=%q (LUT family %s) %+v: preferLUT = %v", off, k.Family, c, got)
			}
		}
	}
}
