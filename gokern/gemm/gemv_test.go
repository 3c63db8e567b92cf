package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// gemvCase is one int8 GEMV problem: rows of ternary values q (packed into
// w, ldw bytes apart), cols activation columns (ldx apart), their sums and
// the exact products.
type gemvCase struct {
	k, ldw, ldx, rows, cols int
	w                       []byte
	x                       []int8
	xsum, want              []int32
}

// newGemvCase packs rows x k values from val(r, i) and cols x k
// activations from act(j, i) into misaligned buffers with the strides
// given, and computes the expected sums directly from the values.
func newGemvCase(t *testing.T, k, rows, cols, wpad, xpad int, val func(r, i int) int8, act func(j, i int) int8) *gemvCase {
	t.Helper()
	c := &gemvCase{k: k, ldw: k/4 + wpad, ldx: k + xpad, rows: rows, cols: cols}
	c.w = make([]byte, (rows-1)*c.ldw+k/4+1)[1:]
	q := make([]int8, k)
	c.want = make([]int32, rows*cols)
	c.x = make([]int8, (cols-1)*c.ldx+k+1)[1:]
	for j := range cols {
		for i := range k {
			c.x[j*c.ldx+i] = act(j, i)
		}
		c.xsum = append(c.xsum, SumI8(c.x[j*c.ldx:][:k]))
	}
	for r := range rows {
		for i := range q {
			q[i] = val(r, i)
		}
		if err := ternary.Pack(q, c.w[r*c.ldw:][:k/4]); err != nil {
			t.Fatal(err)
		}
		for j := range cols {
			var s int32
			for i, v := range q {
				s += int32(v) * int32(c.x[j*c.ldx+i])
			}
			c.want[r*cols+j] = s
		}
	}
	return c
}

// check runs f on the case and compares every output.
func (c *gemvCase) check(t *testing.T, name string, f func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool) {
	t.Helper()
	got := make([]int32, len(c.want))
	for i := range got {
		got[i] = 12345 // no output may be left unwritten
	}
	if !f(c.w, c.ldw, c.x, c.k, c.ldx, c.xsum, got) {
		t.Fatalf("%s: k %d rows %d cols %d: code 3 reported in valid codes", name, c.k, c.rows, c.cols)
	}
	for i, v := range got {
		if v != c.want[i] {
			t.Errorf("%s: k %d rows %d cols %d: row %d column %d = %d, want %d", name, c.k, c.rows, c.cols,
				i/c.cols, i%c.cols, v, c.want[i])
		}
	}
}

// TestGemvI8MatchesDirect runs every family of linear_gemv against direct
// int32 sums over the unpacked values: rows and columns around every tile
// of the kernels (1 to 9 rows, 1 to 17 columns), one to many groups,
// padded row and column strides, misaligned buffers, random values and
// activations with -128 among them, then the largest sums (every weight +1
// or -1 against -128 or 127); I8Valid too on these valid codes; a code 3
// at every position class of any row must be reported by I8.
func TestGemvI8MatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	randVal := func(int, int) int8 { return int8(rng.IntN(3) - 1) }
	randAct := func(_, i int) int8 {
		if i%97 == 0 {
			return -128
		}
		return int8(rng.IntN(256) - 128)
	}
	for _, tc := range []struct{ ng, rows, cols, wpad, xpad int }{
		{1, 1, 1, 0, 0}, {1, 2, 1, 32, 0}, {2, 3, 1, 0, 0}, {3, 4, 1, 0, 0}, {1, 5, 1, 32, 1}, {7, 7, 1, 0, 0},
		{6, 8, 1, 64, 0}, {2, 9, 1, 0, 0}, {40, 6, 1, 0, 0}, {1, 1, 2, 0, 3}, {3, 3, 2, 32, 0}, {2, 2, 3, 0, 1},
		{5, 5, 4, 0, 0}, {1, 4, 5, 32, 7}, {2, 3, 6, 0, 0}, {3, 2, 7, 0, 5}, {2, 5, 8, 0, 0}, {1, 3, 9, 32, 0},
		{4, 2, 13, 0, 64}, {2, 7, 16, 0, 0}, {1, 1, 17, 0, 1}, {33, 3, 5, 0, 0},
		{129, 2, 1, 0, 0}, {257, 5, 1, 32, 0}, // one column in runs of an odd number of groups before rounding
	} {
		c := newGemvCase(t, tc.ng*GroupValues, tc.rows, tc.cols, tc.wpad, tc.xpad, randVal, randAct)
		for _, g := range GemvFamilies() {
			c.check(t, string(g.Family), g.I8)
			c.check(t, string(g.Family)+" I8Valid", func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
				g.I8Valid(w, ldw, x, k, ldx, xsum, out)
				return true
			})
			for _, pos := range []int{0, 31, 32, 63, 64, 95, 96, 127, c.k - 1} {
				r := rng.IntN(c.rows)
				bad := append([]byte(nil), c.w...)
				bad[r*c.ldw+pos/128*32+pos%32] |= 3 << (6 - 2*(pos%128/32))
				if g.I8(bad, c.ldw, c.x, c.k, c.ldx, c.xsum, make([]int32, len(c.want))) {
					t.Errorf("%s: %+v: code 3 at %d of row %d not reported", g.Family, tc, pos, r)
				}
			}
		}
	}
	for _, w := range []int8{1, -1} {
		for _, a := range []int8{-128, 127} {
			// 4x4, 2x4 and 1x4 tiles; 4x1; 4 + 2 + 1 columns (AVX2 in
			// runs of groups); AVX2's int16 blocks of 16 groups in each
			for _, cols := range []int{4, 1, 7} {
				c := newGemvCase(t, 300*GroupValues, 7, cols, 0, 0,
					func(int, int) int8 { return w }, func(int, int) int8 { return a })
				for _, g := range GemvFamilies() {
					c.check(t, string(g.Family), g.I8)
					c.check(t, string(g.Family)+" I8Valid", func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
						g.I8Valid(w, ldw, x, k, ldx, xsum, out)
						return true
					})
				}
			}
		}
	}
}

