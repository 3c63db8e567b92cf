package conv2d

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// TestGEMV runs pointwise shapes that take the gemv path (K a multiple of
// 128, at most gemvMaxP positions; up to 40 columns, several column
// blocks) and some just outside it, with every
// gemm family and thread count, against the references; a code 3 gives
// PackA's error.
func TestGEMV(t *testing.T) {
	keepThreads(t)
	splitSmall(t)
	rng := rand.New(rand.NewPCG(11, 11))
	for ci, c := range []struct{ n, c, o, h, w, bs int }{
		{1, 128, 5, 1, 1, 0}, {2, 256, 9, 1, 1, 128}, {1, 256, 7, 1, 3, 256}, {2, 384, 13, 2, 2, 128},
		{1, 512, 33, 1, 1, 512}, {1, 256, 6, 1, 5, 0}, {1, 200, 6, 1, 1, 0}, {3, 128, 4, 1, 2, 64},
		{4, 256, 9, 2, 2, 0}, {17, 128, 5, 1, 1, 128}, {3, 128, 6, 1, 5, 0}, {9, 256, 4, 1, 1, 256},
		{16, 128, 3, 1, 1, 0}, {2, 640, 21, 3, 3, 128}, {5, 128, 6, 2, 4, 0}, {40, 256, 3, 1, 1, 128},
	} {
		_ = par.SetThreads(1 + ci%2)
		s := Shape{N: c.n, C: c.c, H: c.h, W: c.w, O: c.o, WC: c.c, KH: 1, KW: 1, Groups: 1,
			StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
		tc := newCase(t, rng, s, c.bs, ci%2 == 0)
		sc, err := newScaler(&tc.d, tc.w, tc.bias)
		if err != nil {
			t.Fatal(err)
		}
		want, mag := ref64(tc)
		want8 := ref8(tc)
		for _, ks := range gemm.Families() {
			what := fmt.Sprintf("%v gemv=%v/%s", tc, useGEMV(&tc.d, sc), ks.Family)
			checkF32(t, what+" float", runKind(t, tc, Pointwise, false, ks), want, mag)
			checkExact(t, what+" int8", runKind(t, tc, Pointwise, true, ks), want8)
		}
	}
	// A code 3: the same error as the panel packing's.
	s := Shape{N: 1, C: 256, H: 1, W: 1, O: 8, WC: 256, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s, 0, false)
	for _, p := range []int{5*256 + 77, 1000, 3*256 + 127} {
		w := tc.w
		w.Packed = append([]byte(nil), w.Packed...)
		w.Packed[p/128*32+p%32] |= 3 << (6 - 2*(p%128/32))
		w.Packed[(p+300)/128*32+(p+300)%32] |= 3 << (6 - 2*((p+300)%128/32)) // a later one
		out := make([]float32, tc.d.OutLen)
		for _, kind := range []Algo{Pointwise, Im2col} {
			_, err := Conv2D(tc.d, tc.x, w, nil, out, Options{Algo: kind})
			if want := fmt.Sprintf("code 3 at element %d", p); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: err %v, want %q", kind, err, want)
			}
		}
	}
}
