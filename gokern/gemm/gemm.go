// Package gemm holds the micro-kernels of the ternary convolution: small
// fixed-size matrix products over packed panels, called per tile by
// gokern/conv, which owns the blocking, the packing of activations and the
// goroutines.
//
// # Panels
//
// A (the ternary weights) is packed once per call by PackA: for every group
// of output channels, rows are taken MR = 4 at a time (the last panel padded
// with zero rows), and for each k the four rows' 2-bit codes share one byte:
//
//	byte k of a panel = c(r0,k) | c(r1,k)<<2 | c(r2,k)<<4 | c(r3,k)<<6
//
// with the I2_S code c = q+1 (-1 -> 0, 0 -> 1, +1 -> 2). A panel of K values
// thus takes K bytes, the size of the packed weights themselves, and a byte
// decodes to four weights with one table look-up.
//
// B (activations, float32 or int8) is packed by the caller in micro-panels of
// NR columns, k-major: element (k, j) of a micro-panel at b[k*NR+j]; columns
// past the matrix edge are zero. NR is a property of the kernel set (Kernels),
// so a SIMD family may choose its own.
//
// A micro-kernel computes one MR x NR tile of T = A·B over kc values of k and
// stores it at t[r*ldt+j], or adds it there when add is true. Float tiles are
// float32 sums of ±b (weights are -1, 0 or +1; scales are applied later by the
// caller); int8 tiles are exact int32 sums.
//
// # Dispatch
//
// The micro-kernels sit behind Kernels values chosen once at start-up by
// SelectKernels, as in gokern/ternary: the generic Go kernels in this file are
// the oracle, always compiled and tested; a SIMD family registers its set
// from its own file with a package-level
//
//	var _ = register(&Kernels{Family: cpu.AVX2, ...})
//
// (variable initializers run before init functions, so the set is there when
// SelectKernels first runs). A family may choose its own NR values; the A
// panel layout is shared. The choice is recorded with
// cpu.Record("conv_gemm", family).
package gemm