// BenchmarkGemvI8 times every family of linear_gemv on weights of rows x k
// (in L2 or past it; the generic one on the smallest only) for 1, 4 and 16
// columns, one thread.
func BenchmarkGemvI8(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sz := range [][2]int{{1024, 1024}, {4096, 4096}, {256, 4096}, {4096, 1024}, {4096, 11008}, {11008, 4096}, {2560, 6912}} {
		rows, k := sz[0], sz[1]
		w := make([]byte, rows*k/4)
		for i := range w {
			for s := 0; s < 8; s += 2 {
				w[i] |= byte(rng.IntN(3)) << s
			}
		}
		for _, cols := range []int{1, 4, 8, 16} {
			ldx := k + 64 // as conv2d copies columns: not 4 KB apart
			x := make([]int8, (cols-1)*ldx+k)
			for i := range x {
				x[i] = int8(rng.IntN(256) - 128)
			}
			xsum := make([]int32, cols)
			out := make([]int32, rows*cols)
			for _, g := range GemvFamilies() {
				if g.Family == cpu.Generic && rows*k > 1<<20 {
					continue // seconds a call
				}
				b.Run(fmt.Sprintf("%s/%dx%d/cols=%d", g.Family, rows, k, cols), func(b *testing.B) {
					b.SetBytes(int64(len(w) * cols)) // MB/s: weight bytes times columns
					for b.Loop() {
						g.I8(w, k/4, x, k, ldx, xsum, out)
					}
				})
				// codes known valid (a numbered weight's later calls)
				b.Run(fmt.Sprintf("%s/%dx%d/cols=%d/valid", g.Family, rows, k, cols), func(b *testing.B) {
					b.SetBytes(int64(len(w) * cols))
					for b.Loop() {
						g.I8Valid(w, k/4, x, k, ldx, xsum, out)
					}
				})
			}
		}
	}
}

// TestCodesValid: numbers are remembered once marked (0 never), and the
// set starts over past maxValidIDs.
func TestCodesValid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marked []uint64
		query  uint64
		want   bool
	}{
		{"marked", []uint64{7}, 7, true},
		{"other", []uint64{7}, 8, false},
		{"zero never", []uint64{0}, 0, false},
		{"none", nil, 9, false},
	} {
		validIDs.Lock()
		validIDs.m = nil
		validIDs.Unlock()
		for _, id := range tc.marked {
			MarkCodesValid(id)
		}
		if got := CodesValid(tc.query); got != tc.want {
			t.Errorf("%s: CodesValid(%d) = %v, want %v", tc.name, tc.query, got, tc.want)
		}
	}
	for id := uint64(1); id <= maxValidIDs; id++ {
		MarkCodesValid(id)
	}
	if !CodesValid(1) || !CodesValid(maxValidIDs) {
		t.Fatal("a full set lost a number")
	}
	MarkCodesValid(maxValidIDs + 1)
	if CodesValid(1) || !CodesValid(maxValidIDs+1) {
		t.Errorf("past %d numbers: the set did not start over with the new one", maxValidIDs)
	}
}

