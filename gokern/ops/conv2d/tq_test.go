package conv2d

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestTQWeights: a TQ2_0 or TQ1_0 weight (K a multiple of 256, one scale
// per 256 values) gives, bit for bit, what the I2_S weight with the same
// values and scales gives, for every algorithm and both activation paths.
func TestTQWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	shapes := []Shape{
		{N: 1, C: 256, H: 3, W: 3, O: 5, WC: 256, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{N: 2, C: 512, H: 1, W: 1, O: 3, WC: 512, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{N: 1, C: 128, H: 5, W: 4, O: 18, WC: 64, KH: 2, KW: 2, Groups: 2, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, DilH: 1, DilW: 1},
		{N: 2, C: 256, H: 4, W: 4, O: 18, WC: 256, KH: 3, KW: 3, Groups: 1, StrideH: 2, StrideW: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
	}
	for si, s := range shapes {
		for _, bs := range []int{ternary.TQBlock, 0} {
			tc := newCase(t, rng, s, ternary.TQBlock, si%2 == 0)
			if bs == 0 { // one scale, as a tensor of one block has
				tc.w.BlockSize, tc.w.Scales = 0, tc.w.Scales[:1]
			}
			for i := range tc.w.Scales {
				tc.w.Scales[i] = ternary.RoundF16(tc.w.Scales[i])
			}
			d := tc.d
			for _, q := range []ternary.QType{ternary.TQ2, ternary.TQ1} {
				w := withQType(t, tc, q)
				for _, o := range []Options{{ActBits: 8}, {}, {ActBits: 8, Algo: Im2col}, {Algo: Direct},
					{ActBits: 8, Algo: LUT}, {Algo: Naive}} {
					want := make([]float32, d.OutLen)
					got := make([]float32, d.OutLen)
					ia, err := Conv2D(d, tc.x, tc.w, tc.bias, want, o)
					if err != nil {
						t.Fatal(err)
					}
					ga, err := Conv2D(d, tc.x, w, tc.bias, got, o)
					if err != nil {
						t.Fatalf("shape %d %v %+v: %v", si, q, o, err)
					}
					if ia != ga {
						t.Fatalf("shape %d %v %+v: ran %v, the I2_S weight %v", si, q, o, ga, ia)
					}
					checkExact(t, fmt.Sprintf("shape %d bs %d %v %+v", si, bs, q, o), got, want)
				}
			}
		}
	}
}

func TestTQWeightErrors(t *testing.T) {
	s := Shape{N: 1, C: 64, H: 2, W: 2, O: 2, WC: 64, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rand.New(rand.NewPCG(1, 2)), s, 0, false)
	w := tc.w
	w.QType, w.Packed = ternary.TQ2, make([]byte, 32)
	_, err := Conv2D(tc.d, tc.x, w, nil, make([]float32, tc.d.OutLen), Options{})
	if err == nil {
		t.Fatal("a TQ2_0 weight with K = 64: no error")
	}
}
