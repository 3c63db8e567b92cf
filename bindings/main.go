// Command bindings is the C ABI of bitnet_go, built with
// `go build -buildmode=c-shared` into the one shared library the Python
// package loads.
//
// Conventions, the same for every export:
//   - Ops take one bng_tensor descriptor per operand and a versioned
//     parameter struct (bng_abi.h; decoded in desc.go); queries take plain
//     integers and buffers. All output buffers are allocated by the caller;
//     Go writes into them and never keeps a pointer after returning, and
//     never hands Go memory to C.
//   - The return value is a status: 0 success, 1 ValueError, 2 TypeError,
//     3 MemoryError, 4 RuntimeError (see gokern/errs).
//   - The last two arguments are (char *errbuf, int64 errcap): on failure the
//     message is written there, NUL-terminated and truncated to errcap-1 bytes.
//     A NULL errbuf or errcap <= 0 is allowed (the message is dropped), so the
//     buffer is per call and thread-safe without any thread-local state.
//   - Every export recovers panics (including those of worker goroutines,
//     which gokern/par re-raises on the calling goroutine) into status 4.
//   - Every export checks its own arguments: NULL pointers with a non-zero
//     count, negative or overflowing counts, and mismatched lengths.
//   - Status 5 (KindInterrupted): SIGINT arrived while the call ran and it
//     stopped early (interrupt.go); its outputs are incomplete. Calling it
//     again runs it in full.
//
// This package holds no logic beyond that: kernels live in gokern/.
package main

/*
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// abiVersion changes whenever an export's signature or a struct's layout
// changes incompatibly; the Python loader refuses a library whose version
// differs from its own. (Version 4: ops over descriptors; 5: general
// quantization, bng_quantize_params V2; 6: the quantized ops (bng_qlinear,
// bng_qmatmul, bng_qconv2d, bng_qadd, bng_qrelu, bng_requantize), the tq2_0
// and tq1_0 dtypes, bng_cuda_conv2d; the bfloat16 and float16 dtypes and
// bng_cast; 7: bng_qops_params V2 and bng_conv2d_params V2, their
// weight_id.)
const abiVersion = 7

// maxBytes bounds any buffer the ABI accepts (2^62 bytes).
const maxBytes = int64(1) << 62

func main() {}

//export bng_abi_version
func bng_abi_version() C.int32_t { return abiVersion }

// guard runs fn as one call from the host (par.Begin/End: Ctrl-C stops it,
// see interrupt.go), turning its error or panic into a status and a message.
func guard(errbuf *C.char, errcap C.int64_t, fn func() error) (status C.int32_t) {
	armInterrupt()
	par.Begin()
	defer par.End()
	defer func() {
		if r := recover(); r == par.ErrInterrupted {
			writeErr(errbuf, errcap, par.ErrInterrupted.Error())
			status = C.int32_t(errs.KindInterrupted)
		} else if r != nil {
			writeErr(errbuf, errcap, fmt.Sprintf("internal error (please report): panic: %v\n%s", r, debug.Stack()))
			status = C.int32_t(errs.KindRuntime)
		}
	}()
	if err := fn(); err != nil {
		writeErr(errbuf, errcap, err.Error())
		return C.int32_t(errs.KindOf(err))
	}
	return 0
}

// writeErr copies msg into the caller's buffer, NUL-terminated.
func writeErr(errbuf *C.char, errcap C.int64_t, msg string) {
	if errbuf == nil || errcap <= 0 {
		return
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(errbuf)), int(errcap))
	k := copy(dst[:len(dst)-1], msg)
	dst[k] = 0
}

// view wraps n elements of type T at p as a Go slice, after checking that
// the pointer and count are usable. name is the argument's name for errors.
func view[T any](p unsafe.Pointer, n C.int64_t, name string) ([]T, error) {
	return viewField[T](p, n, name, "")
}

// viewField is view for field (e.g. ".scales") of the argument name: the
// two are joined only for an error, so that a call allocates no names.
func viewField[T any](p unsafe.Pointer, n C.int64_t, name, field string) ([]T, error) {
	var zero T
	size := int64(unsafe.Sizeof(zero))
	switch {
	case n < 0:
		return nil, errs.Value("%s%s: length must be non-negative, got %d", name, field, int64(n))
	case int64(n) > maxBytes/size:
		return nil, errs.Value("%s%s: length %d overflows (more than %d bytes)", name, field, int64(n), maxBytes)
	case n == 0:
		return []T{}, nil
	case p == nil:
		return nil, errs.Value("%s%s is NULL but its length is %d", name, field, int64(n))
	}
	return unsafe.Slice((*T)(p), int(n)), nil
}

// str copies a Go string into a caller buffer (NUL-terminated); the buffer
// must be large enough, and the error says how large.
func str(buf *C.char, bufcap C.int64_t, s string) error {
	dst, err := view[byte](unsafe.Pointer(buf), bufcap, "buf")
	if err != nil {
		return err
	}
	if int64(len(s))+1 > int64(len(dst)) {
		return errs.Value("buf: need %d bytes, got %d", len(s)+1, len(dst))
	}
	dst[copy(dst, s)] = 0
	return nil
}
