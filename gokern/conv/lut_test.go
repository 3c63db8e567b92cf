package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

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
	old := par.Threads()
	defer func() { _ = par.SetThreads(old) }()
	rng := rand.New(rand.NewPCG(11, 5))
	cases := 150
	if testing.Short() {
		cases = 40
	}
	for ci := range cases {
		_ = par.SetThreads(1 + ci%3)
		s := randShape(rng)
		if ci%5 == 0 { // long K with every remainder mod 2 and 3, wide O
			s = Shape{N: 1 + rng.IntN(2), C: 100 + rng.IntN(700), H: 1 + rng.IntN(4), W: 1 + rng.IntN(4),
				O: 1 + rng.IntN(150), KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
			s.WC = s.C
		}
		d, _ := s.Check()
		tc := newCase(t, rng, s, randBlockSize(rng, d.K), rng.IntN(2) == 0)
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
	}
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
