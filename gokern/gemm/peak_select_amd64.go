//go:build !noasm && amd64

package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// peakTable lists the generated peak loops (peak_amd64.s) and the family
// each needs; BenchmarkPeak times them all, Peak the ones of the family in
// use.
var peakTable = []struct {
	name string
	fam  cpu.Family
	loop peakLoop
}{
	{"fma_avx2", cpu.AVX2, peakLoop{"VFMADD231PS ymm", 12 * 8 * 2, peakFMAAVX2}},
	{"maddubsw_avx2", cpu.AVX2, peakLoop{"VPMADDUBSW+VPMADDWD+VPADDD ymm", 8 * 32 * 2, peakMADDAVX2}},
	{"maddubsw_addw_avx2", cpu.AVX2, peakLoop{"VPMADDUBSW+VPADDW ymm", 12 * 32 * 2, peakMADDWAVX2}},
	{"fma_avx512", cpu.AVX512, peakLoop{"VFMADD231PS zmm", 12 * 16 * 2, peakFMAAVX512}},
	{"vpdpbusd_avx512", cpu.AVX512VNNI, peakLoop{"VPDPBUSD zmm", 12 * 64 * 2, peakVNNI512}},
}

// peakOf returns peakTable's loop called name.
func peakOf(name string) peakLoop {
	for _, p := range peakTable {
		if p.name == name {
			return p.loop
		}
	}
	panic("gemm: no peak loop " + name)
}

// peakLoops returns the loops of ks's float32 and int8 instruction mixes:
// FMA on YMM (ZMM for the AVX-512 families); VPDPBUSD on ZMM for the VNNI
// family, else the implicit GEMM's VPMADDUBSW + VPADDW on YMM.
func peakLoops(ks *Kernels) (f32, i8 peakLoop) {
	switch ks.Family {
	case cpu.AVX2:
		f32 = peakOf("fma_avx2")
	case cpu.AVX512, cpu.AVX512VNNI:
		f32 = peakOf("fma_avx512")
	default:
		return
	}
	if ks.Family == cpu.AVX512VNNI {
		i8 = peakOf("vpdpbusd_avx512")
	} else {
		i8 = peakOf("maddubsw_addw_avx2")
	}
	return
}
