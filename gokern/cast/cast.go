// Package cast converts between the float element types a checkpoint
// holds (bfloat16, float16, float32), bit for bit as numpy does, in
// parallel over par: bfloat16 -> float32 (exact: the bits shifted up),
// bfloat16 or float32 -> float16 (round to nearest, ties to even).
package cast

import (
	"math"
	"sync"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// minChunk is the fewest values a parallel piece converts: a few
// microseconds of work, so that small tensors run on one thread.
const minChunk = 1 << 15

// BF16Value is the float32 value of bfloat16 bits h (exact: bfloat16 is the
// top half of a float32).
func BF16Value(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16Bits rounds f to the nearest IEEE half-precision float, ties to even
// (numpy's float32 -> float16 conversion, bit for bit): magnitudes from
// 65520 up become ±Inf, below 2^-25 ±0; NaN stays NaN (the top mantissa
// bits kept, never turning into Inf).
func F16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127
	man := b & 0x7fffff
	switch {
	case exp == 128: // Inf or NaN
		if man == 0 {
			return sign | 0x7c00
		}
		h := uint16(man >> 13)
		if h == 0 {
			h = 1
		}
		return sign | 0x7c00 | h
	case exp > 15:
		return sign | 0x7c00
	case exp >= -14: // a normal half (or Inf after rounding up)
		h := uint32(exp+15)<<10 | man>>13
		return sign | uint16(roundShift(h, man&0x1fff, 13))
	case exp >= -25: // a subnormal half, or 0 / the smallest one
		m := man | 0x800000
		shift := uint(-exp - 1) // m * 2^(exp-23) / 2^-24
		return sign | uint16(roundShift(m>>shift, m&(1<<shift-1), shift))
	}
	return sign
}

// roundShift rounds q (a value shifted right by shift bits, rem the bits
// shifted out) to nearest, ties to even.
func roundShift(q, rem uint32, shift uint) uint32 {
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// bf16F16 is the float16 bits of every bfloat16 value, indexed by its bits
// (128 KiB, built on first use): a bfloat16 -> float16 cast is one lookup.
var bf16F16 = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for h := range t {
		t[h] = F16Bits(BF16Value(uint16(h)))
	}
	return &t
})

// WidenOp is the registry's op "cast_bf16": the bfloat16 -> float32
// widening of a run of values, per family (the generic loop is the oracle;
// cast_amd64.go registers the AVX2 kernel).
var WidenOp = cpu.NewOp("cast_bf16", bf16ToF32)

// BF16ToF32 writes the float32 values of bfloat16 bits src into dst, with
// the process's widening kernel (WidenOp.Get()).
func BF16ToF32(dst []float32, src []uint16) error {
	if err := sameLen(len(dst), len(src)); err != nil {
		return err
	}
	widen := WidenOp.Get()
	par.For(len(src), minChunk, func(lo, hi int) {
		widen(dst[lo:hi], src[lo:hi])
	})
	return nil
}

// Narrowers are one family's float16 roundings of a run of values: from
// bfloat16 bits and from float32.
type Narrowers struct {
	BF16 func(dst, src []uint16)
	F32  func(dst []uint16, src []float32)
}

// NarrowOp is the registry's op "cast_f16": the bfloat16 and float32 ->
// float16 roundings, per family (the generic table lookup and F16Bits loop
// are the oracle; cast_amd64.go registers the AVX2 + F16C kernels).
var NarrowOp = cpu.NewOp("cast_f16", Narrowers{bf16ToF16, f32ToF16})

// BF16ToF16 writes bfloat16 bits src rounded to float16 (F16Bits of their
// values) into dst, with the process's narrowing kernel (NarrowOp.Get()).
func BF16ToF16(dst, src []uint16) error {
	if err := sameLen(len(dst), len(src)); err != nil {
		return err
	}
	narrow := NarrowOp.Get().BF16
	par.For(len(src), minChunk, func(lo, hi int) {
		narrow(dst[lo:hi], src[lo:hi])
	})
	return nil
}

// F32ToF16 writes float32 src rounded to float16 (F16Bits) into dst, with
// the process's narrowing kernel (NarrowOp.Get()).
func F32ToF16(dst []uint16, src []float32) error {
	if err := sameLen(len(dst), len(src)); err != nil {
		return err
	}
	narrow := NarrowOp.Get().F32
	par.For(len(src), minChunk, func(lo, hi int) {
		narrow(dst[lo:hi], src[lo:hi])
	})
	return nil
}

func sameLen(d, s int) error {
	if d != s {
		return errs.Value("out must have as many values as x (%d), got %d", s, d)
	}
	return nil
}

func bf16ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

func bf16ToF16(dst, src []uint16) {
	t := bf16F16()
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = t[h]
	}
}

func f32ToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = F16Bits(f)
	}
}
