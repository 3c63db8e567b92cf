//go:build !noasm && amd64

package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// The AVX2 TQ quantizer: the block maxima with the I2_S quantizer's AVX2
// reduction (absMaxAVX2Kernel); the codes and packing are the generic Go.
var _ = TQQuantizeOp.Register(cpu.AVX2, &TQKernels{family: cpu.AVX2, absMax: absMaxAVX2Kernel, codes: tqCodesGeneric})
