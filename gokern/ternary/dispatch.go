package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// family is the kernel family the quantizer's seams use now.
var family = cpu.Generic

func init() { SelectKernels() }

// SelectKernels points the kernel seams (see kernelSet) at the
// best family that cpu.Pick allows among those compiled in (simdKernels,
// defined per architecture: kernels_amd64.go, kernels_other.go). Tests call
// it again after cpu.Override.
func SelectKernels() {
	generic.install()
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

// kernelSet is one family's versions of the seams (see quantize.go for their
// contracts).
type kernelSet struct {
	absSum   func(x []float32) (float64, int)
	absMax   func(x []float32) (float32, int)
	quantRun func(x []float32, scale float32, pos int, dst []byte)
	// quantBlocks: see quantBlocksGeneric.
	quantBlocks func(x []float32, bs, pos int, m Method, packed []byte, scales []float32) int
	// quantSpec: see quantSpecGeneric.
	quantSpec func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, int)
	// quantSpecMax: see quantSpecMaxGeneric.
	quantSpecMax func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (uint32, int)
	// fixCodes: see fixCodesGeneric.
	fixCodes func(packed []byte, ent []uint64, base int, scale float32)
}

// generic is the oracle every family is tested against.
var generic = kernelSet{
	absSum:       absSumGeneric,
	absMax:       absMaxGeneric,
	quantRun:     quantRunGeneric,
	quantBlocks:  quantBlocksGeneric,
	quantSpec:    quantSpecGeneric,
	quantSpecMax: quantSpecMaxGeneric,
	fixCodes:     fixCodesGeneric,
}

func (k kernelSet) install() {
	absSum, absMax, quantRun = k.absSum, k.absMax, k.quantRun
	quantBlocks, quantSpec, quantSpecMax, fixCodes = k.quantBlocks, k.quantSpec, k.quantSpecMax, k.fixCodes
}
