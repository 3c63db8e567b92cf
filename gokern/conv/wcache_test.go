package conv

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestLayoutCache: the weight layouts kept from call to call serve only the
// codes they were packed from. The codes are changed in place (same
// address) between rounds; every call must match the reference for the
// current codes (int8 path: ref8, bit for bit; float32 path: the same
// call on a fresh copy of the codes, which no kept layout matches), the
// cache keeps one layout per algorithm and key, and a TL1 weight (converted
// per call) leaves nothing kept.
func TestLayoutCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	s := Shape{N: 2, C: 16, H: 9, W: 9, O: 20, WC: 16, KH: 3, KW: 3, Groups: 1,
		StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}
	tc := newCase(t, rng, s, 16*9, true)
	layoutCache.Clear()
	out := make([]float32, tc.d.OutLen)
	for round := range 3 {
		if round > 0 {
			for range 10 {
				tc.q[rng.IntN(len(tc.q))] = int8(rng.IntN(3) - 1)
			}
			if err := ternary.Pack(tc.q, tc.w.Packed); err != nil {
				t.Fatal(err)
			}
		}
		want := ref8(tc)
		fresh := tc.w
		fresh.Packed = slices.Clone(tc.w.Packed)
		want32 := make([]float32, tc.d.OutLen)
		if _, err := Conv2D(tc.d, tc.x, fresh, tc.bias, want32, Options{Algo: Im2col}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := Conv2D(tc.d, tc.x, tc.w, tc.bias, out, Options{ActBits: 8, Algo: Im2col}); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "int8", out, want)
			if _, err := Conv2D(tc.d, tc.x, tc.w, tc.bias, out, Options{Algo: Im2col}); err != nil {
				t.Fatal(err)
			}
			checkExact(t, "float32", out, want32)
		}
	}
	// the weight's layouts (panels; implicit blocks where the set has the
	// kernel) and the fresh copies' panels, at most one per round
	if n, _ := layoutCache.Len(); n < 2 || n > 5 {
		t.Errorf("%d layouts kept, want 2 to 5", n)
	}
	layoutCache.Clear()
	vals := make([]int8, tc.d.WLen)
	copy(vals, tc.q)
	tl := tc.w
	tl.QType = ternary.TL1
	tl.Packed = make([]byte, mustLen(t, ternary.TL1, tc.d.WLen, tc.d.O))
	if err := ternary.PackQ(ternary.TL1, vals, tc.d.O, tl.Packed); err != nil {
		t.Fatal(err)
	}
	if _, err := Conv2D(tc.d, tc.x, tl, tc.bias, out, Options{ActBits: 8, Algo: Im2col}); err != nil {
		t.Fatal(err)
	}
	checkExact(t, "tl1", out, ref8(tc))
	if n, _ := layoutCache.Len(); n != 0 {
		t.Errorf("TL1 weight: %d layouts kept, want 0", n)
	}
}

func mustLen(t *testing.T, q ternary.QType, n, rows int) int {
	l, err := ternary.PackedLenQ(q, n, rows)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The cache's size comes from EnvWeightCache: whole megabytes, the default
// when unset or malformed.
func TestWeightCacheBytes(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
	}{
		{"", DefaultWeightCacheMB << 20}, {"0", 0}, {"64", 64 << 20}, {"-3", DefaultWeightCacheMB << 20},
		{"lots", DefaultWeightCacheMB << 20}, {"1.5", DefaultWeightCacheMB << 20},
	} {
		if got := weightCacheBytes(c.v); got != c.want {
			t.Errorf("%q: %d, want %d", c.v, got, c.want)
		}
	}
}
