//go:build !noasm && amd64

package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// peakLoops returns the loops of ks's float32 and int8 instruction mixes:
// FMA on YMM (ZMM for the AVX-512 families); VPDPBUSD on ZMM for the VNNI
// family, else the implicit GEMM's VPMADDUBSW + VPADDW on YMM.
func peakLoops(ks *Kernels) (f32, i8 peakLoop) {
	switch ks.Family {
	case cpu.AVX2:
		f32 = peakLoop{"VFMADD231PS ymm", 12 * 8 * 2, peakFMAAVX2}
	case cpu.AVX512, cpu.AVX512VNNI:
		f32 = peakLoop{"VFMADD231PS zmm", 12 * 16 * 2, peakFMAAVX512}
	default:
		return
	}
	if ks.Family == cpu.AVX512VNNI {
		i8 = peakLoop{"VPDPBUSD zmm", 12 * 64 * 2, peakVNNI512}
	} else {
		i8 = peakLoop{"VPMADDUBSW+VPADDW ymm", 12 * 32 * 2, peakMADDWAVX2}
	}
	return
}
