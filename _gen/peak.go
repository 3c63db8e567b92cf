//go:build generate

package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/reg"
)

// Peak loops (gokern/gemm BenchmarkPeak): the instruction mixes of the
// micro-kernels with no loads and enough independent accumulators to hide
// latency, so their rate is the core's ceiling for that mix.

// peakLoops emits gokern/gemm/peak_amd64.s.
func peakLoops(c *build.Context) {
	peakLoop(c, "peakFMAAVX2", "12 VFMADD231PS on YMM per iteration", 12, false, func(s, d reg.VecVirtual) { c.VFMADD231PS(s, s, d) })
	peakLoop(c, "peakFMAAVX512", "12 VFMADD231PS on ZMM per iteration", 12, true, func(s, d reg.VecVirtual) { c.VFMADD231PS(s, s, d) })
	peakLoop(c, "peakVNNI512", "12 VPDPBUSD on ZMM per iteration", 12, true, func(s, d reg.VecVirtual) { c.VPDPBUSD(s, s, d) })
	peakLoop(c, "peakMADDAVX2", "8 VPMADDUBSW+VPMADDWD+VPADDD on YMM per iteration", 8, false, func(s, d reg.VecVirtual) {
		t := c.YMM()
		c.VPMADDUBSW(s, s, t)
		c.VPMADDWD(t, t, t)
		c.VPADDD(t, d, d)
	})
	// the implicit GEMM's mix: int16 sums widened only now and then
	peakLoop(c, "peakMADDWAVX2", "12 VPMADDUBSW+VPADDW on YMM per iteration", 12, false, func(s, d reg.VecVirtual) {
		t := c.YMM()
		c.VPMADDUBSW(s, s, t)
		c.VPADDW(t, d, d)
	})
}

// peakLoop emits func name(n int): n iterations of acc chains of op, on
// ZMM registers with zmm, else on YMM.
func peakLoop(c *build.Context, name, doc string, chains int, zmm bool, op func(s, d reg.VecVirtual)) {
	declare(c, name, "func(n int)", name+" runs n >= 1 iterations of "+doc+".")
	n := loadArg(c, "n")
	vec, zero := c.YMM, func(v reg.VecVirtual) { c.VPXOR(v, v, v) }
	if zmm {
		vec, zero = c.ZMM, func(v reg.VecVirtual) { c.VPXORD(v, v, v) } // EVEX: any register
	}
	acc := zeroed(chains, vec, zero)
	src := zeroed(1, vec, zero)[0]
	repeat(c, name+"_loop", n, func() {
		for i := range acc {
			op(src, acc[i])
		}
	})
	vzeroRet(c)
}
