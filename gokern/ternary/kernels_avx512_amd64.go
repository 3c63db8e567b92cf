//go:build !noasm && amd64

package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// The avx512 family (AVX-512 F/BW/VL) is the AVX2 quantizer with the
// one-pass kernels of a per-tensor scale (quantize one scale: quantizeSpec)
// in AVX-512, from _gen/ternary512.go into quant_avx512_amd64.s: there a
// compare writes a mask register, one bit a value, and bfloat16 is compared
// as 16-bit integers, 32 values an instruction. Every other seam runs the
// AVX2 kernels. The float32 and bfloat16 kernels add in the same order, so
// QuantizeBF16 and Quantize of the widened tensor agree bit for bit within
// the family, as they do within AVX2.
var _ = QuantizeOp.Register(cpu.AVX512, avx512)

var avx512 = func() *Quantizer {
	q := *avx2
	q.family = cpu.AVX512
	q.quantSpec = quantSpecAVX512
	q.quantSpecMax = quantSpecMaxAVX512
	q.quantSpecBF16 = quantSpecBF16AVX512
	q.quantSpecMaxBF16 = quantSpecMaxBF16AVX512
	return &q
}()
