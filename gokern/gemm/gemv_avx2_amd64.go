//go:build !noasm && amd64

package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// The AVX2 family's int8 GEMV (op "linear_gemv"): gemvI8AVX2Kernel
// (kernels_amd64.go; VPMADDUBSW into int16 lanes, VPMADDWD every 16
// groups), the kernels of _gen/gemm_avx2.go with the code-3 check (I8) and
// without (I8Valid), and with scale blocks gemvI8AVX2Blocks.
var _ = GemvOp.Register(cpu.AVX2, &GemvKernels{Family: cpu.AVX2,
	I8: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		return gemvI8AVX2Kernel(w, ldw, x, k, ldx, xsum, out, &gemvI8AVX2Checked)
	},
	I8Valid: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) {
		gemvI8AVX2ValidKernel(w, ldw, x, k, ldx, xsum, out)
	},
	I8ValidBlocks: gemvI8AVX2Blocks,
})

// gemvI8AVX2ValidKernel is the family's I8Valid, returning true (the shape
// of I8).
func gemvI8AVX2ValidKernel(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
	return gemvI8AVX2Kernel(w, ldw, x, k, ldx, xsum, out, &gemvI8AVX2Valid)
}

// gemvI8AVX2Blocks is the family's I8ValidBlocks: per block of
// gemvI8AVX2Rows rows, columns in fours (gemvI8AVX2b4v) then one by one
// (gemvI8AVX2b1v), each call one row's every block (the columns'
// activations stay in L1 while the block's rows go by); then each block's
// column sums subtracted. One block (a scale per row) runs I8Valid, which
// splits k where four columns' activations would not fit L1, and
// transposes its sums (blocksByCalls): the block tiles over a whole row of
// 11008 were 10-15% slower (BenchmarkGEMVBlocks' shapes, 8 and 64
// samples, Zen 4), and as fast below.
func gemvI8AVX2Blocks(w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32) bool {
	if nb == 1 {
		return blocksByCalls(gemvI8AVX2ValidKernel, w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out, 0)
	}
	rows := blocksRows(w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out)
	for rb := 0; rb < rows; rb += gemvI8AVX2Rows {
		re := min(rows, rb+gemvI8AVX2Rows)
		j := 0
		for ; j+4 <= ncol; j += 4 {
			for r := rb; r < re; r++ {
				gemvI8AVX2b4v(&w[r*ldw], ldw, &x[j*ldx], ldx, gpb, nb, &out[j*rows+r], rows, ncol*rows)
			}
		}
		for ; j < ncol; j++ {
			for r := rb; r < re; r++ {
				gemvI8AVX2b1v(&w[r*ldw], ldw, &x[j*ldx], ldx, gpb, nb, &out[j*rows+r], rows, ncol*rows)
			}
		}
	}
	for b := range nb {
		for j, s := range xsum[b*xsb:][:ncol] {
			col := out[(b*ncol+j)*rows:][:rows]
			for r := range col {
				col[r] -= s
			}
		}
	}
	return true
}
