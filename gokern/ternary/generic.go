package ternary

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// This file holds the generic Go kernels behind the seams of quantize.go.
// They are the oracle for SIMD families and the code used under -tags noasm,
// written to be fast in plain Go: several accumulators, no per-element
// branches on data, whole 32-byte groups at a time.

// absSumGeneric: see absSum. A float64 sum of finite float32 magnitudes
// cannot overflow (2^60 * 3.4e38 < 1.8e308), so the sum is non-finite exactly
// when an element is, and only then is the index looked for.
func absSumGeneric(x []float32) (float64, int) {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		s0 += math.Abs(float64(v[0]))
		s1 += math.Abs(float64(v[1]))
		s2 += math.Abs(float64(v[2]))
		s3 += math.Abs(float64(v[3]))
	}
	for ; i < len(x); i++ {
		s0 += math.Abs(float64(x[i]))
	}
	s := (s0 + s1) + (s2 + s3)
	if s <= math.MaxFloat64 {
		return s, -1
	}
	return s, qtensor.FirstNonFinite(x)
}

// absMaxGeneric: see absMax. For non-NaN floats the order of |x| is the
// order of their magnitude bits, so the maximum is taken on integers; a
// magnitude at or above +Inf's bits means a non-finite element, handled by a
// scalar rescan that leaves NaN out of the maximum.
func absMaxGeneric(x []float32) (float32, int) {
	var m0, m1 uint32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		a := math.Float32bits(x[i]) &^ signBit
		b := math.Float32bits(x[i+1]) &^ signBit
		m0 = max(m0, a)
		m1 = max(m1, b)
	}
	if i < len(x) {
		m0 = max(m0, math.Float32bits(x[i])&^signBit)
	}
	m := max(m0, m1)
	if m < infBits {
		return math.Float32frombits(m), -1
	}
	var mx float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > mx {
			mx = a
		}
	}
	return mx, qtensor.FirstNonFinite(x)
}

const (
	signBit = 1 << 31
	infBits = 0x7f800000
)

// codeOf is the definition of an element's I2_S code, the statement that
// every kernel must match bit for bit: +1 (code 2) when the float32 division
// v/scale is above 0.5, -1 (code 0) below -0.5, else 0 (code 1). For absmean
// this is clamp(round_half_even(r), -1, 1) (0.5 rounds to 0); for absmax it
// is the 0.5 threshold. NaN gives code 1. Kernels use Threshold instead.
func codeOf(v, scale float32) byte {
	r := v / scale
	switch {
	case r > 0.5:
		return 2
	case r < -0.5:
		return 0
	}
	return 1
}

// Threshold returns the smallest float32 t > 0 such that the float32
// division t/scale is > 0.5. Because float32 division rounds monotonically
// and symmetrically, for every x: x/scale > 0.5 exactly when x >= t, and
// x/scale < -0.5 exactly when x <= -t. Codes can then be computed with
// comparisons only, bit-identical to dividing. ok is false when scale is not
// a positive finite number (every code is then 1: see codeOf).
func Threshold(scale float32) (t float32, ok bool) {
	if !(scale > 0 && scale <= math.MaxFloat32) {
		return 0, false
	}
	t = scale * 0.5
	for t > 0 && t/scale > 0.5 {
		t = math.Nextafter32(t, 0)
	}
	for !(t/scale > 0.5) {
		t = math.Nextafter32(t, float32(math.Inf(1)))
	}
	return t, true
}

// codeFinite is the I2_S code of a finite float with bits u, for threshold
// bits ti (positive finite threshold t) and tn (those of -t): 2 when x >= t,
// 0 when x <= -t, else 1. For x >= 0 the int32 order of the bits is the
// order of the values, and for x <= 0 the uint32 order is the order of the
// magnitudes (the sign bit set puts them above every positive float). NaN is
// not handled (callers pass finite blocks only; see quantRunGeneric).
func codeFinite(u uint32, ti int32, tn uint32) byte {
	var p, q byte
	if int32(u) >= ti {
		p = 1
	}
	if u >= tn {
		q = 1
	}
	return 1 + p - q
}

// quantPiece bounds the values quantRunGeneric checks and then codes at a
// time, so that the finiteness scan and the coding read the same cached data
// (a run can be a whole thread's share of a large tensor).
const quantPiece = 4096

// quantRunGeneric: see quantRun. It works piece by piece (pieces start at
// multiples of quantPiece, so whole groups stay aligned); see quantPieceGeneric.
func quantRunGeneric(x []float32, scale float32, pos int, dst []byte) {
	for len(x) > 0 {
		k := min(len(x), quantPiece-pos&(quantPiece-1))
		quantPieceGeneric(x[:k], scale, pos, dst)
		x, pos = x[k:], pos+k
	}
}

// quantPieceGeneric codes one piece. Whole 128-value groups starting at an
// aligned position are assigned byte by byte (the group holds one scale);
// the head and tail set their 2-bit fields one by one, leaving the other
// bits. A piece holding a non-finite value goes through codeOf, the
// definition; finite pieces compare against Threshold, bit-identical and
// branch-free.
func quantPieceGeneric(x []float32, scale float32, pos int, dst []byte) {
	t, ok := Threshold(scale)
	if !ok || qtensor.FirstNonFinite(x) >= 0 {
		for i, v := range x {
			b, sh := slot(pos + i)
			dst[b] = dst[b]&^(3<<sh) | codeOf(v, scale)<<sh
		}
		return
	}
	ti, tn := int32(math.Float32bits(t)), math.Float32bits(-t)
	i := 0
	for ; i < len(x) && (pos+i)&(GroupValues-1) != 0; i++ {
		b, sh := slot(pos + i)
		dst[b] = dst[b]&^(3<<sh) | codeFinite(math.Float32bits(x[i]), ti, tn)<<sh
	}
	for ; i+GroupValues <= len(x); i += GroupValues {
		g := x[i : i+GroupValues : i+GroupValues]
		d := dst[(pos+i)>>7<<5:][:GroupBytes:GroupBytes]
		for j := 0; j < GroupBytes; j++ {
			d[j] = codeFinite(math.Float32bits(g[j]), ti, tn)<<6 |
				codeFinite(math.Float32bits(g[j+32]), ti, tn)<<4 |
				codeFinite(math.Float32bits(g[j+64]), ti, tn)<<2 |
				codeFinite(math.Float32bits(g[j+96]), ti, tn)
		}
	}
	for ; i < len(x); i++ {
		b, sh := slot(pos + i)
		dst[b] = dst[b]&^(3<<sh) | codeFinite(math.Float32bits(x[i]), ti, tn)<<sh
	}
}
