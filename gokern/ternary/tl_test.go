package ternary

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestTLDocumentedExamples(t *testing.T) {
	tests := []struct {
		name string
		q    QType
		w    []int8
		want []byte
	}{
		{"tl1 doc", TL1, []int8{1, -1, 0, 1, -1}, []byte{0x56, 0x01}},
		{"tl1 all zero", TL1, []int8{0, 0, 0, 0}, []byte{0x44}},
		// triple (+1,+1,+1) = 13, (-1,0,0) = -9 -> mags 13|9<<4, sign bit 1 set; no remainder.
		{"tl2 two triples", TL2, []int8{1, 1, 1, -1, 0, 0}, []byte{0x9d, 0x02}},
		// one triple (0,0,-1) = -1, remainder (1, -1) -> TL1 index 6.
		{"tl2 remainder pair", TL2, []int8{0, 0, -1, 1, -1}, []byte{0x01, 0x01, 0x06}},
		// remainder of one value (-1) padded with 0 -> index 1.
		{"tl2 remainder one", TL2, []int8{-1}, []byte{0x01}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := PackedLenQ(tc.q, len(tc.w), 1)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := PackQ(tc.q, tc.w, 1, got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%x", got) != fmt.Sprintf("%x", tc.want) {
				t.Fatalf("packed %x, want %x", got, tc.want)
			}
			back := make([]int8, len(tc.w))
			if err := UnpackQ(tc.q, got, 1, back); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(back) != fmt.Sprint(tc.w) {
				t.Fatalf("unpacked %v, want %v", back, tc.w)
			}
		})
	}
}

func TestTLRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, q := range []QType{I2S, TL1, TL2} {
		for _, rows := range []int{1, 2, 3, 7} {
			for k := 1; k <= 40; k++ {
				w := make([]int8, rows*k)
				for i := range w {
					w[i] = int8(r.IntN(3)) - 1
				}
				n, err := PackedLenQ(q, len(w), rows)
				if err != nil {
					t.Fatal(err)
				}
				p := make([]byte, n)
				if err := PackQ(q, w, rows, p); err != nil {
					t.Fatal(err)
				}
				back := make([]int8, len(w))
				if err := UnpackQ(q, p, rows, back); err != nil {
					t.Fatalf("%s rows=%d k=%d: %v", q, rows, k, err)
				}
				for i := range w {
					if back[i] != w[i] {
						t.Fatalf("%s rows=%d k=%d: value %d = %d, want %d", q, rows, k, i, back[i], w[i])
					}
				}
			}
		}
	}
}

func TestTLSizes(t *testing.T) {
	for _, tc := range []struct{ k, tl1, tl2 int }{
		{1, 1, 1}, {2, 1, 1}, {3, 1, 2}, {4, 1, 3}, {5, 2, 3}, {6, 2, 2}, {48, 12, 10}, {4608, 1152, 768 + 192},
	} {
		if got := TL1RowBytes(tc.k); got != tc.tl1 {
			t.Errorf("TL1RowBytes(%d) = %d, want %d", tc.k, got, tc.tl1)
		}
		if got := TL2RowBytes(tc.k); got != tc.tl2 {
			t.Errorf("TL2RowBytes(%d) = %d, want %d", tc.k, got, tc.tl2)
		}
	}
}

func TestTLBadInput(t *testing.T) {
	if _, err := PackedLenQ(TL1, 10, 3); err == nil {
		t.Fatal("rows not dividing n accepted")
	}
	if _, err := PackedLenQ(QType(9), 10, 1); err == nil {
		t.Fatal("unknown qtype accepted")
	}
	if err := PackQ(TL1, []int8{2, 0}, 1, make([]byte, 1)); err == nil {
		t.Fatal("value 2 accepted")
	}
	if err := UnpackQ(TL1, []byte{0x09}, 1, make([]int8, 2)); err == nil {
		t.Fatal("TL1 index 9 accepted")
	}
	if err := UnpackQ(TL2, []byte{0x0e, 0}, 1, make([]int8, 3)); err == nil {
		t.Fatal("TL2 magnitude 14 accepted")
	}
	if err := UnpackQ(TL1, []byte{0x08}, 1, make([]int8, 1)); err == nil {
		t.Fatal("nonzero TL1 padding accepted")
	}
	if err := UnpackQ(TL2, make([]byte, 5), 1, make([]int8, 3)); err == nil {
		t.Fatal("wrong packed length accepted")
	}
}
