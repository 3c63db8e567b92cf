package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
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

// bng_cuda_conv2d is bng_conv2d (act_bits 0 or 8) on one CUDA device: x, w
// (i2_s, its codes and scales device memory), bias (optional), out and
// work (uint8, at least bng_cuda_conv2d_workspace bytes) are CUDA operands
// of the same device, used on out's stream; the call returns once the work
// is enqueued (with check_finite, after reading x's first NaN/Inf back).
// With act_bits=8 the result has the bits of the CPU path's. p.algorithm is ignored (one
// GPU kernel per shape); info receives the kernel.
//
//export bng_cuda_conv2d
func bng_cuda_conv2d(x, w, bias, out, work *C.bng_tensor, p *C.bng_conv2d_params, info *C.bng_op_info,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := conv2dParams(p); err != nil {
			return err
		}
		if p.act_bits != 0 && p.act_bits != 8 {
			return errs.Value("on a CUDA device conv2d supports act_bits 0 (float32) and 8 (W1.58A8), got act_bits=%d", int32(p.act_bits))
		}
		if err := checkInfo(info); err != nil {
			return err
		}
		dev := tensorOpt{device: true}
		xt, err := decode(x, "x", dev)
		if err != nil {
			return err
		}
		wt, err := decode(w, "weight", dev)
		if err != nil {
			return err
		}
		bt, err := decode(bias, "bias", tensorOpt{device: true, optional: true})
		if err != nil {
			return err
		}
		ot, err := decode(out, "out", dev)
		if err != nil {
			return err
		}
		kt, err := decode(work, "work", dev)
		if err != nil {
			return err
		}
		ts := []*qtensor.Tensor{xt, wt, ot, kt}
		if bt != nil {
			ts = append(ts, bt)
		}
		for _, t := range ts {
			if t.Device.Kind != qtensor.CUDA || t.Device != xt.Device {
				return errs.Value("%s is on %s, x on %s: every operand must be on the same CUDA device", t.Name, t.Device, xt.Device)
			}
		}
		d, err := convDims(xt, wt, ot, p)
		if err != nil {
			return err
		}
		for _, t := range []*qtensor.Tensor{xt, ot} {
			if err := t.Want(qtensor.F32); err != nil {
				return err
			}
		}
		if err := wantI2S(wt); err != nil {
			return err
		}
		if wt.Axis != -1 {
			return errs.Value("weight: scales run along blocks of the flattened weight (axis -1), got axis %d", wt.Axis)
		}
		var biasAddr uint64
		if bt != nil {
			if err := bt.Want(qtensor.F32); err != nil {
				return err
			}
			if bt.Len() != d.O {
				return errs.Value("bias must have %d elements (O), got %d", d.O, bt.Len())
			}
			biasAddr = bt.Addr
		}
		if err := kt.Want(qtensor.U8); err != nil {
			return err
		}
		kernel, err := cuda.Conv2DDevice(xt.Device.ID, &d, cuda.ConvOperands{
			X: xt.Addr, W: wt.Addr, Scales: wt.ScalesAddr, Bias: biasAddr, Out: ot.Addr, Work: kt.Addr,
			WBytes: int64(wt.NBytes), NScales: int64(wt.NScales), BlockSize: int64(wt.BlockSize), WorkLen: int64(kt.NBytes),
		}, int(p.act_bits), p.check_finite != 0, ot.Stream)
		if err != nil {
			return err
		}
		writeInfo(info, int(conv2d.Im2col), kernel)
		return nil
	})
}

// bng_cuda_conv2d_workspace writes the bytes of device workspace
// bng_cuda_conv2d needs for x of shape (n, c, h, w): the int8 activations
// and a few bytes.
//
//export bng_cuda_conv2d_workspace
func bng_cuda_conv2d_workspace(n, c, h, w C.int64_t, out *C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := outPtr(out, "out"); err != nil {
			return err
		}
		for _, v := range []C.int64_t{n, c, h, w} {
			if v < 0 || v > conv2d.MaxDim {
				return errs.Value("x: shape (%d, %d, %d, %d) is out of range", n, c, h, w)
			}
		}
		d := conv2d.Dims{Shape: conv2d.Shape{N: int(n), C: int(c), H: int(h), W: int(w)}}
		var ok bool
		if d.XLen, ok = mulLimit(int64(n), int64(c), int64(h), int64(w)); !ok {
			return errs.Value("x: shape (%d, %d, %d, %d) has more than %d elements", n, c, h, w, int64(qtensor.MaxElements))
		}
		*out = C.int64_t(cuda.ConvWorkspaceSize(&d))
		return nil
	})
}

// mulLimit returns the product of non-negative v and whether it is at most
// qtensor.MaxElements.
func mulLimit(v ...int64) (int, bool) {
	p := int64(1)
	for _, x := range v {
		if x != 0 && p > int64(qtensor.MaxElements)/x {
			return 0, false
		}
		p *= x
	}
	return int(p), p <= int64(qtensor.MaxElements)
}
