//go:build !noasm && amd64

package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// The AVX2 family's int8 GEMV (op "linear_gemv"): gemvI8AVX2Kernel
// (kernels_amd64.go; VPMADDUBSW into int16 lanes, VPMADDWD every 16
// groups), the kernels of _gen/gemm_avx2.go with the code-3 check (I8) and
// without (I8Valid).
var _ = GemvOp.Register(cpu.AVX2, &GemvKernels{Family: cpu.AVX2,
	I8: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		return gemvI8AVX2Kernel(w, ldw, x, k, ldx, xsum, out, &gemvI8AVX2Checked)
	},
	I8Valid: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) {
		gemvI8AVX2Kernel(w, ldw, x, k, ldx, xsum, out, &gemvI8AVX2Valid)
	}})
