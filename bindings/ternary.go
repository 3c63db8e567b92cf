package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The format ops: quantize, dequantize, pack, unpack and the layout query,
// each over bng_tensor descriptors (bng_abi.h). A packed operand's dtype
// names its format (qtensor's registry); TL1/TL2 rows are its first
// dimension.

// bng_layout writes the bytes and the number of scales that tensor t
// (dtype, shape, block_size; data may be NULL) takes: a packed format's
// bytes (the registry's PackedLen) and ceil(n/block_size) scales, or
// n*element size and 0 scales for a plain type. Every op checks its
// buffers against these same numbers.
//
//export bng_layout
func bng_layout(t *C.bng_tensor, nbytes, nScales *C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		d, err := decode(t, "t", tensorOpt{device: true})
		if err != nil {
			return err
		}
		if nbytes == nil || nScales == nil {
			return errs.Value("nbytes and n_scales must not be NULL")
		}
		f, err := qtensor.Lookup(d.DType)
		if err != nil {
			return err
		}
		n := d.Len()
		b, err := f.PackedLen(n, d.Rows())
		if err != nil {
			return err
		}
		ns := ternary.NumBlocks(n, d.BlockSize)
		if g, ok := f.(interface {
			NumScales(shape []int, axis, blockSize int) (int, error)
		}); ok {
			// gokern/quant's formats: per channel (axis >= 0) or per block.
			if ns, err = g.NumScales(d.Shape, d.Axis, d.BlockSize); err != nil {
				return errs.Value("t: %v", err)
			}
		}
		*nbytes, *nScales = C.int64_t(b), C.int64_t(ns)
		return nil
	})
}

// bng_quantize quantizes float32 x into out (dtype i2_s, x's shape, one
// scale per out.block_size values; 0: one scale), writing out's data and
// scales. Host operands run on the CPU unless p.run_on is BNG_CUDA (then on
// that GPU, through pooled device buffers); CUDA operands run on their
// device and out's stream with p.work as workspace, returning once enqueued
// (with check_finite it waits, to read the first NaN/Inf index).
//
//export bng_quantize
func bng_quantize(x, out *C.bng_tensor, p *C.bng_quantize_params, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if p == nil || (p.version != C.BNG_QUANTIZE_V1 && p.version != C.BNG_QUANTIZE_V2) {
			return errs.Value("params: bng_quantize_params is NULL or of a version other than %d or %d", C.BNG_QUANTIZE_V1, C.BNG_QUANTIZE_V2)
		}
		xt, err := decode(x, "x", tensorOpt{device: true})
		if err != nil {
			return err
		}
		ot, err := decode(out, "out", tensorOpt{device: true})
		if err != nil {
			return err
		}
		if quant.Handles(ot.DType) {
			var qmin, qmax int32
			if p.version >= C.BNG_QUANTIZE_V2 {
				qmin, qmax = int32(p.quant_min), int32(p.quant_max)
			}
			return quantizeGeneral(xt, ot, int32(p.method), p.check_finite != 0, qmin, qmax, int32(p.run_on))
		}
		if ternary.IsTQ(ot.DType) {
			return quantizeTQ(xt, ot, ternary.Method(p.method), p.check_finite != 0, int32(p.run_on))
		}
		if ot.DType != qtensor.I2S {
			return errs.Value("out: quantize writes i2_s, tq2_0, tq1_0, int8, uint8, int4, uint4 or binary (convert to tl1/tl2 with bng_unpack and bng_pack), got dtype %d", int32(ot.DType))
		}
		if err := sameShape(xt, ot); err != nil {
			return err
		}
		if err := sameDevice(xt, ot); err != nil {
			return err
		}
		if ot.Axis != -1 {
			return errs.Value("out: quantize scales blocks of the flattened tensor (axis -1), got axis %d", ot.Axis)
		}
		m, check := ternary.Method(p.method), p.check_finite != 0
		if xt.DType == qtensor.BF16 {
			return quantizeBF16(xt, ot, m, check, int32(p.run_on))
		}
		if !xt.OnHost() {
			return quantizeDevice(xt, ot, m, check, p)
		}
		if p.run_on == C.BNG_CUDA {
			return quantizeHostOnDevice(int(p.run_on_id), xt, ot, m, check)
		}
		if p.run_on != 0 {
			return errs.Value("params: run_on must be 0 or %d (cuda), got %d", C.BNG_CUDA, int32(p.run_on))
		}
		xs, err := qtensor.View[float32](xt, qtensor.F32)
		if err != nil {
			return err
		}
		if err := ternary.CheckSizes(len(xs), ot.BlockSize); err != nil {
			return err
		}
		return ternary.Quantize(xs, ot.BlockSize, m, check, ot.Data, ot.Scales)
	})
}

