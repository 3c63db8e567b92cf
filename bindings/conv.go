package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/conv"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// bng_conv2d computes a 2-D convolution of float32 x (n, c, h, w) with a
// ternary weight (o, wc, kh, kw), wc = c/groups, into the caller's out
// (n, o, out_h, out_w). See gokern/conv.Conv2D for the arithmetic.
//
//	x                          float32[n*c*h*w]
//	packed, packed_len         the weight's codes in format qtype (I2_S:
//	                           ceil(o*wc*kh*kw/128)*32 bytes; TL1/TL2: o rows
//	                           of wc*kh*kw values, see gokern/ternary/tl.go)
//	scales, n_scales           float32, one per block_size elements of the
//	                           flattened weight; block_size 0: one scale;
//	                           otherwise block_size must divide wc*kh*kw
//	qtype                      0 i2_s, 1 tl1, 2 tl2 (TL rows: the O output channels)
//	bias, n_bias               float32[o], or NULL with n_bias 0
//	stride_*, pad_*, dil_*     padding per side: top, left, bottom, right
//	act_bits                   0 (float32 activations) or 8 (int8)
//	algorithm                  0 auto, 1 naive, 2 im2col, 3 direct,
//	                           4 depthwise, 5 gemm1x1, 6 lut (act_bits 8 only)
//	check_finite               non-zero: NaN/Inf in x, bias, scales is an error
//	out, out_h, out_w, out_len float32[n*o*out_h*out_w]; out_h and out_w must
//	                           be the output size the geometry implies; out
//	                           must not overlap x, bias or scales
//	algo_used                  if not NULL, receives the algorithm that ran
//	                           (1..6)
//
// Sizes are int64 and flags int32; every length, shape and product is checked
// here, whoever the caller.
//
//export bng_conv2d
func bng_conv2d(x *C.float, n, c, h, w C.int64_t,
	packed *C.uint8_t, packedLen C.int64_t, scales *C.float, nScales C.int64_t, blockSize C.int64_t, qtype C.int32_t,
	o, wc, kh, kw C.int64_t,
	bias *C.float, nBias C.int64_t,
	strideH, strideW, padTop, padLeft, padBottom, padRight, dilH, dilW, groups C.int64_t,
	actBits, algorithm, checkFinite C.int32_t,
	out *C.float, outH, outW, outLen C.int64_t, algoUsed *C.int32_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		s := conv.Shape{
			N: int(n), C: int(c), H: int(h), W: int(w),
			O: int(o), WC: int(wc), KH: int(kh), KW: int(kw), Groups: int(groups),
			StrideH: int(strideH), StrideW: int(strideW),
			PadT: int(padTop), PadL: int(padLeft), PadB: int(padBottom), PadR: int(padRight),
			DilH: int(dilH), DilW: int(dilW),
		}
		d, err := s.Check()
		if err != nil {
			return err
		}
		if int64(outH) != int64(d.Ho) || int64(outW) != int64(d.Wo) {
			return errs.Value("out: spatial size (%d, %d) does not match the convolution's output size (%d, %d)",
				int64(outH), int64(outW), d.Ho, d.Wo)
		}
		xs, err := view[float32](unsafe.Pointer(x), C.int64_t(d.XLen), "x")
		if err != nil {
			return err
		}
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		ss, err := view[float32](unsafe.Pointer(scales), nScales, "scales")
		if err != nil {
			return err
		}
		bs, err := view[float32](unsafe.Pointer(bias), nBias, "bias")
		if err != nil {
			return err
		}
		outs, err := view[float32](unsafe.Pointer(out), outLen, "out")
		if err != nil {
			return err
		}
		if blockSize < 0 {
			return errs.Value("weight: block_size must be 0 (one scale) or a divisor of K = %d, got %d", d.K, int64(blockSize))
		}
		wts := conv.Weights{Packed: ps, Scales: ss, BlockSize: int(blockSize), QType: ternary.QType(qtype)}
		opt := conv.Options{ActBits: int(actBits), Algo: conv.Algo(algorithm), CheckFinite: checkFinite != 0}
		used, err := conv.Conv2D(d, xs, wts, bs, outs, opt)
		if err != nil {
			return err
		}
		if algoUsed != nil {
			*algoUsed = C.int32_t(used)
		}
		return nil
	})
}
