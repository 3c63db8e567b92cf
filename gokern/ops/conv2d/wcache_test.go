package conv2d

import (
	"fmt"
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
	// the conversion to I2_S and the panels derived from it (or the
	// implicit blocks), reused by the next call
	n1, _ := layoutCache.Len()
	if n1 != 2 {
		t.Errorf("TL1 weight: %d layouts kept, want 2 (I2_S codes, panels)", n1)
	}
	for range 2 {
		clear(out)
		if _, err := Conv2D(tc.d, tc.x, tl, tc.bias, out, Options{ActBits: 8, Algo: Im2col}); err != nil {
			t.Fatal(err)
		}
		checkExact(t, "tl1 again", out, ref8(tc))
	}
	if n, _ := layoutCache.Len(); n != n1 {
		t.Errorf("TL1 weight called again: %d layouts kept, want %d", n, n1)
	}
	// TL codes changed in place: converted again, the result follows
	flipped := make([]int8, len(vals))
	for i, v := range vals {
		flipped[i] = -v
	}
	if err := ternary.PackQ(ternary.TL1, flipped, tc.d.O, tl.Packed); err != nil {
		t.Fatal(err)
	}
	if _, err := Conv2D(tc.d, tc.x, tl, tc.bias, out, Options{ActBits: 8, Algo: Im2col}); err != nil {
		t.Fatal(err)
	}
	neg := *tc
	neg.q = flipped
	neg.w.Packed = make([]byte, ternary.PackedLen(tc.d.WLen))
	if err := ternary.Pack(flipped, neg.w.Packed); err != nil {
		t.Fatal(err)
	}
	checkExact(t, "tl1 changed in place", out, ref8(&neg))
	// no cache: nothing kept, same result
	defer func(m int) { layoutCache.MaxBytes = m }(layoutCache.MaxBytes)
	layoutCache.Clear()
	layoutCache.MaxBytes = 0
	if _, err := Conv2D(tc.d, tc.x, tl, tc.bias, out, Options{ActBits: 8, Algo: Im2col}); err != nil {
		t.Fatal(err)
	}
	checkExact(t, "tl1 no cache", out, ref8(&neg))
	if n, _ := layoutCache.Len(); n != 0 {
		t.Errorf("TL1 weight, no cache: %d layouts kept, want 0", n)
	}
}

func mustLen(t *testing.T, q ternary.QType, n, rows int) int {
	l, err := ternary.PackedLenQ(q, n, rows)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLayoutCacheIDs: the caller's weight_id does not stop the compare of
// the codes: an I2_S or TL weight with an ID whose bytes change in place
// gives the new codes' result (on the panels, the implicit GEMM and the
// GEMV). A kept TL conversion to I2_S carries an ID of its own (derivedID,
// top bit set), under which its layouts are found without a compare:
// changing the conversion's bytes behind the cache's back (only a test
// does) leaves a 3x3 layer's result as it was. A conversion not kept (no
// cache) carries no ID.
func TestLayoutCacheIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for ci, c := range []struct {
		name string
		s    Shape
		algo Algo
	}{
		{"3x3 im2col", Shape{N: 2, C: 16, H: 9, W: 9, O: 20, WC: 16, KH: 3, KW: 3, Groups: 1,
			StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1}, Im2col},
		{"gemv", Shape{N: 3, C: 256, H: 1, W: 1, O: 40, WC: 256, KH: 1, KW: 1, Groups: 1,
			StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, Direct}, // Direct: not the LUT (TL, generic)
	} {
		for _, q := range []ternary.QType{ternary.I2S, ternary.TL1, ternary.TL2} {
			layoutCache.Clear()
			tc := newCase(t, rng, c.s, 0, true)
			w := tc.w
			if q != ternary.I2S {
				w = withQType(t, tc, q)
			}
			w.ID = uint64(1000 + 10*ci + int(q)) // one ID per codes
			name := c.name + " " + fmt.Sprint(q)
			out := make([]float32, tc.d.OutLen)
			run := func(w Weights) {
				t.Helper()
				clear(out)
				if _, err := Conv2D(tc.d, tc.x, w, tc.bias, out, Options{ActBits: 8, Algo: c.algo}); err != nil {
					t.Fatal(err)
				}
			}
			run(w)
			checkExact(t, name+" first", out, ref8(tc))
			kept, _ := layoutCache.Len()
			run(w)
			checkExact(t, name+" again", out, ref8(tc))
			if n, _ := layoutCache.Len(); n != kept {
				t.Errorf("%s: %d layouts kept after the second call, want %d", name, n, kept)
			}
			if q != ternary.I2S {
				conv, err := asI2S(&tc.d, w)
				if err != nil {
					t.Fatal(err)
				}
				if !isDerived(conv.ID) || conv.converted {
					t.Errorf("%s: kept conversion has ID %#x (converted %v), want a derived ID", name, conv.ID, conv.converted)
				}
				if c.algo == Im2col { // its layouts are found by the ID: a change to it is not seen
					saved := slices.Clone(conv.Packed)
					neg := make([]int8, tc.d.WLen)
					for i, v := range tc.q {
						neg[i] = -v
					}
					if err := ternary.Pack(neg, conv.Packed); err != nil {
						t.Fatal(err)
					}
					run(w)
					copy(conv.Packed, saved)
					checkExact(t, name+" conversion changed behind the cache", out, ref8(tc))
				}
			}
			// every code changed in place, the ID kept: compared, repacked, the new result
			vals := make([]int8, tc.d.WLen)
			for i := range vals {
				vals[i] = 1
			}
			if err := ternary.PackQ(q, vals, tc.d.O, w.Packed); err != nil {
				t.Fatal(err)
			}
			ones := *tc
			ones.q = vals
			ones.w.Packed = make([]byte, ternary.PackedLen(tc.d.WLen))
			if err := ternary.Pack(vals, ones.w.Packed); err != nil {
				t.Fatal(err)
			}
			run(w)
			checkExact(t, name+" changed in place", out, ref8(&ones))
		}
	}
	// no cache: the conversion is not kept and carries no ID
	defer func(m int) { layoutCache.MaxBytes = m }(layoutCache.MaxBytes)
	layoutCache.Clear()
	layoutCache.MaxBytes = 0
	tc := newCase(t, rng, Shape{N: 1, C: 128, H: 1, W: 1, O: 16, WC: 128, KH: 1, KW: 1, Groups: 1,
		StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}, 0, false)
	w := withQType(t, tc, ternary.TL1)
	w.ID = 7
	conv, err := asI2S(&tc.d, w)
	if err != nil {
		t.Fatal(err)
	}
	if conv.ID != 0 || !conv.converted {
		t.Errorf("no cache: conversion has ID %#x (converted %v), want 0 (true)", conv.ID, conv.converted)
	}
	out := make([]float32, tc.d.OutLen)
	if _, err := Conv2D(tc.d, tc.x, w, tc.bias, out, Options{ActBits: 8}); err != nil {
		t.Fatal(err)
	}
	checkExact(t, "no cache", out, ref8(tc))
}
