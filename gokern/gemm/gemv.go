package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// GemvKernels is one family's int8 GEMV over I2_S rows: the op
// "linear_gemv" (GemvOp), which the GEMV-like pointwise convolutions and
// so linear layers run for int8 activations. It is an op of its own, apart
// from "conv_gemm", so that each dispatches by its own measurement: the
// AVX-512 VNNI kernel wins GEMV on CPUs where the VNNI micro-kernels do not
// win the convolutions.
type GemvKernels struct {
	Family cpu.Family
	// I8 sets, exactly, out[r*ncol+j] = sum_{i<k} w_r(i)*x[j*ldx+i] for
	// rows r < len(out)/ncol and columns j < ncol = len(xsum), straight
	// from I2_S codes: row r's k/128 whole I2_S groups start at w[r*ldw]
	// (k a positive multiple of GroupValues, at most 2^24; ldw >= k/4),
	// ldx >= k, len(x) >= (ncol-1)*ldx+k, and xsum[j] = the sum of column
	// j's k activations (SumI8): the kernels sum the codes w+1 times x and
	// subtract xsum once. It returns false where a row holds a code 3 (out
	// is then undefined).
	I8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool
}

// GemvOp is the registry's op "linear_gemv"; gemvI8Generic is its oracle.
var GemvOp = cpu.NewOp("linear_gemv", &GemvKernels{Family: cpu.Generic, I8: gemvI8Generic})

// GemvFamilies lists the GEMV kernels compiled in and usable here, generic
// first, for tests that run every family against the oracle.
func GemvFamilies() []*GemvKernels { return GemvOp.Impls() }
