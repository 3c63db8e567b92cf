package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The device halves of the format ops (bindings/ternary.go): operands
// already decoded, on one CUDA device; these route them to package cuda.
// I2_S is the only format the GPU kernels implement.

// wantI2S checks a CUDA packed operand: i2_s, exactly the registry's bytes.
func wantI2S(t *qtensor.Tensor) error {
	if t.DType != qtensor.I2S {
		return errs.Value("%s: on a CUDA device only i2_s is supported, got dtype %d", t.Name, int32(t.DType))
	}
	f, err := qtensor.Lookup(qtensor.I2S)
	if err != nil {
		return err
	}
	return qtensor.CheckLen(f, t.Len(), t.Rows(), t.NBytes)
}

func quantizeDevice(x, out *qtensor.Tensor, m ternary.Method, check bool, p *C.bng_quantize_params) error {
	if err := ternary.CheckSizes(x.Len(), out.BlockSize); err != nil {
		return err
	}
	if err := x.Want(qtensor.F32); err != nil {
		return err
	}
	if err := wantI2S(out); err != nil {
		return err
	}
	return cuda.QuantizeDevice(x.Device.ID, x.Addr, out.Addr, out.ScalesAddr, uint64(uintptr(p.work)),
		int64(x.Len()), int64(out.BlockSize), m, check, int64(out.NBytes), int64(out.NScales), int64(p.work_len), out.Stream)
}

func quantizeHostOnDevice(dev int, x, out *qtensor.Tensor, m ternary.Method, check bool) error {
	xs, err := qtensor.View[float32](x, qtensor.F32)
	if err != nil {
		return err
	}
	if len(xs) == 0 || len(out.Data) == 0 || len(out.Scales) == 0 {
		return errs.Value("x, packed and scales must not be empty (n=%d, packed_len=%d, n_scales=%d)",
			len(xs), len(out.Data), len(out.Scales))
	}
	return cuda.QuantizeHost(dev, unsafe.Pointer(&xs[0]), int64(len(xs)), int64(out.BlockSize), m, check,
		unsafe.Pointer(&out.Data[0]), int64(len(out.Data)), unsafe.Pointer(&out.Scales[0]), int64(len(out.Scales)))
}

func unpackDevice(packed, out *qtensor.Tensor) error {
	if err := wantI2S(packed); err != nil {
		return err
	}
	if err := out.Want(qtensor.I8); err != nil {
		return err
	}
	return cuda.UnpackDevice(packed.Device.ID, packed.Addr, int64(packed.NBytes), out.Addr, int64(out.Len()), out.Stream)
}

func dequantizeDevice(packed, out *qtensor.Tensor) error {
	if err := wantI2S(packed); err != nil {
		return err
	}
	if err := out.Want(qtensor.F32); err != nil {
		return err
	}
	return cuda.DequantizeDevice(packed.Device.ID, packed.Addr, int64(packed.NBytes), int64(packed.BlockSize),
		packed.ScalesAddr, int64(packed.NScales), out.Addr, int64(out.Len()), out.Stream)
}
