package ternary

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
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

// Counts that describe no tensor must fail before any loop runs: n = 0 with
// a huge row count used to pass "rows divides n" and loop over 2^62 rows.
func TestCountsChecked(t *testing.T) {
	const huge = 1 << 62
	tests := []struct {
		name    string
		n, rows int
		wantSub string // "" : valid
	}{
		{"n=0 rows=1", 0, 1, "n (the number of values)"},
		{"n=0 huge rows", 0, huge, "n (the number of values)"},
		{"n<0", -4, 1, "n (the number of values)"},
		{"n too large", MaxElements + 1, 1, "n (the number of values)"},
		{"rows=0", 6, 0, "rows must be between 1 and n = 6"},
		{"rows<0", 6, -2, "rows must be between 1 and n = 6"},
		{"rows>n", 6, 12, "rows must be between 1 and n = 6"},
		{"huge rows", 6, huge, "rows must be between 1 and n = 6"},
		{"rows not dividing", 6, 4, "rows must be between 1 and n = 6"},
		{"valid rows=n", 6, 6, ""},
		{"valid rows=1", 6, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) { t.Helper(); wantErr(t, what, err, tc.wantSub) }
			_, err := checkRowsK(tc.n, tc.rows)
			check("checkRowsK", err)
			for _, q := range []QType{I2S, TL1, TL2} {
				l, err := PackedLenQ(q, tc.n, tc.rows)
				check(fmt.Sprintf("PackedLenQ(%s)", q), err)
				if tc.n < 0 || tc.n > 1<<20 {
					continue // no slice of that length
				}
				if l == 0 {
					l = 1 // some buffer: the counts must be rejected whatever its length
				}
				vals := make([]int8, tc.n)
				packed := bytes.Repeat([]byte{0xff}, l) // overwritten by a valid PackQ
				check(fmt.Sprintf("PackQ(%s)", q), PackQ(q, vals, tc.rows, packed))
				check(fmt.Sprintf("UnpackQ(%s)", q), UnpackQ(q, packed, tc.rows, vals))
				out := make([]float32, tc.n)
				check(fmt.Sprintf("DequantizeQ(%s)", q), DequantizeQ(q, packed, tc.rows, 0, []float32{1}, out))
			}
		})
	}
}

func TestPackedLengthExact(t *testing.T) {
	tests := []struct {
		name    string
		q       QType
		n, rows int
		plen    int
	}{
		{"i2s short", I2S, 129, 1, 63},
		{"i2s long", I2S, 129, 1, 65},
		{"i2s empty", I2S, 1, 1, 0},
		{"tl1 short", TL1, 10, 2, 3},
		{"tl2 long", TL2, 6, 1, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := bytes.Repeat([]byte{padByte}, tc.plen)
			if err := UnpackQ(tc.q, p, tc.rows, make([]int8, tc.n)); err == nil || !strings.Contains(err.Error(), "packed must have") {
				t.Fatalf("UnpackQ: err = %v", err)
			}
			if err := PackQ(tc.q, make([]int8, tc.n), tc.rows, p); err == nil || !strings.Contains(err.Error(), "packed must have") {
				t.Fatalf("PackQ: err = %v", err)
			}
			err := DequantizeQ(tc.q, p, tc.rows, 0, []float32{1}, make([]float32, tc.n))
			if err == nil || !strings.Contains(err.Error(), "packed must have") {
				t.Fatalf("DequantizeQ: err = %v", err)
			}
		})
	}
}

// wantErr fails the test unless err is nil where wantSub is empty, or an
// error mentioning wantSub.
func wantErr(t *testing.T, what string, err error, wantSub string) {
	t.Helper()
	switch {
	case wantSub == "" && err != nil:
		t.Fatalf("%s: %v", what, err)
	case wantSub != "" && (err == nil || !strings.Contains(err.Error(), wantSub)):
		t.Fatalf("%s: err = %v, want it to mention %q", what, err, wantSub)
	}
}
