//go:build !noasm && amd64

package gemm

import (
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
