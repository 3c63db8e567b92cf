package main

/*
#include <stdint.h>
*/
import "C"

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// bng_quantize_i2s quantizes n float32 values into I2_S. block_size 0 means
// one scale; method 0 is absmean, 1 absmax. packed must hold
// ceil(n/128)*32 bytes and scales one float per block.
//
//export bng_quantize_i2s
func bng_quantize_i2s(x *C.float, n C.int64_t, blockSize C.int64_t, method C.int32_t, checkFinite C.int32_t,
	packed *C.uint8_t, packedLen C.int64_t, scales *C.float, nScales C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		xs, err := view[float32](unsafe.Pointer(x), n, "x")
		if err != nil {
			return err
		}
		if err := ternary.CheckSizes(len(xs), int(blockSize)); err != nil {
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
		return ternary.Quantize(xs, int(blockSize), ternary.Method(method), checkFinite != 0, ps, ss)
	})
}

// bng_unpack_i2s writes the n ternary values (int8) held in packed.
//
//export bng_unpack_i2s
func bng_unpack_i2s(packed *C.uint8_t, packedLen C.int64_t, out *C.int8_t, n C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		os, err := view[int8](unsafe.Pointer(out), n, "out")
		if err != nil {
			return err
		}
		return ternary.Unpack(ps, os)
	})
}

// bng_pack_i2s packs n ternary values (int8, each -1, 0 or +1) into I2_S.
//
//export bng_pack_i2s
func bng_pack_i2s(values *C.int8_t, n C.int64_t, packed *C.uint8_t, packedLen C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		vs, err := view[int8](unsafe.Pointer(values), n, "values")
		if err != nil {
			return err
		}
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		return ternary.Pack(vs, ps)
	})
}

// bng_dequantize_i2s writes value*scale for the n values held in packed.
//
//export bng_dequantize_i2s
func bng_dequantize_i2s(packed *C.uint8_t, packedLen C.int64_t, blockSize C.int64_t,
	scales *C.float, nScales C.int64_t, out *C.float, n C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		ss, err := view[float32](unsafe.Pointer(scales), nScales, "scales")
		if err != nil {
			return err
		}
		os, err := view[float32](unsafe.Pointer(out), n, "out")
		if err != nil {
			return err
		}
		return ternary.Dequantize(ps, int(blockSize), ss, os)
	})
}
