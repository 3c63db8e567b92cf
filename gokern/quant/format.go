package quant

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// format is one of the package's formats in qtensor's registry, so that
// bng_layout, bng_pack and bng_unpack know them. Its Dequantize is the
// per-tensor / per-block case without zero points; bng_dequantize calls
// Dequantize (with zero points and channel axes) for these formats.
type format struct{ d qtensor.DType }

func init() {
	for _, d := range []qtensor.DType{qtensor.I8, qtensor.U8, qtensor.I4, qtensor.U4, qtensor.Binary} {
		qtensor.Register(d, format{d})
	}
}

func (f format) Name() string { return f.d.String() }

// PackedLen is the bytes of n values (rows does not matter).
func (f format) PackedLen(n, rows int) (int, error) {
	if n < 0 || n > qtensor.MaxElements {
		return 0, errs.Value("the number of values must be between 0 and %d, got %d", int64(qtensor.MaxElements), n)
	}
	return PackedLen(f.d, n), nil
}

// NumScales is the number of scales (and zero points) of a tensor of
// shape shape with the given axis and block size (bng_layout).
func (f format) NumScales(shape []int, axis, blockSize int) (int, error) {
	g, err := NewGroups(shape, axis, blockSize)
	return g.Count, err
}

// Pack writes the int8 values (the codes, each inside the dtype's range;
// binary: -1 or +1) in f's layout.
func (f format) Pack(values []int8, rows int, dst []byte) error {
	n := len(values)
	if err := qtensor.CheckLen(f, n, rows, len(dst)); err != nil {
		return err
	}
	lo, hi := int8(-1), int8(1)
	if qmin, qmax, ok := Range(f.d); ok {
		lo, hi = int8(max(qmin, -128)), int8(min(qmax, 127))
	}
	for i, v := range values {
		if v < lo || v > hi || (f.d == qtensor.Binary && v == 0) {
			if f.d == qtensor.Binary {
				return errs.Value("values[%d] must be -1 or +1 for binary, got %d", i, v)
			}
			return errs.Value("values[%d] must be in [%d, %d] for %s, got %d", i, lo, hi, f.d, v)
		}
	}
	switch f.d {
	case qtensor.I8, qtensor.U8:
		for i, v := range values {
			dst[i] = byte(v)
		}
	case qtensor.I4, qtensor.U4:
		pack4Generic(asBytes(values), dst)
	case qtensor.Binary:
		clear(dst)
		for i, v := range values {
			if v > 0 {
				dst[i/8] |= 1 << (i % 8)
			}
		}
	}
	return nil
}

// Unpack writes the codes held in src as int8 values (uint8 codes above
// 127 do not fit: a ValueError; read uint8 bytes directly).
func (f format) Unpack(src []byte, rows int, values []int8) error {
	n := len(values)
	if err := qtensor.CheckLen(f, n, rows, len(src)); err != nil {
		return err
	}
	switch f.d {
	case qtensor.I8:
		for i := range values {
			values[i] = int8(src[i])
		}
	case qtensor.U8:
		for i := range values {
			if src[i] > 127 {
				return errs.Value("packed[%d] = %d does not fit int8: read uint8 tensors' bytes directly", i, src[i])
			}
			values[i] = int8(src[i])
		}
	default:
		if f.d == qtensor.Binary {
			unpackBitsGeneric(src, asBytes(values))
		} else {
			unpack4Generic(src, f.d == qtensor.I4, asBytes(values))
		}
	}
	return nil
}

// asBytes views int8 values as the bytes of their two's complement codes
// (the same memory: the pack and unpack kernels work on bytes).
func asBytes(v []int8) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
}

// Dequantize is Dequantize with one scale per blockSize values of the
// flattened tensor (0: one scale) and no zero points.
func (f format) Dequantize(src []byte, rows, blockSize int, scales []float32, out []float32) error {
	g, err := NewGroups([]int{len(out)}, -1, blockSize)
	if err != nil {
		return err
	}
	return Dequantize(src, &Spec{DType: f.d, Groups: g, Scales: scales}, out)
}
