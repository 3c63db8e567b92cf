// Package qtensor is the one description of a tensor that every layer
// passes: where its bytes are (host memory or a device address), its
// element type, its shape and strides, and the quantization parameters that
// turn its stored values back into real numbers (scales, zero points, the
// axis or block size they apply along). It also holds the registry of
// packed formats (format.go): how many bytes a tensor of a format takes,
// and how its values are packed, unpacked and dequantized.
//
// The C ABI (bindings/desc.go) decodes one bng_tensor struct per operand
// into a Tensor; ops (quantize, dequantize, conv2d, ...) take Tensors. The
// package knows nothing of C, Python or devices beyond their numbers.
package qtensor

import (
	"strconv"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// DType is a tensor's element type. The numbers are those of the C ABI:
// packed ternary formats below 16, plain element types from 16 on. New
// types are additions; a number is never reused.
type DType int32

// The element types. I2S, TL1, TL2, TQ2 (llama.cpp's TQ2_0) and TQ1
// (TQ1_0) are ternary formats (registered by gokern/ternary); F32, I8, U8, I32, I64, BF16 (bfloat16)
// and F16 (float16; both read as their uint16 bits) are plain arrays; I8, U8, I4,
// U4 and Binary are also the quantized formats of gokern/quant.
const (
	I2S    DType = 0
	TL1    DType = 1
	TL2    DType = 2
	TQ2    DType = 3
	TQ1    DType = 4
	F32    DType = 16
	I8     DType = 17
	U8     DType = 18
	I4     DType = 19
	U4     DType = 20
	Binary DType = 21
	I32    DType = 22
	I64    DType = 23
	BF16   DType = 24
	F16    DType = 25
)

var plainNames = map[DType]string{F32: "float32", I8: "int8", U8: "uint8", I4: "int4", U4: "uint4", Binary: "binary", I32: "int32", I64: "int64", BF16: "bfloat16", F16: "float16"}

// plainSize is the byte size of one element of the plain types that ops
// read as arrays.
var plainSize = map[DType]int{F32: 4, I8: 1, U8: 1, I32: 4, I64: 8, BF16: 2, F16: 2}

// String returns the type's Python name ("float32", "i2_s", ...).
func (d DType) String() string {
	if n, ok := plainNames[d]; ok {
		return n
	}
	if f, err := Lookup(d); err == nil {
		return f.Name()
	}
	return "unknown"
}

// DeviceKind is where a tensor's bytes live; the numbers are DLPack's.
type DeviceKind int32

// The device kinds.
const (
	CPU  DeviceKind = 1
	CUDA DeviceKind = 2
)

// Device is a device kind and its ordinal (0 for the CPU).
type Device struct {
	Kind DeviceKind
	ID   int
}

// String returns "cpu" or "cuda:N".
func (d Device) String() string {
	switch d.Kind {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda:" + strconv.Itoa(d.ID)
	}
	return "device(" + strconv.Itoa(int(d.Kind)) + ")"
}

// MaxElements bounds tensor sizes so that every byte count fits in an int on
// any platform we build for.
const MaxElements = 1 << 60

// MaxDims bounds a tensor's rank.
const MaxDims = 16

// Tensor describes one operand. For a host tensor Data holds its bytes
// (len(Data) is the byte count the caller passed) and Scales its scales;
// for a device tensor Addr and ScalesAddr are device addresses and Data and
// Scales are nil. Ops read Scales, ZeroPoints, Axis and BlockSize only for
// the types that have them.
type Tensor struct {
	Name   string // the argument's name, for error messages
	DType  DType
	Device Device
	Data   []byte
	Addr   uint64
	NBytes int
	Shape  []int
	// Strides are in elements; nil means C-contiguous.
	Strides []int

	Scales     []float32
	ScalesAddr uint64
	NScales    int
	ZeroPoints []int32
	// Axis is the dimension that scales and zero points run along, or -1:
	// one scale per BlockSize consecutive elements of the flattened tensor
	// (BlockSize 0: one scale for the whole tensor).
	Axis      int
	BlockSize int
	// Stream is the CUDA stream a device operand is used on (0: the legacy
	// default stream).
	Stream uint64
}

// Len returns the number of elements (1 for rank 0).
func (t *Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows returns the first dimension (1 for rank 0 and 1): the rows of the
// rows x K view that row-wise formats (TL1, TL2) use.
func (t *Tensor) Rows() int {
	if len(t.Shape) < 2 {
		return 1
	}
	return t.Shape[0]
}

// OnHost reports whether the tensor's bytes are in host memory.
func (t *Tensor) OnHost() bool { return t.Device.Kind == CPU }

// CheckShape validates a shape: rank at most MaxDims, every dimension
// non-negative and the product at most MaxElements.
func CheckShape(name string, shape []int) error {
	if len(shape) > MaxDims {
		return errs.Value("%s: rank must be at most %d, got %d", name, MaxDims, len(shape))
	}
	n := 1
	for i, d := range shape {
		if d < 0 {
			return errs.Value("%s: dimension %d must be non-negative, got %d", name, i, d)
		}
		if d != 0 && n > MaxElements/d {
			return errs.Value("%s: shape %v has more than %d elements", name, shape, MaxElements)
		}
		n *= d
	}
	return nil
}

// Contiguous reports whether the strides describe a C-contiguous layout
// (nil strides do).
func (t *Tensor) Contiguous() bool {
	if t.Strides == nil {
		return true
	}
	want := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		if t.Shape[i] != 1 && t.Strides[i] != want {
			return false
		}
		want *= t.Shape[i]
	}
	return true
}

// Want checks that t is a C-contiguous tensor of the plain type d (float32,
// int8, uint8, int32 or int64) whose byte count holds its shape, on any device: ops
// call it on the plain operands they read as arrays (View adds the host
// check).
func (t *Tensor) Want(d DType) error {
	if t.DType != d {
		return errs.Type("%s: dtype must be %s, got %s", t.Name, d, t.DType)
	}
	if err := t.WantContiguous(); err != nil {
		return err
	}
	if n := t.Len(); t.NBytes != n*plainSize[d] {
		return errs.Value("%s: %d bytes do not hold %d %s values (%d bytes)", t.Name, t.NBytes, n, d, n*plainSize[d])
	}
	return nil
}

// WantContiguous checks that t's strides are C-contiguous (ops do not read
// strided tensors yet).
func (t *Tensor) WantContiguous() error {
	if !t.Contiguous() {
		return errs.Value("%s: strides %v are not C-contiguous for shape %v; pass a contiguous array", t.Name, t.Strides, t.Shape)
	}
	return nil
}

// View returns the host elements of a plain tensor of type T (float32, int8,
// uint8, uint16 for the bits of bfloat16 and float16, int32 or int64), checking the dtype, layout and byte count (Want).
func View[T float32 | int8 | uint8 | uint16 | int32 | int64](t *Tensor, d DType) ([]T, error) {
	if err := t.Want(d); err != nil {
		return nil, err
	}
	if !t.OnHost() {
		return nil, errs.Value("%s: must be a host (CPU) tensor here, got %s", t.Name, t.Device)
	}
	n := t.Len()
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), n), nil
}