// TestSumI8: SumI8 and SumU8 against the byte loops on lengths around
// their 32-byte steps and 64-step (2048-byte) blocks, at every offset of
// the slice, on random bytes and on all 0x80 and all 0x7F (SumI8's extremes)
// and all 0x00 and all 0xFF (SumU8's).
func TestSumI8(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	for _, tc := range []struct {
		name string
		fill func(int) byte
	}{
		{"random", func(int) byte { return byte(rng.IntN(256)) }},
		{"all 0x80", func(int) byte { return 0x80 }},
		{"all 0x7F", func(int) byte { return 0x7F }},
		{"all 0x00", func(int) byte { return 0 }},
		{"all 0xFF", func(int) byte { return 0xFF }},
	} {
		buf := make([]byte, 5000)
		for i := range buf {
			buf[i] = tc.fill(i)
		}
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 1023, 1024, 2047, 2048, 2049, 2080, 4096, 4991} {
			for off := range 8 {
				x := buf[off : off+n]
				xi := unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
				if got, want := SumI8(xi), sumI8Scalar(xi); got != want {
					t.Errorf("%s: n %d offset %d: SumI8 = %d, want %d", tc.name, n, off, got, want)
				}
				var want int32
				for _, v := range x {
					want += int32(v)
				}
				if got := SumU8(x); got != want {
					t.Errorf("%s: n %d offset %d: SumU8 = %d, want %d", tc.name, n, off, got, want)
				}
			}
		}
	}
}

// BenchmarkSumI8 times SumI8 and the byte loop on one 4096-value column.
func BenchmarkSumI8(b *testing.B) {
	x := make([]int8, 4096)
	for i := range x {
		x[i] = int8(i*7 - 3)
	}
	for _, f := range []struct {
		name string
		fn   func([]int8) int32
	}{{"swar", SumI8}, {"bytes", sumI8Scalar}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(x)))
			for b.Loop() {
				f.fn(x)
			}
		})
	}
}

// TestGemvRefusesPartialGroups: every family (I8 and I8Valid) panics with
// checkGemv's message on buffers that do not hold whole groups, whatever
// the column count (a k below one group once divided the AVX2 run length
// by zero).
func TestGemvRefusesPartialGroups(t *testing.T) {
	const want = "gemm: gemv buffers do not hold whole I2_S groups"
	for _, tc := range []struct {
		name       string
		k, cols    int
		rows, wlen int
	}{
		{"k 64, 1 column", 64, 1, 4, 4 * 16},
		{"k 64, 8 columns", 64, 8, 4, 4 * 16},
		{"k 0, 5 columns", 0, 5, 2, 0},
		{"k 200, 6 columns", 200, 6, 2, 2 * 50},
	} {
		for _, g := range GemvFamilies() {
			for _, valid := range []bool{false, true} {
				got := func() (msg any) {
					defer func() { msg = recover() }()
					w := make([]byte, tc.wlen)
					x := make([]int8, tc.cols*max(tc.k, 1))
					xsum, out := make([]int32, tc.cols), make([]int32, tc.rows*tc.cols)
					if valid {
						g.I8Valid(w, tc.k/4, x, tc.k, max(tc.k, 1), xsum, out)
					} else {
						g.I8(w, tc.k/4, x, tc.k, max(tc.k, 1), xsum, out)
					}
					return nil
				}()
				if got != want {
					t.Errorf("%s %s (valid %v): panic %v, want %q", g.Family, tc.name, valid, got, want)
				}
			}
		}
	}
}

