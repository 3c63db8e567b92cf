package quant

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// The kernel registry's ops. Each value is a struct of plain-slice
// functions; a SIMD family registers its own struct from its file
// (var _ = QuantizeOp.Register(cpu.AVX2, &avx2Quantize)), copying the
// generic functions it does not replace. Tests run every family's struct
// against the generic one (Families, Impl).
var (
	QuantizeOp   = cpu.NewOp("quant_quantize", &genericQuantize)
	DequantizeOp = cpu.NewOp("quant_dequantize", &genericDequantize)
	MinMaxOp     = cpu.NewOp("quant_minmax", &genericMinMax)
	HistogramOp  = cpu.NewOp("quant_histogram", genericHistogram)
)

// Clamp is the integer range of a quantize call and the code a NaN input
// gets (see nanCode).
type Clamp struct{ QMin, QMax, NaN int32 }

// QuantizeKernels are the quantizer's kernels.
type QuantizeKernels struct {
	// Run writes the code of every x[i] with one scale into dst[i] (the
	// code's low byte: two's complement for negative codes):
	// clamp(zp + nearbyint(x*inv), QMin, QMax), inv the float32 reciprocal
	// of the scale, the product rounded to float32, ties to even; NaN gives
	// c.NaN, ±Inf the range's ends. It returns the index of the first NaN
	// or ±Inf in x (-1 when none).
	Run func(x []float32, inv float32, zp int32, c Clamp, dst []byte) int
	// Row is Run with one (inv, zp) per element: x[i] uses inv[i], zp[i].
	Row func(x []float32, inv []float32, zp []int32, c Clamp, dst []byte) int
	// Pack4 packs codes two per byte: dst[i] = codes[2i]&15 |
	// codes[2i+1]<<4; an odd count leaves the last high nibble 0.
	Pack4 func(codes []byte, dst []byte)
	// Signs packs the signs of x eight per byte: bit b of dst[j] is
	// x[8j+b] >= 0 (NaN: 0); the unused bits of a last partial byte are 0.
	// It returns the index of the first NaN or ±Inf in x (-1 when none).
	Signs func(x []float32, dst []byte) int
	// AbsSum returns the float64 sum of |x| (in order).
	AbsSum func(x []float32) float64
}

// DequantizeKernels are the dequantizer's kernels.
type DequantizeKernels struct {
	// RunI8 writes scale * float32(int8(q[i]) - zp) into out[i] (the
	// product rounded once to float32); RunU8 reads q[i] as uint8.
	RunI8, RunU8 func(q []byte, scale float32, zp int32, out []float32)
	// RowI8 and RowU8 take one (scale, zp) per element.
	RowI8, RowU8 func(q []byte, scale []float32, zp []int32, out []float32)
	// Unpack4 writes the len(dst) nibbles of src (low nibble first) into
	// dst, sign-extended when signed (int4) and as 0..15 otherwise.
	Unpack4 func(src []byte, signed bool, dst []byte)
	// UnpackBits writes the len(dst) bits of src (LSB first) as int8 codes:
	// bit 1 -> +1, bit 0 -> -1 (0xFF).
	UnpackBits func(src []byte, dst []byte)
}

// MinMaxKernels are the min/max reduction's kernels.
type MinMaxKernels struct {
	// Run returns the minimum and maximum of the non-NaN elements of x
	// (+Inf and -Inf when there are none; ±Inf are ordinary values), the
	// index of the first NaN and of the first ±Inf (-1 when none).
	Run func(x []float32) (mn, mx float32, nan, inf int)
	// Row folds x into mn and mx element by element (mn[i] = min(mn[i],
	// x[i]), NaN sticky: a NaN in x makes both NaN) and returns the index of
	// the first NaN or ±Inf in x (-1 when none).
	Row func(x, mn, mx []float32) int
}

// HistogramKernel adds to counts (len(counts) bins over [lo, hi]) the
// elements of x (|x| when absolute) that fall in the range, binned as
// torch.histc bins them: pos = int64((v - lo) * float32(nbins) / (hi - lo)) in
// float32, pos nbins -> nbins-1; NaN and values outside [lo, hi] are
// skipped. It returns the index of the first NaN or ±Inf in x (-1 when
// none).
type HistogramKernel func(x []float32, lo, hi float32, absolute bool, counts []int64) int

var genericQuantize = QuantizeKernels{
	Run: quantRunGeneric, Row: quantRowGeneric, Pack4: pack4Generic, Signs: signsGeneric, AbsSum: absSumGeneric,
}

var genericDequantize = DequantizeKernels{
	RunI8: dequantRunI8Generic, RunU8: dequantRunU8Generic,
	RowI8: dequantRowI8Generic, RowU8: dequantRowU8Generic,
	Unpack4: unpack4Generic, UnpackBits: unpackBitsGeneric,
}

var genericMinMax = MinMaxKernels{Run: minMaxRunGeneric, Row: minMaxRowGeneric}

var genericHistogram = HistogramKernel(histogramGeneric)

// roundMagic is 1.5 * 2^23: for |t| <= 2^22, (t + roundMagic) - roundMagic
// in float32 is t rounded to an integer, ties to even (the sum lies in
// [2^23, 2^24), where the float32 spacing is 1).
const roundMagic = float32(12582912)

