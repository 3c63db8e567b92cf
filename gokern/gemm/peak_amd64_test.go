//go:build !noasm && amd64

package gemm

import (
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// BenchmarkPeak measures one core's ceiling for each micro-kernel's
// instruction mix (register-only loops of independent chains, generated
// into peak_amd64.s): GFLOP/s for FMA (2 per lane), GOP/s for the int8 mixes
// (2 per byte product). The micro-kernels' rates in BenchmarkMicro are read
// as fractions of these.
func BenchmarkPeak(b *testing.B) {
	const iters = 1 << 16
	for _, p := range []struct {
		name string
		fam  cpu.Family
		ops  float64 // per iteration
		loop func(int)
	}{
		{"fma_avx2", cpu.AVX2, 12 * 8 * 2, peakFMAAVX2},
		{"maddubsw_avx2", cpu.AVX2, 8 * 32 * 2, peakMADDAVX2},
		{"maddubsw_addw_avx2", cpu.AVX2, 12 * 32 * 2, peakMADDWAVX2},
		{"fma_avx512", cpu.AVX512, 12 * 16 * 2, peakFMAAVX512},
		{"vpdpbusd_avx512", cpu.AVX512VNNI, 12 * 64 * 2, peakVNNI512},
	} {
		b.Run(p.name, func(b *testing.B) {
			if !cpu.Usable(p.fam) {
				b.Skipf("family %s not usable here", p.fam)
			}
			for b.Loop() {
				p.loop(iters)
			}
			b.ReportMetric(p.ops*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gops/s")
		})
	}
}
