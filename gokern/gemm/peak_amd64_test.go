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
	for _, p := range peakTable {
		b.Run(p.name, func(b *testing.B) {
			if !cpu.Usable(p.fam) {
				b.Skipf("family %s not usable here", p.fam)
			}
			for b.Loop() {
				p.loop.run(iters)
			}
			b.ReportMetric(p.loop.ops*iters*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gops/s")
		})
	}
}
