package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// family is the kernel family the quantizer's seams use now.
var family = cpu.Generic

func init() { SelectKernels() }

// SelectKernels points the kernel seams (absSum, absMax, quantRun) at the
// best family that cpu.Pick allows. The foundation ships only the generic Go
// kernels; SIMD families add themselves to simdKernels in their own files.
// Tests call it again after cpu.Override.
func SelectKernels() {
	absSum, absMax, quantRun = absSumGeneric, absMaxGeneric, quantRunGeneric
	family = cpu.Generic
	var impl []cpu.Family
	for f := range simdKernels {
		impl = append(impl, f)
	}
	f := cpu.Pick(impl...)
	if k, ok := simdKernels[f]; ok {
		k.install()
		family = f
	}
	cpu.Record("quantize_i2s", family)
}

// Family reports the kernel family the quantizer uses.
func Family() cpu.Family { return family }

// kernelSet installs one family's versions of the seams.
type kernelSet struct{ install func() }

// simdKernels maps a family to its kernels; empty until a SIMD family is
// compiled in.
var simdKernels = map[cpu.Family]kernelSet{}
