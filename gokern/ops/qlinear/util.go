package qlinear

import "unsafe"

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
