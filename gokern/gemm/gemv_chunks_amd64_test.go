//go:build !noasm && amd64

package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestGemvChunks runs the VNNI and the AVX2 GEMV, the checking kernels
// and the unchecked ones, with rows split into runs of 1, 2 and 3 groups
// (gemvChunk's in production), whose partial sums are added, against
// direct sums; the largest sums, every weight +1 against -128, are among
// them. A family the CPU lacks is skipped, and says so.
func TestGemvChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 4))
	randVal := func(int, int) int8 { return int8(rng.IntN(3) - 1) }
	randAct := func(_, i int) int8 { return int8(rng.IntN(256) - 128) }
	type run = func(w []byte, ldw int, x []int8, ldx, ng int, xsum []int32, rows int, out []int32) uint32
	for _, v := range []struct {
		name string
		fam  cpu.Family
		run  run
	}{
		{"vnni chunked", cpu.AVX512VNNI, gemvVNNIChecked.run}, {"vnni chunked unchecked", cpu.AVX512VNNI, gemvVNNIValid.run},
		{"avx2 chunked", cpu.AVX2, gemvI8AVX2Checked.run}, {"avx2 chunked unchecked", cpu.AVX2, gemvI8AVX2Valid.run},
	} {
		t.Run(v.name, func(t *testing.T) {
			if !cpu.Usable(v.fam) {
				t.Skipf("family %s is not usable on this CPU", v.fam)
			}
			for _, chunk := range []int{1, 2, 3} {
				run := func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
					return gemvChunked(w, ldw, x, k, ldx, xsum, out, chunk, v.run)
				}
				for _, tc := range []struct{ ng, rows, cols int }{{1, 5, 1}, {2, 4, 3}, {5, 3, 4}, {7, 6, 1}, {6, 2, 9}, {3, 9, 5}, {4, 4, 8}, {5, 70, 6}} {
					newGemvCase(t, tc.ng*GroupValues, tc.rows, tc.cols, 0, 1, randVal, randAct).check(t, v.name, run)
				}
				newGemvCase(t, 9*GroupValues, 3, 2, 0, 0, func(int, int) int8 { return 1 }, func(int, int) int8 { return -128 }).check(t, v.name, run)
			}
		})
	}
}

// guarded returns a copy of c whose rows' stride padding and the bytes
// past w hold codes 3 (0xFF) and the values past x activations 127, within
// the slices' capacity: a kernel that reads past a row's last group or
// past a column's k values adds them in (or, checking, reports a code 3 in
// valid codes), which check sees.
func guarded(c *gemvCase) *gemvCase {
	g := *c
	w := make([]byte, len(c.w)+256)
	for i := range w {
		w[i] = 0xFF
	}
	for r := range c.rows {
		copy(w[r*c.ldw:], c.w[r*c.ldw:][:c.k/4])
	}
	g.w = w[:len(c.w)]
	x := make([]int8, len(c.x)+256)
	for i := range x {
		x[i] = 127
	}
	for j := range c.cols {
		copy(x[j*c.ldx:], c.x[j*c.ldx:][:c.k])
	}
	g.x = x[:len(c.x)]
	return &g
}

// TestGemvPairs runs the VNNI one-column GEMV's pair tiles (runPairs:
// tiles of 4, 2 and 1 rows, two groups a step), checking and unchecked,
// whole and in runs of 2 and 4 groups as gemvI8VNNIKernel splits them
// (even runs; an odd group only at the end), against direct sums: odd and
// even group counts, 1 to 9 rows, padded strides, codes 3 and activations
// 127 right past every row and past x (guarded: nothing past them may be
// read), the largest sums (every weight +1 or -1 against -128 or 127 over
// 301 groups, and over 16384, the most one call takes), and a code 3 in
// every row (tiles of 4, 2 and 1), in either group of a step or in an odd
// last group, reported by the checking tiles. Skipped, saying so, where
// the CPU lacks AVX-512 VNNI.
func TestGemvPairs(t *testing.T) {
	if !cpu.Usable(cpu.AVX512VNNI) {
		t.Skipf("family %s is not usable on this CPU", cpu.AVX512VNNI)
	}
	rng := rand.New(rand.NewPCG(15, 5))
	randVal := func(int, int) int8 { return int8(rng.IntN(3) - 1) }
	randAct := func(_, i int) int8 { return int8(rng.IntN(256) - 128) }
	pairs := func(tiles *gemvVNNITiles, chunk int) func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		return func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
			return gemvChunked(w, ldw, x, k, ldx, xsum, out, min(chunk, k/GroupValues), tiles.runPairs)
		}
	}
	for _, v := range []struct {
		name  string
		tiles *gemvVNNITiles
	}{{"checked", &gemvVNNIChecked}, {"unchecked", &gemvVNNIValid}} {
		for _, chunk := range []int{2, 4, 1 << 20} {
			name := fmt.Sprintf("pairs %s, runs of %d groups", v.name, chunk)
			for _, tc := range []struct{ ng, rows, wpad int }{{1, 1, 0}, {2, 3, 32}, {3, 4, 0}, {4, 5, 0}, {5, 7, 64}, {6, 8, 0}, {7, 9, 0}, {9, 2, 32}, {33, 6, 0}} {
				guarded(newGemvCase(t, tc.ng*GroupValues, tc.rows, 1, tc.wpad, 0, randVal, randAct)).check(t, name, pairs(v.tiles, chunk))
			}
			for _, w := range []int8{1, -1} {
				for _, a := range []int8{-128, 127} {
					newGemvCase(t, 301*GroupValues, 7, 1, 0, 0, func(int, int) int8 { return w }, func(int, int) int8 { return a }).
						check(t, name, pairs(v.tiles, chunk))
				}
			}
		}
		for _, w := range []int8{1, -1} {
			newGemvCase(t, gemvVNNIMaxGroups*GroupValues, 4, 1, 0, 0, func(int, int) int8 { return w }, func(int, int) int8 { return -128 }).
				check(t, "pairs "+v.name+", 16384 groups", pairs(v.tiles, gemvVNNIMaxGroups))
		}
	}
	for _, ng := range []int{1, 2, 3, 6} {
		c := newGemvCase(t, ng*GroupValues, 7, 1, 32, 0, randVal, randAct)
		for r := range c.rows {
			for _, pos := range []int{0, 31, 96, 127, 128, 200, c.k - 1} {
				if pos >= c.k {
					continue
				}
				bad := append([]byte(nil), c.w...)
				bad[r*c.ldw+pos/128*32+pos%32] |= 3 << (6 - 2*(pos%128/32))
				if pairs(&gemvVNNIChecked, 2)(bad, c.ldw, c.x, c.k, c.ldx, c.xsum, make([]int32, c.rows)) {
					t.Errorf("pairs: %d groups: code 3 at %d of row %d not reported", ng, pos, r)
				}
			}
		}
	}
}
