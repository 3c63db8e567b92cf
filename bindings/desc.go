package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Decoding the bng_tensor descriptors of bng_abi.h into qtensor.Tensors:
// the only place that reads them, so every op gets operands checked the
// same way (version, rank, shape, device, buffer lengths).

// tensorOpt says what an op accepts for one operand.
type tensorOpt struct {
	optional bool // a NULL descriptor means "absent" (returns nil, nil)
	device   bool // a CUDA operand is accepted (the op routes it to cuda/)
}

// decoded is a tensor with room for a small shape: decode allocates one of
// these (one allocation per operand, not two).
type decoded struct {
	t    qtensor.Tensor
	dims [4]int
}

// decode reads the descriptor at p; name is the argument's name for errors.
func decode(p *C.bng_tensor, name string, o tensorOpt) (*qtensor.Tensor, error) {
	if p == nil {
		if o.optional {
			return nil, nil
		}
		return nil, errs.Value("%s is NULL", name)
	}
	if p.version != C.BNG_TENSOR_V1 {
		return nil, errs.Value("%s: bng_tensor version %d is not supported (this library reads version %d)",
			name, int32(p.version), C.BNG_TENSOR_V1)
	}
	if p.ndim < 0 || p.ndim > qtensor.MaxDims {
		return nil, errs.Value("%s: ndim must be between 0 and %d, got %d", name, qtensor.MaxDims, int32(p.ndim))
	}
	dims, err := viewField[int64](unsafe.Pointer(p.shape), C.int64_t(p.ndim), name, ".shape")
	if err != nil {
		return nil, err
	}
	d := &decoded{t: qtensor.Tensor{Name: name, DType: qtensor.DType(p.dtype), Axis: int(p.axis),
		BlockSize: int(p.block_size), Stream: uint64(p.stream)}}
	t := &d.t
	if len(dims) <= len(d.dims) {
		t.Shape = d.dims[:len(dims):len(dims)]
	} else {
		t.Shape = make([]int, len(dims))
	}
	for i, d := range dims {
		if d < 0 || d > qtensor.MaxElements {
			return nil, errs.Value("%s: dimension %d must be between 0 and %d, got %d", name, i, int64(qtensor.MaxElements), d)
		}
		t.Shape[i] = int(d)
	}
	if err := qtensor.CheckShape(name, t.Shape); err != nil {
		return nil, err
	}
	if p.strides != nil {
		st, err := viewField[int64](unsafe.Pointer(p.strides), C.int64_t(p.ndim), name, ".strides")
		if err != nil {
			return nil, err
		}
		t.Strides = make([]int, len(st))
		for i, s := range st {
			t.Strides[i] = int(s)
		}
	}
	if t.Axis < -1 || t.Axis >= max(len(t.Shape), 1) {
		return nil, errs.Value("%s: axis must be -1 or a dimension below %d, got %d", name, len(t.Shape), t.Axis)
	}
	if t.BlockSize < 0 {
		return nil, errs.Value("block_size must be positive (or 0 for one scale per tensor), got %d", t.BlockSize)
	}
	if p.nbytes < 0 || p.n_scales < 0 || p.n_zero_points < 0 {
		return nil, errs.Value("%s: nbytes, n_scales and n_zero_points must be non-negative, got %d, %d, %d",
			name, int64(p.nbytes), int64(p.n_scales), int64(p.n_zero_points))
	}
	t.NBytes, t.NScales = int(p.nbytes), int(p.n_scales)
	switch p.device_type {
	case C.BNG_CPU:
		if p.device_id != 0 {
			return nil, errs.Value("%s: the CPU's device_id must be 0, got %d", name, int32(p.device_id))
		}
		t.Device = qtensor.Device{Kind: qtensor.CPU}
		if t.Data, err = view[byte](p.data, p.nbytes, name); err != nil {
			return nil, err
		}
		if t.Scales, err = viewField[float32](p.scales, p.n_scales, name, ".scales"); err != nil {
			return nil, err
		}
		if t.ZeroPoints, err = viewField[int32](p.zero_points, p.n_zero_points, name, ".zero_points"); err != nil {
			return nil, err
		}
	case C.BNG_CUDA:
		if !o.device {
			return nil, errs.Value("%s: this op runs on host (CPU) tensors only, got a CUDA tensor", name)
		}
		if p.device_id < 0 {
			return nil, errs.Value("%s: device_id must be non-negative, got %d", name, int32(p.device_id))
		}
		t.Device = qtensor.Device{Kind: qtensor.CUDA, ID: int(p.device_id)}
		t.Addr, t.ScalesAddr = uint64(uintptr(p.data)), uint64(uintptr(p.scales))
	default:
		return nil, errs.Value("%s: device_type must be %d (cpu) or %d (cuda), got %d", name, C.BNG_CPU, C.BNG_CUDA, int32(p.device_type))
	}
	return t, nil
}

// sameShape checks that b has a's shape (b's elements correspond to a's).
func sameShape(a, b *qtensor.Tensor) error {
	if len(a.Shape) != len(b.Shape) {
		return errs.Value("%s: shape %v does not match %s's shape %v", b.Name, b.Shape, a.Name, a.Shape)
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return errs.Value("%s: shape %v does not match %s's shape %v", b.Name, b.Shape, a.Name, a.Shape)
		}
	}
	return nil
}

// sameDevice checks that every operand is on a's device.
func sameDevice(a *qtensor.Tensor, ts ...*qtensor.Tensor) error {
	for _, t := range ts {
		if t != nil && t.Device != a.Device {
			return errs.Value("%s is on %s but %s is on %s: operands must be on one device", t.Name, t.Device, a.Name, a.Device)
		}
	}
	return nil
}

// checkInfo checks the caller's bng_op_info (NULL: none wanted) before an
// op runs.
func checkInfo(info *C.bng_op_info) error {
	if info != nil && info.version != C.BNG_OP_INFO_V1 {
		return errs.Value("info: bng_op_info version %d is not supported (this library writes version %d)", int32(info.version), C.BNG_OP_INFO_V1)
	}
	return nil
}

// writeInfo fills the caller's bng_op_info (checked by checkInfo), if any.
func writeInfo(info *C.bng_op_info, algorithm int, kernel string) {
	if info == nil {
		return
	}
	info.algorithm = C.int32_t(algorithm)
	dst := unsafe.Slice((*byte)(unsafe.Pointer(&info.kernel[0])), len(info.kernel))
	dst[copy(dst[:len(dst)-1], kernel)] = 0
}