import (
	"sync/atomic"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// MR is the number of rows (output channels) of an A panel: the four 2-bit
// codes of one byte.
const MR = 4

// ZeroByte is the A panel byte of four zero weights (code 1 in every slot).
const ZeroByte = 0x55

// F32Micro computes an MR x NR float32 tile from kc bytes of an A panel and
// kc*NR floats of a B micro-panel: t[r*ldt+j] (+)= sum_k w(r,k) * b[k*NR+j].
// It requires len(a) >= kc, len(b) >= kc*NR and len(t) >= (MR-1)*ldt+NR.
type F32Micro func(kc int, a []byte, b []float32, t []float32, ldt int, add bool)

// I8Micro is F32Micro for int8 activations with exact int32 sums.
type I8Micro func(kc int, a []byte, b []int8, t []int32, ldt int, add bool)

// Kernels is one family's set of micro-kernels and their panel widths.
type Kernels struct {
	Family cpu.Family
	NRF32  int      // columns of a float32 B micro-panel
	F32    F32Micro // float32 activations
	NRI8   int      // columns of an int8 B micro-panel
	I8     I8Micro  // int8 activations
}

var (
	current     atomic.Pointer[Kernels]
	genericSet  = &Kernels{Family: cpu.Generic, NRF32: 2, F32: microF32Generic, NRI8: 4, I8: microI8Generic}
	simdKernels = map[cpu.Family]*Kernels{}
)

func init() { SelectKernels() }

// register adds a SIMD family's kernel set; see the package comment.
func register(k *Kernels) bool {
	simdKernels[k.Family] = k
	return true
}

// SelectKernels installs the best family cpu.Pick allows (the generic Go
// kernels when no SIMD family is compiled in or usable) and records it.
// Tests call it again after cpu.Override.
func SelectKernels() {
	var impl []cpu.Family
	for f := range simdKernels {
		impl = append(impl, f)
	}
	k := genericSet
	if s, ok := simdKernels[cpu.Pick(impl...)]; ok {
		k = s
	}
	current.Store(k)
	cpu.Record("conv_gemm", k.Family)
}

// Current returns the kernel set in use. A convolution reads it once and
// uses the same set throughout.
func Current() *Kernels { return current.Load() }

// Generic returns the generic Go kernel set, the oracle.
func Generic() *Kernels { return genericSet }

// Families lists the kernel sets compiled in and usable here, generic first.
func Families() []*Kernels {
	out := []*Kernels{genericSet}
	for f, k := range simdKernels {
		if cpu.Usable(f) {
			out = append(out, k)
		}
	}
	return out
}

// Decoding tables: the four weights of an A panel byte. Code 3 never occurs
// in a panel (PackA rejects it); its entries are zero.
var (
	lutF32 [256][MR]float32
	lutU64 [256][MR]uint64
	lutI8  [256][MR]int8
)

func init() {
	for c := range 256 {
		for r := range MR {
			v := int8((c>>(2*r))&3) - 1
			if v > 1 {
				v = 0
			}
			lutF32[c][r] = float32(v)
			lutU64[c][r] = uint64(int64(v))
			lutI8[c][r] = v
		}
	}
}

// Weights returns the four weights of an A panel byte.
func Weights(code byte) [MR]int8 { return lutI8[code] }

// WeightsF32 returns the four weights of an A panel byte as float32.
func WeightsF32(code byte) *[MR]float32 { return &lutF32[code] }

// checkMicro panics (recovered by the C ABI) when a caller passes buffers too
// short for the tile; the kernels then index without bounds checks.
func checkMicro(kc, la, lb, nr, lt, ldt int) {
	if kc < 1 || la < kc || lb < kc*nr || ldt < nr || lt < (MR-1)*ldt+nr {
		panic("gemm: micro-kernel buffers too short")
	}
}

// microF32Generic is the generic F32Micro, NR = 2. Go keeps the eight
// accumulators in registers; four k per iteration amortise the loop.
func microF32Generic(kc int, a []byte, b []float32, t []float32, ldt int, add bool) {
	const nr = 2
	checkMicro(kc, len(a), len(b), nr, len(t), ldt)
	var c00, c01, c10, c11, c20, c21, c30, c31 float32
	pa := unsafe.Pointer(unsafe.SliceData(a))
	pb := unsafe.Pointer(unsafe.SliceData(b))
	k := 0
	for ; k+4 <= kc; k += 4 {
		bb := (*[4 * nr]float32)(unsafe.Add(pb, k*nr*4))
		w := &lutF32[*(*byte)(unsafe.Add(pa, k))]
		c00 += w[0] * bb[0]
		c01 += w[0] * bb[1]
		c10 += w[1] * bb[0]
		c11 += w[1] * bb[1]
		c20 += w[2] * bb[0]
		c21 += w[2] * bb[1]
		c30 += w[3] * bb[0]
		c31 += w[3] * bb[1]
		w = &lutF32[*(*byte)(unsafe.Add(pa, k+1))]
		c00 += w[0] * bb[2]
		c01 += w[0] * bb[3]
		c10 += w[1] * bb[2]
		c11 += w[1] * bb[3]
		c20 += w[2] * bb[2]
		c21 += w[2] * bb[3]
		c30 += w[3] * bb[2]
		c31 += w[3] * bb[3]
		w = &lutF32[*(*byte)(unsafe.Add(pa, k+2))]
		c00 += w[0] * bb[4]
		c01 += w[0] * bb[5]
		c10 += w[1] * bb[4]
		c11 += w[1] * bb[5]
		c20 += w[2] * bb[4]
		c21 += w[2] * bb[5]
		c30 += w[3] * bb[4]
		c31 += w[3] * bb[5]
		w = &lutF32[*(*byte)(unsafe.Add(pa, k+3))]
		c00 += w[0] * bb[6]
		c01 += w[0] * bb[7]
		c10 += w[1] * bb[6]
		c11 += w[1] * bb[7]
		c20 += w[2] * bb[6]
		c21 += w[2] * bb[7]
		c30 += w[3] * bb[6]
		c31 += w[3] * bb[7]
	}
	for ; k < kc; k++ {
		bb := (*[nr]float32)(unsafe.Add(pb, k*nr*4))
		w := &lutF32[*(*byte)(unsafe.Add(pa, k))]
		c00 += w[0] * bb[0]
		c01 += w[0] * bb[1]
		c10 += w[1] * bb[0]
		c11 += w[1] * bb[1]
		c20 += w[2] * bb[0]
		c21 += w[2] * bb[1]
		c30 += w[3] * bb[0]
		c31 += w[3] * bb[1]
	}
	r0 := t[0:nr:nr]
	r1 := t[ldt : ldt+nr : ldt+nr]
	r2 := t[2*ldt : 2*ldt+nr : 2*ldt+nr]
	r3 := t[3*ldt : 3*ldt+nr : 3*ldt+nr]
	if add {
		r0[0], r0[1] = r0[0]+c00, r0[1]+c01
		r1[0], r1[1] = r1[0]+c10, r1[1]+c11
		r2[0], r2[1] = r2[0]+c20, r2[1]+c21
		r3[0], r3[1] = r3[0]+c30, r3[1]+c31
		return
	}
	r0[0], r0[1] = c00, c01
	r1[0], r1[1] = c10, c11
	r2[0], r2[1] = c20, c21
	r3[0], r3[1] = c30, c31
}

// pair packs two int8 values as two int32 lanes of a uint64 (lo + hi<<32,
// modulo 2^64). Sums of w*pair over many k stay exact lane-wise as long as
// each lane's true sum fits in int32: see lanes.
func pair(lo, hi int8) uint64 { return uint64(int64(lo)) + uint64(int64(hi))<<32 }

// lanes recovers the two int32 sums from a sum of pairs: the low lane is the
// low 32 bits; the high lane is what remains once the (sign-extended) low
// lane is taken away.
func lanes(v uint64) (int32, int32) {
	lo := int32(uint32(v))
	return lo, int32((v - uint64(int64(lo))) >> 32)
}

// microI8Generic is the generic I8Micro, NR = 4. It multiplies two int32
// lanes at once (SWAR in 64-bit registers): w * (x0 + x1<<32) = w*x0 +
// (w*x1)<<32 modulo 2^64, so one multiply-add serves two columns and the
// lanes are separated exactly at the end (|sum| <= 128*kc < 2^31).
func microI8Generic(kc int, a []byte, b []int8, t []int32, ldt int, add bool) {
	const nr = 4
	checkMicro(kc, len(a), len(b), nr, len(t), ldt)
	if kc > 1<<24 {
		panic("gemm: kc too large for exact int32 sums")
	}
	var c00, c01, c10, c11, c20, c21, c30, c31 uint64
	pa := unsafe.Pointer(unsafe.SliceData(a))
	pb := unsafe.Pointer(unsafe.SliceData(b))
	k := 0
	for ; k+2 <= kc; k += 2 {
		bb := (*[2 * nr]int8)(unsafe.Add(pb, k*nr))
		w := &lutU64[*(*byte)(unsafe.Add(pa, k))]
		p0, p1 := pair(bb[0], bb[1]), pair(bb[2], bb[3])
		c00 += w[0] * p0
		c01 += w[0] * p1
		c10 += w[1] * p0
		c11 += w[1] * p1
		c20 += w[2] * p0
		c21 += w[2] * p1
		c30 += w[3] * p0
		c31 += w[3] * p1
		w = &lutU64[*(*byte)(unsafe.Add(pa, k+1))]
		p0, p1 = pair(bb[4], bb[5]), pair(bb[6], bb[7])
		c00 += w[0] * p0
		c01 += w[0] * p1
		c10 += w[1] * p0
		c11 += w[1] * p1
		c20 += w[2] * p0
		c21 += w[2] * p1
		c30 += w[3] * p0
		c31 += w[3] * p1
	}
	if k < kc {
		bb := (*[nr]int8)(unsafe.Add(pb, k*nr))
		w := &lutU64[*(*byte)(unsafe.Add(pa, k))]
		p0, p1 := pair(bb[0], bb[1]), pair(bb[2], bb[3])
		c00 += w[0] * p0
		c01 += w[0] * p1
		c10 += w[1] * p0
		c11 += w[1] * p1
		c20 += w[2] * p0
		c21 += w[2] * p1
		c30 += w[3] * p0
		c31 += w[3] * p1
	}
	store := func(row []int32, v0, v1 uint64) {
		row = row[:nr:nr]
		a0, a1 := lanes(v0)
		a2, a3 := lanes(v1)
		if add {
			row[0], row[1], row[2], row[3] = row[0]+a0, row[1]+a1, row[2]+a2, row[3]+a3
		} else {
			row[0], row[1], row[2], row[3] = a0, a1, a2, a3
		}
	}
	store(t[0:], c00, c01)
	store(t[ldt:], c10, c11)
	store(t[2*ldt:], c20, c21)
	store(t[3*ldt:], c30, c31)
}
