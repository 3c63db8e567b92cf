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

// bng_packed_len writes into *out the number of bytes that n values in rows
// rows (the first dimension; 1 for rank 0 or 1) take in format qtype
// (0 i2_s, 1 tl1, 2 tl2). n must be in [1, 2^60] and rows in [1, n],
// dividing n, for every format.
//
// The counts of bng_unpack, bng_pack and bng_dequantize are checked the same
// way (ternary.PackedLenQ, before any loop), and their packed_len must equal
// this length exactly.
//
//export bng_packed_len
func bng_packed_len(qtype C.int32_t, n C.int64_t, rows C.int64_t, out *C.int64_t,
	errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		o, err := view[int64](unsafe.Pointer(out), 1, "out")
		if err != nil {
			return err
		}
		l, err := ternary.PackedLenQ(ternary.QType(qtype), int(n), int(rows))
		o[0] = int64(l)
		return err
	})
}

// bng_unpack writes the n ternary values (int8) held in packed (format
// qtype, rows rows).
//
//export bng_unpack
func bng_unpack(qtype C.int32_t, packed *C.uint8_t, packedLen C.int64_t, rows C.int64_t,
	out *C.int8_t, n C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		os, err := view[int8](unsafe.Pointer(out), n, "out")
		if err != nil {
			return err
		}
		return ternary.UnpackQ(ternary.QType(qtype), ps, int(rows), os)
	})
}

// bng_pack packs n ternary values (int8, each -1, 0 or +1; rows rows) into
// format qtype.
//
//export bng_pack
func bng_pack(qtype C.int32_t, values *C.int8_t, n C.int64_t, rows C.int64_t,
	packed *C.uint8_t, packedLen C.int64_t, errbuf *C.char, errcap C.int64_t) C.int32_t {
	return guard(errbuf, errcap, func() error {
		vs, err := view[int8](unsafe.Pointer(values), n, "values")
		if err != nil {
			return err
		}
		ps, err := view[byte](unsafe.Pointer(packed), packedLen, "packed")
		if err != nil {
			return err
		}
		return ternary.PackQ(ternary.QType(qtype), vs, int(rows), ps)
	})
}

// bng_dequantize writes value*scale for the n values held in packed (format
// qtype, rows rows, one scale per block_size values; 0: one scale).
//
//export bng_dequantize
func bng_dequantize(qtype C.int32_t, packed *C.uint8_t, packedLen C.int64_t, rows C.int64_t, blockSize C.int64_t,
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
		return ternary.DequantizeQ(ternary.QType(qtype), ps, int(rows), int(blockSize), ss, os)
	})
}
