package conv2d

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
)

// within runs fn and fails t when it takes more than limit (a hang fails
// the test instead of hanging it; the goroutine is then left behind) or
// returns an error.
func within(t *testing.T, limit time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if el := time.Since(start); el > limit {
			t.Fatalf("%s took %v, more than %v", what, el, limit)
		}
	case <-time.After(limit):
		t.Fatalf("%s: still running after %v", what, limit)
	}
}

// TestHugeGeometry: strides, dilations and paddings up to MaxDim cost
// time in proportion to the data, not to their values (im2colSource once
// looped over the whole column stride for every row: minutes at 2^31),
// and give the references' results with every kernel and request.
func TestHugeGeometry(t *testing.T) {
	const big = MaxDim
	rng := rand.New(rand.NewPCG(22, 22))
	sh := func(n, c, h, w, o, k int) Shape {
		return Shape{N: n, C: c, H: h, W: w, O: o, WC: c, KH: k, KW: k, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	}
	for _, c := range []struct {
		name string
		s    Shape
		set  func(s *Shape)
	}{
		{"column stride 2^31", sh(1, 4, 16, 2, 4, 1), func(s *Shape) { s.StrideW = big }},
		{"row stride 2^31", sh(1, 4, 2, 16, 4, 1), func(s *Shape) { s.StrideH = big }},
		{"both strides 2^31, 3x3 padded", sh(2, 3, 5, 6, 5, 3), func(s *Shape) {
			s.StrideH, s.StrideW, s.PadT, s.PadL, s.PadB, s.PadR = big, big, 1, 1, 1, 1
		}},
		{"column stride 2^20", sh(1, 3, 4, 40, 4, 2), func(s *Shape) { s.StrideW = 1 << 20 }},
		{"column stride W", sh(1, 3, 4, 9, 4, 2), func(s *Shape) { s.StrideW = 9 }},
		{"column stride W-1", sh(1, 3, 4, 9, 4, 2), func(s *Shape) { s.StrideW = 8 }},
		{"dilation 2^30, padding 2^30", sh(1, 3, 5, 6, 4, 2), func(s *Shape) {
			s.DilH, s.DilW, s.PadT, s.PadL, s.PadB, s.PadR, s.StrideH, s.StrideW = big/2, big/2, big/2, big/2, big/2, big/2, big/2, big/2
		}},
		{"everything 2^31", sh(1, 3, 5, 6, 4, 2), func(s *Shape) {
			s.DilH, s.DilW, s.PadT, s.PadL, s.PadB, s.PadR, s.StrideH, s.StrideW = big, big, big, big, big, big, big, big
		}},
		{"padding 2^31 on one side", sh(1, 2, 3, 4, 3, 1), func(s *Shape) { s.PadL, s.PadT, s.StrideW, s.StrideH = big, 3, big, 2 }},
		// (H + pads) * (W + pads) * 4 channels wraps to 0 in int64: the
		// implicit GEMM must not take it for a small layout.
		{"padded layout past int64", sh(8, 4, 2, 2, 16, 1), func(s *Shape) {
			s.PadT, s.PadB, s.PadL, s.PadR, s.StrideH, s.StrideW = big-1, big-1, big-1, big-1, big, big
		}},
	} {
		c.set(&c.s)
		tc := newCase(t, rng, c.s, 0, true)
		d := &tc.d
		want, mag := ref64(tc)
		want8 := ref8(tc)
		for _, ks := range gemm.Families() {
			for _, kind := range append(kindsFor(d), LUT) {
				what := fmt.Sprintf("%s %v/%s", c.name, kind, ks.Family)
				var got, got8 []float32
				within(t, 5*time.Second, what, func() error {
					if kind != LUT {
						got = runKind(t, tc, kind, false, ks)
					}
					got8 = runKind(t, tc, kind, true, ks)
					return nil
				})
				if got != nil {
					checkF32(t, what+" float", got, want, mag)
				}
				checkExact(t, what+" int8", got8, want8)
			}
		}
		for _, req := range []Algo{Auto, Naive, Im2col, Direct, LUT} {
			for _, bits := range []int{0, 8} {
				if req == LUT && bits == 0 {
					continue
				}
				what := fmt.Sprintf("%s Conv2D %v act%d", c.name, req, bits)
				got := make([]float32, d.OutLen)
				within(t, 5*time.Second, what, func() error {
					_, err := Conv2D(*d, tc.x, tc.w, tc.bias, got, Options{Algo: req, ActBits: bits, CheckFinite: true})
					return err
				})
				if bits == 8 {
					checkExact(t, what, got, want8)
				} else {
					checkF32(t, what, got, want, mag)
				}
			}
		}
	}
}
