//go:build !noasm && amd64

package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// The AVX2 family's int8 GEMV (op "linear_gemv"): gemvI8AVX2Kernel
// (kernels_amd64.go; VPMADDUBSW, VPMADDWD).
var _ = GemvOp.Register(cpu.AVX2, &GemvKernels{Family: cpu.AVX2, I8: gemvI8AVX2Kernel, I8Valid: checkedOnly(gemvI8AVX2Kernel)})
