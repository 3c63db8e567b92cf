package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/qelem"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// The element-wise quantized ops (gokern/ops/qelem): bng_qadd, bng_qrelu,
// bng_requantize. Each decodes its host operands into qelem.Operands (one
// scale and zero point per tensor) and calls the op with the process's
// kernels.

// qelemParams checks the caller's bng_qelem_params; relu may be set only
// where the op has a fused ReLU.
func qelemParams(p *C.bng_qelem_params, reluOK bool) (bool, error) {
	if p == nil || p.version != C.BNG_QELEM_V1 {
		return false, errs.Value("params: bng_qelem_params is NULL or of a version other than %d", C.BNG_QELEM_V1)
	}
	if p.reserved[0] != 0 || p.reserved[1] != 0 {
		return false, errs.Value("params: reserved must be 0, got %d and %d", int32(p.reserved[0]), int32(p.reserved[1]))
	}
	if p.relu != 0 && !reluOK {
		return false, errs.Value("params: relu must be 0 for this op, got %d", int32(p.relu))
	}
	return p.relu != 0, nil
}

// qelemOperands decodes host per-tensor int8/uint8 operands.
func qelemOperands(ts []*C.bng_tensor, names ...string) ([]qelem.Operand, error) {
	decoded, err := decodeHost(ts, names...)
	if err != nil {
		return nil, err
	}
	out := make([]qelem.Operand, len(decoded))
	for i, t := range decoded {
		if t.DType != qtensor.I8 && t.DType != qtensor.U8 {
			return nil, errs.Type("%s: dtype must be int8 or uint8, got %s", t.Name, t.DType)
		}
		if err := t.WantContiguous(); err != nil {
			return nil, err
		}
		if t.Axis != -1 || t.BlockSize != 0 || len(t.Scales) != 1 || len(t.ZeroPoints) > 1 {
			return nil, errs.Value("%s: must be quantized per tensor (axis -1, block_size 0, one scale, at most one zero point), "+
				"got axis %d, block_size %d, %d scales, %d zero points", t.Name, t.Axis, t.BlockSize, len(t.Scales), len(t.ZeroPoints))
		}
		out[i] = qelem.Operand{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: t.Data, Scale: t.Scales[0]}
		if len(t.ZeroPoints) == 1 {
			out[i].ZeroPoint = t.ZeroPoints[0]
		}
	}
	return out, nil
}

// bng_qadd writes the quantized sum of a and b (broadcast to out's shape)
// into out with out's scale and zero point, ReLU fused with p.relu.
//
//export bng_qadd
func bng_qadd(a, b, out *C.bng_tensor, p *C.bng_qelem_params, info *C.bng_op_info, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		relu, err := qelemParams(p, true)
		if err != nil {
			return err
		}
		if err := checkInfo(info); err != nil {
			return err
		}
		ops, err := qelemOperands([]*C.bng_tensor{a, b, out}, "a", "b", "out")
		if err != nil {
			return err
		}
		ks := qelem.KernelOp.Get()
		if err := qelem.Add(ks, &ops[0], &ops[1], &ops[2], relu); err != nil {
			return err
		}
		if info != nil { // the name costs more than a small add
			writeInfo(info, 0, "add/"+qelem.Kernel(ks))
		}
		return nil
	})
}

// bng_qrelu writes max(x, zero point) into out (x's dtype, shape, scale and
// zero point).
//
//export bng_qrelu
func bng_qrelu(x, out *C.bng_tensor, p *C.bng_qelem_params, info *C.bng_op_info, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if _, err := qelemParams(p, false); err != nil {
			return err
		}
		if err := checkInfo(info); err != nil {
			return err
		}
		ops, err := qelemOperands([]*C.bng_tensor{x, out}, "x", "out")
		if err != nil {
			return err
		}
		ks := qelem.KernelOp.Get()
		if err := qelem.Relu(ks, &ops[0], &ops[1]); err != nil {
			return err
		}
		if info != nil {
			writeInfo(info, 0, "relu/"+qelem.Kernel(ks))
		}
		return nil
	})
}

// bng_requantize writes x requantized to out's dtype, scale and zero point.
//
//export bng_requantize
func bng_requantize(x, out *C.bng_tensor, p *C.bng_qelem_params, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if _, err := qelemParams(p, false); err != nil {
			return err
		}
		ops, err := qelemOperands([]*C.bng_tensor{x, out}, "x", "out")
		if err != nil {
			return err
		}
		return qelem.Requantize(qelem.KernelOp.Get(), quant.DequantizeOp.Get(), quant.QuantizeOp.Get(), &ops[0], &ops[1])
	})
}