// quantizeBF16 quantizes host bfloat16 x (uint16 bits) into i2_s out as
// its float32 values quantize, on the CPU.
func quantizeBF16(xt, ot *qtensor.Tensor, m ternary.Method, check bool, runOn int32) error {
	if !xt.OnHost() || !ot.OnHost() || runOn != 0 {
		return errs.Value("x: bfloat16 x quantizes on the host only (float32 on the GPU)")
	}
	xs, err := qtensor.View[uint16](xt, qtensor.BF16)
	if err != nil {
		return err
	}
	if err := ternary.CheckSizes(len(xs), ot.BlockSize); err != nil {
		return err
	}
	return ternary.QuantizeBF16(xs, ot.BlockSize, m, check, ot.Data, ot.Scales)
}

// quantizeTQ quantizes host float32 x into a tq2_0 or tq1_0 out of x's
// shape: absmax scales, one per 256 values (out.block_size 256), rows of
// out.shape[0].
func quantizeTQ(xt, ot *qtensor.Tensor, m ternary.Method, check bool, runOn int32) error {
	if err := sameShape(xt, ot); err != nil {
		return err
	}
	if !xt.OnHost() || !ot.OnHost() || runOn != 0 {
		return errs.Value("out: %s quantization runs on host (CPU) tensors only", ot.DType)
	}
	if m != ternary.AbsMax {
		return errs.Value("params: %s quantizes with method absmax (%d) only, got %d", ot.DType, int32(ternary.AbsMax), int32(m))
	}
	if ot.Axis != -1 || ot.BlockSize != ternary.TQBlock {
		return errs.Value("out: %s has one scale per block of %d values (axis -1, block_size %d), got axis %d, block_size %d",
			ot.DType, ternary.TQBlock, ternary.TQBlock, ot.Axis, ot.BlockSize)
	}
	xs, err := qtensor.View[float32](xt, qtensor.F32)
	if err != nil {
		return err
	}
	return ternary.QuantizeTQ(ot.DType, xs, ot.Rows(), check, ot.Data, ot.Scales)
}

// bng_dequantize writes value*scale (float32, out) for the values of packed
// (any registered format; its scales and block_size). A CUDA i2_s operand
// runs on its device and out's stream (no wait).
//
//export bng_dequantize
func bng_dequantize(packed, out *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		return formatOp(packed, out, "packed", "out", qtensor.F32,
			func(pt, ot *qtensor.Tensor) error {
				if quant.Handles(pt.DType) {
					return errs.Type("packed: %s dequantization runs on the CPU only (CUDA operands are not implemented for it)", pt.DType)
				}
				return dequantizeDevice(pt, ot)
			},
			func(f qtensor.Format, pt *qtensor.Tensor, os []float32) error {
				if quant.Handles(pt.DType) {
					return dequantizeGeneral(pt, os)
				}
				return f.Dequantize(pt.Data, pt.Rows(), pt.BlockSize, pt.Scales, os)
			})
	})
}

// bng_unpack writes the ternary values (int8, out) held in packed. A CUDA
// i2_s operand runs on its device and out's stream (no wait; codes are not
// validated there: a code 3 unpacks as 2).
//
//export bng_unpack
func bng_unpack(packed, out *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		return formatOp(packed, out, "packed", "out", qtensor.I8, unpackDevice,
			func(f qtensor.Format, pt *qtensor.Tensor, os []int8) error { return f.Unpack(pt.Data, pt.Rows(), os) })
	})
}

// bng_pack packs ternary values (int8, each -1, 0 or +1) into out's format.
//
//export bng_pack
func bng_pack(values, out *C.bng_tensor, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		hostOnly := func(ot, _ *qtensor.Tensor) error {
			return errs.Value("out: bng_pack runs on host tensors only, got %s", ot.Device)
		}
		return formatOp(out, values, "out", "values", qtensor.I8, hostOnly,
			func(f qtensor.Format, ot *qtensor.Tensor, vs []int8) error { return f.Pack(vs, ot.Rows(), ot.Data) })
	})
}

// formatOp runs a format op between a packed operand and its plain
// counterpart of element type E (dtype dt; formatPair checks them): on the
// device through device where the operands are not on the host, else
// host(the format, the packed operand, the plain one's elements).
func formatOp[E float32 | int8](packed, plain *C.bng_tensor, pname, name string, dt qtensor.DType,
	device func(pt, t *qtensor.Tensor) error, host func(qtensor.Format, *qtensor.Tensor, []E) error) error {
	pt, t, f, err := formatPair(packed, plain, pname, name)
	if err != nil {
		return err
	}
	if !pt.OnHost() {
		return device(pt, t)
	}
	es, err := qtensor.View[E](t, dt)
	if err != nil {
		return err
	}
	return host(f, pt, es)
}

// formatPair decodes a packed operand and its plain counterpart (same
// shape, same device) and looks up the packed one's format.
func formatPair(packed, plain *C.bng_tensor, pname, name string) (*qtensor.Tensor, *qtensor.Tensor, qtensor.Format, error) {
	pt, err := decode(packed, pname, tensorOpt{device: true})
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := decode(plain, name, tensorOpt{device: true})
	if err != nil {
		return nil, nil, nil, err
	}
	f, err := qtensor.Lookup(pt.DType)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := sameShape(pt, t); err != nil {
		return nil, nil, nil, err
	}
	if err := sameDevice(pt, t); err != nil {
		return nil, nil, nil, err
	}
	return pt, t, f, nil
}
