package qelem

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// KernelOp is the element-wise quantized ops' kernel set in the kernel
// registry: the generic Go kernels below are the oracle every SIMD family
// (kernels_avx2_amd64.go) is tested against, bit for bit.
var KernelOp = cpu.NewOp("qelem", &genericKernels)

// AddParams are the constants of one quantized add, computed once per call
// (NewAddParams): the inputs are dequantized as torch's vectorised qadd
// dequantizes, fma(scale, q, scale * -zp) in float32 with one rounding, the
// sum is float32, and the output code is clamp(nearbyint(sum * Inv), Lo, Hi)
// + ZO, ties to even (Lo, Hi: the range minus the zero point; Lo is 0 with a
// fused ReLU). A NaN product gives Hi (see Kernels.Add). The SIMD kernels
// rely on Lo and Hi being integers with Lo+ZO and Hi+ZO in the dtype's
// range (they clamp below with saturating packs and a max with the code
// Lo+ZO), as NewAddParams makes them.
type AddParams struct {
	SA, PA float32 // a's scale and float32(SA * -zp_a)
	SB, PB float32 // b's
	Inv    float32 // float32(1 / out scale)
	Lo, Hi float32 // float32(qmin - ZO) (0 with ReLU), float32(qmax - ZO)
	ZO     int32   // the output's zero point
	// Bounded: every product c*Inv, c the sum of a dequantized code of a
	// and one of b (for AddConst: a's and d, which must then be one of b's
	// dequantized codes), is finite and below 2^31 in magnitude
	// (NewAddParams works it out). The SIMD kernels then leave out the
	// clip at Hi: their saturating packs give the same codes, as Hi+ZO is
	// the dtype's largest code (as NewAddParams makes it; a Bounded
	// AddParams with a lower Hi is not one the kernels take). False is
	// always safe.
	Bounded bool
}

// Kernels are the element-wise quantized kernels of one family. Codes are
// bytes: uint8 as they are, int8 in two's complement.
type Kernels struct {
	// AddU8 writes out[i] = code(deq(a[i], SA, PA) + deq(b[i], SB, PB)) for
	// uint8 a, b and out; AddI8 for int8. deq(q, s, p) = fma(s, q, p) in
	// float32; the sum is rounded to float32; code(c) =
	// clamp(roundEven(float32(c*Inv)), Lo, Hi) + ZO, a NaN product giving
	// Hi.
	AddU8, AddI8 func(a, b []byte, p *AddParams, out []byte)
	// AddConstU8 and AddConstI8 are AddU8 and AddI8 with one operand
	// already dequantized: out[i] = code(deq(a[i], SA, PA) + d) (SB and PB
	// unused). The sum is commutative, so a broadcast a or b both take it.
	AddConstU8, AddConstI8 func(a []byte, d float32, p *AddParams, out []byte)
	// Requant[i][o] writes out[i] = code(float32(s * float32(x[i] - zi)))
	// (code as for Add, with p's Inv, Lo, Hi and ZO; p.Inv finite): x's
	// codes are uint8 (i = 0) or int8 (i = 1), out's uint8 (o = 0) or int8
	// (o = 1). It is the quantizer's dequantize then quantize
	// (quant.DequantizeKernels.Run, quant.QuantizeKernels.Run) fused: the
	// value is finite, so no NaN code enters.
	Requant [2][2]func(x []byte, s float32, zi int32, p *AddParams, out []byte)
	// ReluU8 and ReluI8 write out[i] = max(x[i], zp) (unsigned and signed
	// bytes; zp in the type's range).
	ReluU8, ReluI8 func(x []byte, zp int32, out []byte)
}

var genericKernels = Kernels{
	AddU8: addGeneric[uint8], AddI8: addGeneric[int8],
	AddConstU8: addConstGeneric[uint8], AddConstI8: addConstGeneric[int8],
	ReluU8: reluGeneric[uint8], ReluI8: reluGeneric[int8],
	Requant: [2][2]func(x []byte, s float32, zi int32, p *AddParams, out []byte){
		{requantGeneric[uint8], requantGeneric[uint8]}, {requantGeneric[int8], requantGeneric[int8]},
	},
}

// Deq is one dequantized code as torch's vectorised quantized kernels
// compute it: fma(s, q, p) with p = float32(s * -zp), rounded once to
// float32. The float64 product and sum are exact (|q| < 256 and |p| >= s
// or p = 0, so both are multiples of ulp(s) below 2^33 ulp(s)), so the
// float64 FMA is the float32 one.
func Deq(s, p float32, q int32) float32 {
	return float32(math.FMA(float64(s), float64(q), float64(p)))
}

// Code is the output code of the float32 sum c (see AddParams).
func Code(c float32, p *AddParams) int32 {
	t := float32(c * p.Inv)
	if !(t < p.Hi) { // NaN too
		t = p.Hi
	}
	if t < p.Lo {
		t = p.Lo
	}
	return int32(math.RoundToEven(float64(t))) + p.ZO
}

// code8 reads a byte as T's code.
func code8[T uint8 | int8](v byte) int32 { return int32(T(v)) }

func addGeneric[T uint8 | int8](a, b []byte, p *AddParams, out []byte) {
	b, out = b[:len(a)], out[:len(a)]
	for i := range a {
		c := float32(Deq(p.SA, p.PA, code8[T](a[i])) + Deq(p.SB, p.PB, code8[T](b[i])))
		out[i] = byte(Code(c, p))
	}
}

func addConstGeneric[T uint8 | int8](a []byte, d float32, p *AddParams, out []byte) {
	out = out[:len(a)]
	for i := range a {
		c := float32(Deq(p.SA, p.PA, code8[T](a[i])) + d)
		out[i] = byte(Code(c, p))
	}
}

// requantGeneric is Requant for input codes T (the output's dtype is only
// in p's Lo, Hi and ZO).
func requantGeneric[T uint8 | int8](x []byte, s float32, zi int32, p *AddParams, out []byte) {
	out = out[:len(x)]
	for i, v := range x {
		out[i] = byte(Code(float32(s*float32(code8[T](v)-zi)), p))
	}
}

func reluGeneric[T uint8 | int8](x []byte, zp int32, out []byte) {
	out = out[:len(x)]
	z := T(zp)
	for i, v := range x {
		out[i] = byte(max(T(v), z))
	}
}
