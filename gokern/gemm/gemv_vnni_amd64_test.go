//go:build !noasm && amd64

package gemm

import (
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestGemvVNNIChunks runs the VNNI GEMV, the checking tiles and the
// unchecked ones, with rows split into runs of 1, 2 and 3 groups
// (gemvVNNIMaxGroups in production), whose partial sums are added, against
// direct sums; the largest sums, every weight +1 against -128, are among
// them.
func TestGemvVNNIChunks(t *testing.T) {
	if _, f := GemvOp.Select(cpu.ParseDisable("")); f != cpu.AVX512VNNI {
		t.Skipf("avx512vnni is not usable here (best family: %s)", f)
	}
	rng := rand.New(rand.NewPCG(15, 4))
	randVal := func(int, int) int8 { return int8(rng.IntN(3) - 1) }
	randAct := func(_, i int) int8 { return int8(rng.IntN(256) - 128) }
	for _, v := range []struct {
		name  string
		tiles *gemvVNNITiles
	}{{"vnni chunked", &gemvVNNIChecked}, {"vnni chunked unchecked", &gemvVNNIValid}} {
		for _, chunk := range []int{1, 2, 3} {
			for _, tc := range []struct{ ng, rows, cols int }{{1, 5, 1}, {2, 4, 3}, {5, 3, 4}, {7, 6, 1}, {6, 2, 9}, {3, 9, 5}, {4, 4, 8}} {
				c := newGemvCase(t, tc.ng*GroupValues, tc.rows, tc.cols, 0, 1, randVal, randAct)
				c.check(t, v.name, func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
					return gemvI8VNNIChunked(w, ldw, x, k, ldx, xsum, out, chunk, v.tiles)
				})
			}
			c := newGemvCase(t, 9*GroupValues, 3, 2, 0, 0, func(int, int) int8 { return 1 }, func(int, int) int8 { return -128 })
			c.check(t, v.name, func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
				return gemvI8VNNIChunked(w, ldw, x, k, ldx, xsum, out, chunk, v.tiles)
			})
		}
	}
}
