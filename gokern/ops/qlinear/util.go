package qlinear

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
)

// Memory kept from call to call by the dot-kernel paths (Linear,
// LinearFloat, LinearTernary): the epilogue's per-channel values (callMem),
// byte and int32 scratch (the columns, their sums, the kernels' results).
// Fresh slices of N values a call cost a 4096 x 4096 GEMV about a sixth of
// its time (allocation and zeroing), as much as its kernels' gap to fbgemm.
var (
	calls        = &buf.List[callMem]{MaxCap: 1, MaxCount: 8}
	scratchBytes = &buf.List[byte]{MaxCap: 1 << 26, MaxCount: 8}
	scratchInts  = &buf.List[int32]{MaxCap: 1 << 24, MaxCount: 16}
)

// callMem is the memory of one call's epilogue, reused by later calls: the
// Requant, zero weight zero points (a ternary weight's; only ever read) and
// an int8 weight's zero points in the signed domain (zeroPointsInto).
type callMem struct {
	r     Requant
	zeros []int32
	zw    []int32
}

// getCall returns a callMem from calls and the handle to put back.
func getCall() (*callMem, *[]callMem) {
	ch := calls.Get()
	if len(*ch) == 0 {
		*ch = make([]callMem, 1)
	}
	return &(*ch)[0], ch
}

// asInt8 views b as int8 values.
func asInt8(b []byte) []int8 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b))
}

// asWords views b (a multiple of 4 bytes) as little-endian uint32 words.
func asWords(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// resize returns s with length n: s itself where its capacity allows (the
// contents stale), else a new slice.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
