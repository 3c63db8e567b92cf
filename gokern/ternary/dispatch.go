package ternary

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// QuantizeOp is the registry's op "quantize_i2s": the quantizer's kernels
// per family (the generic set is the oracle; a SIMD family registers its
// set from kernels_amd64.go). Quantize and MaxAbs run the process's
// selection; tests run any family's set (QuantizeOp.Select, Impl).
var QuantizeOp = cpu.NewOp("quantize_i2s", generic)

// Quantizer is one family's versions of the quantizer's kernel seams (see
// quantize.go for their contracts); its methods run the quantizer on them.
type Quantizer struct {
	family cpu.Family
	// absSum returns the float64 sum of |x| and the index of the first
	// element that is NaN or ±Inf (-1 if none).
	absSum func(x []float32) (float64, int)
	// absMax returns max|x| over the non-NaN elements and the index of the
	// first element that is NaN or ±Inf (-1 if none).
	absMax func(x []float32) (float32, int)
	// quantRun quantizes x with one scale and writes the codes into dst,
	// the whole packed tensor, at flat positions pos, pos+1, ...; the bits
	// of other positions are left as they are, so dst needs no clearing.
	quantRun func(x []float32, scale float32, pos int, dst []byte)
	// quantBlocks quantizes whole blocks, scales and codes: see
	// quantBlocksGeneric.
	quantBlocks func(x []float32, bs, pos int, m Method, packed []byte, scales []float32) int
	// quantSpec: see quantSpecGeneric.
	quantSpec func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, int)
	// quantSpecMax: see quantSpecMaxGeneric.
	quantSpecMax func(x []float32, dst []byte, lo, hi float32, off uint32, ent []uint64) (uint32, int)
	// quantSpecBF16 and quantSpecMaxBF16 are quantSpec and quantSpecMax
	// on the float32 values of bfloat16 bits (see quantSpecBF16Generic).
	quantSpecBF16    func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (float64, int)
	quantSpecMaxBF16 func(x []uint16, dst []byte, lo, hi float32, off uint32, ent []uint64) (uint32, int)
	// fixCodes: see fixCodesGeneric.
	fixCodes func(packed []byte, ent []uint64, base int, scale float32)
}

// Family returns the family of q's kernels.
func (q *Quantizer) Family() cpu.Family { return q.family }

// generic is the oracle every family is tested against.
var generic = &Quantizer{
	family:       cpu.Generic,
	absSum:       absSumGeneric,
	absMax:       absMaxGeneric,
	quantRun:     quantRunGeneric,
	quantBlocks:  quantBlocksGeneric,
	quantSpec:    quantSpecGeneric,
	quantSpecMax: quantSpecMaxGeneric,
	fixCodes:     fixCodesGeneric,

	quantSpecBF16:    quantSpecBF16Generic,
	quantSpecMaxBF16: quantSpecMaxBF16Generic,
}
