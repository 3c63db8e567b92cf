package main

/*
#include "bng_abi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/qlinear"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// The quantized linear, matmul and conv2d exports (bitnet_go.functional):
// operands decoded and checked here, the arithmetic in gokern/ops/qlinear.

// qopsParams checks the caller's bng_qops_params.
func qopsParams(p *C.bng_qops_params) error {
	if p == nil || (p.version != C.BNG_QOPS_V1 && p.version != C.BNG_QOPS_V2) {
		return errs.Value("params: bng_qops_params is NULL or of a version other than %d or %d", C.BNG_QOPS_V1, C.BNG_QOPS_V2)
	}
	return nil
}

// weightID returns the params' weight_id (V2; 0 for V1, which has none).
func weightID(p *C.bng_qops_params) uint64 {
	if p.version < C.BNG_QOPS_V2 {
		return 0
	}
	return uint64(p.weight_id)
}

// qact reads a uint8/int8 tensor with one scale and zero point.
func qact(t *qtensor.Tensor) (qlinear.Act, error) {
	if t.DType != qtensor.U8 && t.DType != qtensor.I8 {
		return qlinear.Act{}, errs.Type("%s: must be uint8 or int8, got %s", t.Name, t.DType)
	}
	if err := t.WantContiguous(); err != nil {
		return qlinear.Act{}, err
	}
	if len(t.Scales) != 1 || len(t.ZeroPoints) != 1 || t.BlockSize != 0 || t.Axis != -1 {
		return qlinear.Act{}, errs.Value("%s: must have one scale and one zero point (per tensor), got %d and %d",
			t.Name, len(t.Scales), len(t.ZeroPoints))
	}
	if err := checkZero(t, t.ZeroPoints[0]); err != nil {
		return qlinear.Act{}, err
	}
	data, err := codes(t)
	if err != nil {
		return qlinear.Act{}, err
	}
	return qlinear.Act{Data: data, Signed: t.DType == qtensor.I8, Scale: t.Scales[0], Zero: t.ZeroPoints[0]}, nil
}

// codes returns the bytes of a uint8 or int8 tensor, checked against its shape.
func codes(t *qtensor.Tensor) ([]byte, error) {
	if t.DType == qtensor.I8 {
		v, err := qtensor.View[int8](t, qtensor.I8)
		if err != nil || len(v) == 0 {
			return nil, err
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)), nil
	}
	return qtensor.View[uint8](t, qtensor.U8)
}

// checkZero checks that a zero point is a code of t's dtype.
func checkZero(t *qtensor.Tensor, z int32) error {
	return quant.CheckZeroPoint(t.Name, "'s zero point", z, t.DType)
}

// checkZeros is checkZero for every zero point of zs (one pass for the
// range, the message for the first outside it; 4096 per-channel zero
// points one call each took 1.3% of a 4096 x 4096 batch-1 linear).
func checkZeros(t *qtensor.Tensor, zs []int32) error {
	if len(zs) == 0 {
		return nil
	}
	lo, hi := zs[0], zs[0]
	for _, z := range zs {
		lo, hi = min(lo, z), max(hi, z)
	}
	if checkZero(t, lo) == nil && checkZero(t, hi) == nil {
		return nil
	}
	for _, z := range zs {
		if err := checkZero(t, z); err != nil {
			return err
		}
	}
	return nil
}

// qout reads the output tensor's quantization.
func qout(t *qtensor.Tensor, relu bool) (qlinear.Output, error) {
	a, err := qact(t)
	if err != nil {
		return qlinear.Output{}, err
	}
	return qlinear.Output{Scale: a.Scale, Zero: a.Zero, Signed: a.Signed, Relu: relu}, nil
}

// qweight reads an int8 (N, ...) weight with scales per tensor or along
// axis 0. colsums (nil: none) are its row sums; id is its Weight.ID.
func qweight(t, ct *qtensor.Tensor, n int, id uint64) (qlinear.Weight, error) {
	if t.DType != qtensor.I8 {
		return qlinear.Weight{}, errs.Type("weight: must be int8, got %s", t.DType)
	}
	if err := t.WantContiguous(); err != nil {
		return qlinear.Weight{}, err
	}
	want := 1
	if t.Axis == 0 {
		want = n
	} else if t.Axis != -1 || t.BlockSize != 0 {
		return qlinear.Weight{}, errs.Value("weight: scales must be per tensor or per output channel (axis 0), got axis %d, block_size %d", t.Axis, t.BlockSize)
	}
	if len(t.Scales) != want || len(t.ZeroPoints) != want {
		return qlinear.Weight{}, errs.Value("weight: want %d scales and zero points, got %d and %d", want, len(t.Scales), len(t.ZeroPoints))
	}
	if err := checkZeros(t, t.ZeroPoints); err != nil {
		return qlinear.Weight{}, err
	}
	data, err := codes(t)
	if err != nil {
		return qlinear.Weight{}, err
	}
	w := qlinear.Weight{Data: data, Scales: t.Scales, Zeros: t.ZeroPoints, ID: id}
	if ct != nil {
		cs, err := qtensor.View[int32](ct, qtensor.I32)
		if err != nil {
			return w, err
		}
		if len(cs) != n {
			return w, errs.Value("colsums: want %d values, got %d", n, len(cs))
		}
		w.ColSums = cs
	}
	return w, nil
}

// optBias reads an optional float32 bias of n values.
func optBias(bt *qtensor.Tensor, n int) ([]float32, error) {
	if bt == nil {
		return nil, nil
	}
	b, err := qtensor.View[float32](bt, qtensor.F32)
	if err != nil {
		return nil, err
	}
	if len(b) != n {
		return nil, errs.Value("bias: must have %d values (one per output channel), got shape %v", n, bt.Shape)
	}
	return b, nil
}

// qopsOperands checks the params and info structs of a linear or conv
// export and decodes its host operands x, weight and out and the optional
// bias.
func qopsOperands(p *C.bng_qops_params, info *C.bng_op_info, x, w, bias, out *C.bng_tensor) (xt, wt, ot, bt *qtensor.Tensor, err error) {
	if err = qopsParams(p); err != nil {
		return
	}
	if err = checkInfo(info); err != nil {
		return
	}
	ts, err := decodeHost([]*C.bng_tensor{x, w, out}, "x", "weight", "out")
	if err != nil {
		return
	}
	bt, err = decode(bias, "bias", tensorOpt{optional: true})
	return ts[0], ts[1], ts[2], bt, err
}

//export bng_qlinear
func bng_qlinear(x, w, bias, colsums, out *C.bng_tensor, p *C.bng_qops_params, actQ *C.float,
	info *C.bng_op_info, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		xt, wt, ot, bt, err := qopsOperands(p, info, x, w, bias, out)
		if err != nil {
			return err
		}
		ct, err := decode(colsums, "colsums", tensorOpt{optional: true})
		if err != nil {
			return err
		}
		if len(wt.Shape) != 2 {
			return errs.Value("weight must have 2 dimensions (out_features, in_features), got shape %v", wt.Shape)
		}
		N, K := wt.Shape[0], wt.Shape[1]
		if K < 1 { // no product to take (and no row count to take from x's length)
			return errs.Value("weight: in_features must be >= 1, got shape %v", wt.Shape)
		}
		if len(xt.Shape) < 1 || xt.Shape[len(xt.Shape)-1] != K {
			return errs.Value("x must have shape (..., %d) for a weight of shape %v, got %v", K, wt.Shape, xt.Shape)
		}
		M := xt.Len() / K
		if len(ot.Shape) != len(xt.Shape) || ot.Len() != M*N || ot.Shape[len(ot.Shape)-1] != N {
			return errs.Value("out: shape %v does not match (..., %d) for x of shape %v", ot.Shape, N, xt.Shape)
		}
		b, err := optBias(bt, N)
		if err != nil {
			return err
		}
		k := qlinear.KernelOp.Get()
		var ran qlinear.Info
		if xt.DType == qtensor.F32 {
			xs, err := qtensor.View[float32](xt, qtensor.F32)
			if err != nil {
				return err
			}
			os, err := qtensor.View[float32](ot, qtensor.F32)
			if err != nil {
				return err
			}
			wq, err := qweight(wt, ct, N, weightID(p))
			if err != nil {
				return err
			}
			s, zp, info, err := qlinear.LinearDynamic(k, M, N, K, xs, p.reduce_range != 0, wq, b, os)
			if err != nil {
				return err
			}
			if actQ != nil {
				q := unsafe.Slice((*float32)(unsafe.Pointer(actQ)), 2)
				q[0], q[1] = s, float32(zp)
			}
			ran = info
		} else {
			xa, err := qact(xt)
			if err != nil {
				return err
			}
			if ot.DType != xt.DType {
				return errs.Type("out: must be %s like x, got %s", xt.DType, ot.DType)
			}
			o, err := qout(ot, p.relu != 0)
			if err != nil {
				return err
			}
			if wt.DType == qtensor.I2S {
				ran, err = linearTernary(k, M, N, K, xa, wt, ct, b, o, ot.Data, weightID(p))
			} else if wt.Axis == -1 && wt.BlockSize > 0 {
				ran, err = linearGrouped(k, M, N, K, xa, wt, b, o, ot.Data)
			} else {
				var wq qlinear.Weight
				if wq, err = qweight(wt, ct, N, weightID(p)); err != nil {
					return err
				}
				ran, err = qlinear.Linear(k, M, N, K, xa, wq, b, o, ot.Data)
			}
			if err != nil {
				return err
			}
		}
		writeInfo(info, 0, ran.Kernel)
		return nil
	})
}

// linearTernary runs an I2_S weight (N, K) straight from its codes: K a
// multiple of 128, one scale (block_size 0 or covering the tensor) or one
// per row (block_size a multiple of K). colsums (nil: none) are its row
// sums; id is its Ternary.ID.
func linearTernary(k *qlinear.Kernels, M, N, K int, xa qlinear.Act, wt, ct *qtensor.Tensor, b []float32, o qlinear.Output, out []byte, id uint64) (qlinear.Info, error) {
	if err := wt.WantContiguous(); err != nil {
		return qlinear.Info{}, err
	}
	bs := wt.BlockSize
	var scales []float32
	switch {
	case len(wt.Scales) == 1 && (bs == 0 || bs >= N*K):
		scales = wt.Scales
	case bs > 0 && bs%K == 0:
		per := bs / K // rows a scale covers
		if want := (N + per - 1) / per; len(wt.Scales) < want {
			return qlinear.Info{}, errs.Value("weight: %d scales for %d rows of %d values in blocks of %d", len(wt.Scales), N, K, bs)
		}
		if per == 1 { // one scale a row: the weight's own
			scales = wt.Scales[:N]
			break
		}
		scales = make([]float32, N)
		for r := range scales {
			scales[r] = wt.Scales[r/per]
		}
	default:
		return qlinear.Info{}, errs.Value("weight: an i2_s weight needs one scale or one per row (block_size a multiple of %d), got %d scales, block_size %d", K, len(wt.Scales), bs)
	}
	w := qlinear.Ternary{Packed: wt.Data, Scales: scales, ID: id}
	if ct != nil {
		cs, err := qtensor.View[int32](ct, qtensor.I32)
		if err != nil {
			return qlinear.Info{}, err
		}
		if len(cs) != N {
			return qlinear.Info{}, errs.Value("colsums: want %d values, got %d", N, len(cs))
		}
		w.ColSums = cs
	}
	return qlinear.LinearTernary(k, M, N, K, xa, w, b, o, out)
}

// linearGrouped runs a weight with one scale and zero point per block of
// a row.
func linearGrouped(k *qlinear.Kernels, M, N, K int, xa qlinear.Act, wt *qtensor.Tensor, b []float32, o qlinear.Output, out []byte) (qlinear.Info, error) {
	if wt.DType != qtensor.I8 {
		return qlinear.Info{}, errs.Type("weight: must be int8, got %s", wt.DType)
	}
	if err := wt.WantContiguous(); err != nil {
		return qlinear.Info{}, err
	}
	if K%wt.BlockSize != 0 {
		return qlinear.Info{}, errs.Value("weight: block_size %d must divide in_features %d", wt.BlockSize, K)
	}
	G := K / wt.BlockSize
	zeros := wt.ZeroPoints
	if len(zeros) == 0 {
		zeros = make([]int32, N*G)
	}
	if err := checkZeros(wt, zeros); err != nil {
		return qlinear.Info{}, err
	}
	data, err := codes(wt)
	if err != nil {
		return qlinear.Info{}, err
	}
	return qlinear.LinearGrouped(k, M, N, K, G, xa, data, wt.Scales, zeros, b, o, out)
}

//export bng_qmatmul
func bng_qmatmul(a, b, out *C.bng_tensor, p *C.bng_qops_params, info *C.bng_op_info, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		if err := qopsParams(p); err != nil {
			return err
		}
		if err := checkInfo(info); err != nil {
			return err
		}
		ts, err := decodeHost([]*C.bng_tensor{a, b, out}, "a", "b", "out")
		if err != nil {
			return err
		}
		at, bt, ot := ts[0], ts[1], ts[2]
		if at.DType != bt.DType || ot.DType != at.DType {
			return errs.Type("a, b and out must have one dtype (uint8 or int8), got %s, %s and %s", at.DType, bt.DType, ot.DType)
		}
		nd := len(at.Shape)
		if nd < 2 || len(bt.Shape) != nd || len(ot.Shape) != nd {
			return errs.Value("a, b and out must have the same number of dimensions (>= 2), got shapes %v, %v and %v", at.Shape, bt.Shape, ot.Shape)
		}
		M, K, N := at.Shape[nd-2], at.Shape[nd-1], bt.Shape[nd-1]
		if bt.Shape[nd-2] != K {
			return errs.Value("b: shape %v does not match a's %v (want (..., %d, N))", bt.Shape, at.Shape, K)
		}
		batch := 1
		for i := 0; i < nd-2; i++ {
			if bt.Shape[i] != at.Shape[i] || ot.Shape[i] != at.Shape[i] {
				return errs.Value("a, b and out must have the same batch dimensions, got shapes %v, %v and %v", at.Shape, bt.Shape, ot.Shape)
			}
			batch *= at.Shape[i]
		}
		if ot.Shape[nd-2] != M || ot.Shape[nd-1] != N {
			return errs.Value("out: shape %v, want (..., %d, %d)", ot.Shape, M, N)
		}
		aa, err := qact(at)
		if err != nil {
			return err
		}
		ba, err := qact(bt)
		if err != nil {
			return err
		}
		o, err := qout(ot, p.relu != 0)
		if err != nil {
			return err
		}
		bw := qlinear.Weight{Data: ba.Data, Unsigned: !ba.Signed, Scales: []float32{ba.Scale}, Zeros: []int32{ba.Zero}}
		ran, err := qlinear.Matmul(qlinear.KernelOp.Get(), batch, M, N, K, aa, bw, o, ot.Data)
		if err != nil {
			return err
		}
		writeInfo(info, 0, ran.Kernel)
		return nil
	})
}

//export bng_qconv2d
func bng_qconv2d(x, w, bias, out *C.bng_tensor, p *C.bng_qops_params, info *C.bng_op_info, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		xt, wt, ot, bt, err := qopsOperands(p, info, x, w, bias, out)
		if err != nil {
			return err
		}
		if len(xt.Shape) != 4 || len(wt.Shape) != 4 || len(ot.Shape) != 4 {
			return errs.Value("x, weight and out must have 4 dimensions, got shapes %v, %v and %v", xt.Shape, wt.Shape, ot.Shape)
		}
		s := qlinear.ConvShape{N: xt.Shape[0], C: xt.Shape[1], H: xt.Shape[2], W: xt.Shape[3],
			O: wt.Shape[0], KH: wt.Shape[2], KW: wt.Shape[3], Groups: int(p.groups),
			StrideH: int(p.stride[0]), StrideW: int(p.stride[1]),
			PadT: int(p.padding[0]), PadL: int(p.padding[1]), PadB: int(p.padding[2]), PadR: int(p.padding[3]),
			DilH: int(p.dilation[0]), DilW: int(p.dilation[1])}
		if s.C < 1 || s.KH < 1 || s.KW < 1 { // no product to take
			return errs.Value("x must have at least one channel and the weight a kernel of at least 1x1, got shapes %v and %v", xt.Shape, wt.Shape)
		}
		if s.Groups < 1 || s.C%s.Groups != 0 || wt.Shape[1] != s.C/s.Groups {
			return errs.Value("weight: shape %v does not match x's %d channels in %d groups", wt.Shape, s.C, s.Groups)
		}
		ho, wo, err := s.Out()
		if err != nil {
			return err
		}
		if ot.Shape[0] != s.N || ot.Shape[1] != s.O || ot.Shape[2] != ho || ot.Shape[3] != wo {
			return errs.Value("out: shape %v does not match the convolution's output shape [%d %d %d %d]", ot.Shape, s.N, s.O, ho, wo)
		}
		if ot.DType != xt.DType {
			return errs.Type("out: must be %s like x, got %s", xt.DType, ot.DType)
		}
		xa, err := qact(xt)
		if err != nil {
			return err
		}
		o, err := qout(ot, p.relu != 0)
		if err != nil {
			return err
		}
		wq, err := qweight(wt, nil, s.O, weightID(p))
		if err != nil {
			return err
		}
		b, err := optBias(bt, s.O)
		if err != nil {
			return err
		}
		ran, err := qlinear.Conv2D(qlinear.KernelOp.Get(), s, xa, wq, b, o, ot.Data)
		if err != nil {
			return err
		}
		writeInfo(info, 0, ran.Kernel)
		return nil
	})
}