// TestGemvBlocks: every family's Blocks, codes checked and known valid,
// against the directly computed sums of each block, over odd row and
// column counts (tiles of 4 and the rest), one to forty blocks of one to
// three groups (and one past gemvVNNIMaxGroups), xsum rows wider than the
// columns (xsb), and a code 3 in the last block for the checked form.
func TestGemvBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct{ rows, cols, nb, gpb int }{
		{1, 1, 1, 1}, {4, 1, 2, 1}, {4, 4, 3, 2}, {5, 3, 2, 1}, {9, 7, 4, 3}, {8, 5, 1, 2}, {3, 4, 2, 2},
		{4, 5, 40, 1},                              // many blocks
		{4, 4, 1, 1}, {9, 6, 1, 5}, {13, 8, 1, 40}, // one block (a scale a row) on several columns; 40 groups: k split for L1
		{4, 1, 1, 16385}, // a block past gemvVNNIMaxGroups: a block at a time
	} {
		k := tc.nb * tc.gpb * GroupValues
		c := newGemvCase(t, k, tc.rows, tc.cols, 3, 64,
			func(int, int) int8 { return int8(rng.IntN(3) - 1) }, func(int, int) int8 { return int8(rng.IntN(256) - 128) })
		bk := tc.gpb * GroupValues
		xsb := tc.cols + 2
		xsum := make([]int32, (tc.nb-1)*xsb+tc.cols)
		want := make([]int32, tc.nb*tc.rows*tc.cols)
		vals := make([]int8, k)
		for r := range tc.rows {
			if err := ternary.Unpack(c.w[r*c.ldw:][:k/4], vals); err != nil {
				t.Fatal(err)
			}
			for b := range tc.nb {
				for j := range tc.cols {
					var s int32
					for i := b * bk; i < (b+1)*bk; i++ {
						s += int32(vals[i]) * int32(c.x[j*c.ldx+i])
					}
					want[(b*tc.cols+j)*tc.rows+r] = s
				}
			}
		}
		for b := range tc.nb {
			for j := range tc.cols {
				xsum[b*xsb+j] = SumI8(c.x[j*c.ldx+b*bk:][:bk])
			}
		}
		for _, g := range GemvFamilies() {
			for _, valid := range []bool{false, true} {
				got := make([]int32, len(want))
				if !g.Blocks(valid)(c.w, c.ldw, c.x, c.ldx, tc.gpb, tc.nb, xsum, xsb, tc.cols, got) {
					t.Fatalf("%s %+v valid=%v: reported a code 3", g.Family, tc, valid)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s %+v valid=%v: out[%d] = %d, want %d", g.Family, tc, valid, i, got[i], want[i])
					}
				}
			}
			bad := append([]byte(nil), c.w...)
			bad[(tc.rows-1)*c.ldw+k/4-1] |= 3 // a code 3 in the last row's last block
			if g.Blocks(false)(bad, c.ldw, c.x, c.ldx, tc.gpb, tc.nb, xsum, xsb, tc.cols, make([]int32, len(want))) {
				t.Fatalf("%s %+v: a code 3 not reported", g.Family, tc)
			}
		}
	}
}

// TestTranspose: shapes of conv2d's kernel-call blocks, blocksByCalls'
// parts and the scalers' block-scale slabs (rows of a wider matrix),
// four-column runs and their tails, column strides of rows and more,
// against the definition t[j*ldt+i] = m[i*ldm+j]; nothing else of t
// written.
func TestTranspose(t *testing.T) {
	for _, tc := range []struct{ rows, nc, ldt, ldm int }{{1, 1, 1, 1}, {3, 2, 3, 2}, {5, 4, 5, 4}, {7, 7, 7, 7}, {2, 9, 2, 9},
		{64, 16, 64, 16}, {63, 13, 63, 13}, {3, 5, 7, 5}, {60, 4, 64, 4}, {1, 6, 4, 6}, {61, 16, 64, 16},
		{13, 3, 13, 16}, {64, 64, 64, 171}, {5, 6, 9, 43}} {
		m := make([]int32, (tc.rows-1)*tc.ldm+tc.nc)
		for i := range m {
			m[i] = int32(i*7 + 1)
		}
		got := make([]int32, (tc.nc-1)*tc.ldt+tc.rows+3) // room past the block
		Transpose(got, tc.ldt, m, tc.ldm, tc.rows, tc.nc)
		want := make([]int32, len(got)) // 0 where no column lies
		for i := range tc.rows {
			for j := range tc.nc {
				want[j*tc.ldt+i] = m[i*tc.ldm+j]
			}
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("rows=%d nc=%d ldt=%d ldm=%d: t[%d] = %d, want %d", tc.rows, tc.nc, tc.ldt, tc.ldm, i, got[i], want[i])
			}
		}
	}
}