// quantCode is the generic quantization of one value with the range bounds
// lo = qmin-zp, hi = qmax-zp as floats: the product is clamped first (the
// bounds are integers, so clamping before rounding equals clamping after)
// and then rounded.
func quantCode(x, inv, lo, hi float32, zp, nan int32) int32 {
	t := float32(x * inv)
	if !(t >= lo) {
		if t != t {
			return nan
		}
		t = lo
	}
	if t > hi {
		t = hi
	}
	r := float32(float32(t+roundMagic) - roundMagic)
	return int32(r) + zp
}

func quantRunGeneric(x []float32, inv float32, zp int32, c Clamp, dst []byte) int {
	lo, hi := float32(c.QMin-zp), float32(c.QMax-zp)
	dst = dst[:len(x)]
	bad := -1
	for i, v := range x {
		if bad < 0 && !qtensor.Finite(v) {
			bad = i
		}
		dst[i] = byte(quantCode(v, inv, lo, hi, zp, c.NaN))
	}
	return bad
}

func quantRowGeneric(x []float32, inv []float32, zp []int32, c Clamp, dst []byte) int {
	inv, zp, dst = inv[:len(x)], zp[:len(x)], dst[:len(x)]
	bad := -1
	for i, v := range x {
		if bad < 0 && !qtensor.Finite(v) {
			bad = i
		}
		z := zp[i]
		dst[i] = byte(quantCode(v, inv[i], float32(c.QMin-z), float32(c.QMax-z), z, c.NaN))
	}
	return bad
}

func pack4Generic(codes []byte, dst []byte) {
	n := len(codes)
	dst = dst[:(n+1)/2]
	for i := 0; i+1 < n; i += 2 {
		dst[i/2] = codes[i]&15 | codes[i+1]<<4
	}
	if n%2 == 1 {
		dst[n/2] = codes[n-1] & 15
	}
}

func signsGeneric(x []float32, dst []byte) int {
	n := len(x)
	dst = dst[:(n+7)/8]
	bad := -1
	for j := range dst {
		var b byte
		for k := 0; k < 8 && 8*j+k < n; k++ {
			v := x[8*j+k]
			if v >= 0 {
				b |= 1 << k
			}
			if bad < 0 && !qtensor.Finite(v) {
				bad = 8*j + k
			}
		}
		dst[j] = b
	}
	return bad
}

func absSumGeneric(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += math.Abs(float64(v))
	}
	return s
}

func dequantRunI8Generic(q []byte, scale float32, zp int32, out []float32) {
	out = out[:len(q)]
	for i, c := range q {
		out[i] = float32(scale * float32(int32(int8(c))-zp))
	}
}

func dequantRunU8Generic(q []byte, scale float32, zp int32, out []float32) {
	out = out[:len(q)]
	for i, c := range q {
		out[i] = float32(scale * float32(int32(c)-zp))
	}
}

func dequantRowI8Generic(q []byte, scale []float32, zp []int32, out []float32) {
	scale, zp, out = scale[:len(q)], zp[:len(q)], out[:len(q)]
	for i, c := range q {
		out[i] = float32(scale[i] * float32(int32(int8(c))-zp[i]))
	}
}

func dequantRowU8Generic(q []byte, scale []float32, zp []int32, out []float32) {
	scale, zp, out = scale[:len(q)], zp[:len(q)], out[:len(q)]
	for i, c := range q {
		out[i] = float32(scale[i] * float32(int32(c)-zp[i]))
	}
}

func unpack4Generic(src []byte, signed bool, dst []byte) {
	for i := range dst {
		c := src[i/2] >> (4 * uint(i&1)) & 15
		if signed && c >= 8 {
			c |= 0xF0
		}
		dst[i] = c
	}
}

func unpackBitsGeneric(src []byte, dst []byte) {
	for i := range dst {
		if src[i/8]>>(uint(i)&7)&1 != 0 {
			dst[i] = 1
		} else {
			dst[i] = 0xFF
		}
	}
}

func minMaxRunGeneric(x []float32) (mn, mx float32, nan, inf int) {
	mn, mx = float32(math.Inf(1)), float32(math.Inf(-1))
	nan, inf = -1, -1
	for i, v := range x {
		if v != v {
			if nan < 0 {
				nan = i
			}
			continue
		}
		if inf < 0 && !qtensor.Finite(v) {
			inf = i
		}
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx, nan, inf
}

func minMaxRowGeneric(x, mn, mx []float32) int {
	mn, mx = mn[:len(x)], mx[:len(x)]
	bad := -1
	for i, v := range x {
		switch {
		case v != v:
			mn[i], mx[i] = v, v
			if bad < 0 {
				bad = i
			}
			continue
		case bad < 0 && !qtensor.Finite(v):
			bad = i
		}
		// A NaN already in mn/mx stays: the comparisons are false.
		if v < mn[i] {
			mn[i] = v
		}
		if v > mx[i] {
			mx[i] = v
		}
	}
	return bad
}

func histogramGeneric(x []float32, lo, hi float32, absolute bool, counts []int64) int {
	nb := len(counts)
	fnb := float32(nb)
	width := float32(hi - lo)
	bad := -1
	for i, v := range x {
		if absolute {
			v = float32(math.Abs(float64(v)))
		}
		if !(v >= lo && v <= hi) {
			// lo and hi are finite: every NaN and ±Inf lands here.
			if bad < 0 && !qtensor.Finite(v) {
				bad = i
			}
			continue
		}
		q := float32(float32(v-lo)*fnb) / width
		pos := int64(nb) - 1 // also for q = +Inf: (v-lo)*nb overflowed float32
		if q < float32(math.Inf(1)) {
			pos = min(int64(q), pos)
		}
		counts[pos]++
	}
	return bad
}
