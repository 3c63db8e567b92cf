package gemm

import "unsafe"

// Lookup-table (LUT) kernels for int8 activations, in the manner of T-MAC and
// bitnet.cpp: instead of multiplying every weight by its activation, the
// possible partial sums of a small group of activations are computed once
// into a table, and each row's packed weight indices select from it.
//
// # Tables
//
// The activations come as a B micro-panel of LUTCols = 2 columns, k-major
// (b[k*2+j], the layout of the multiply-add kernels with NR = 2); rows of b
// at or past kc read as zero. A table entry holds the partial sums of both
// columns as two int32 lanes of a uint64, lo + hi<<32 modulo 2^64 (see pair
// and lanes): sums of entries stay exact lane-wise as long as each lane's
// true sum fits in int32, which K < 2^24 guarantees (|sum| <= 128*K < 2^31).
//
//   - Pairs (TL1): for pair i = (b[2i], b[2i+1]), 16 entries at tab[16*i+idx],
//     idx = 3*w0 + w1 + 4 (0..8) holding w0*b[2i] + w1*b[2i+1] (|.| <= 256);
//     entries 9..15 are zero and never selected by valid weights.
//   - Triples (TL2): for triple i = (b[3i], b[3i+1], b[3i+2]), 32 entries at
//     tab[32*i+m], m = 0..13 holding w0*b[3i] + w1*b[3i+1] + w2*b[3i+2] for the
//     balanced-ternary digits of m = 9*w0 + 3*w1 + w2 (|.| <= 384): the 14
//     magnitudes; entry 16+m holds the same sums negated (v = -m), so the
//     index is the magnitude nibble with the sign bit as bit 4 (one load,
//     no branch); entries 14, 15, 30, 31 are zero.
//
// # Weights
//
// Rows are read in the TL1 / TL2 byte layout of gokern/ternary (one row per
// call): TL1, two indices a byte, low nibble first; TL2, magnitudes two a
// byte (low nibble first) and sign bits (bit i%8 of byte i/8) in their own
// slice. The dot functions return the uint64 of the two lanes; the caller
// adds chunks and splits the lanes with LUTLanes.

// These 2-column kernels are the generic LUT kernels; the SIMD families'
// wide ones (16 columns of int16, lut16.go) are selected by LUT16.

// LUTCols is the number of activation columns of one table (int32 lanes of
// a uint64 entry).
const LUTCols = 2

// LUTEntries is the stride of one group's table.
const LUTEntries = 16

// LUTLanes splits a sum of table entries into the two columns' int32 sums.
func LUTLanes(v uint64) (int32, int32) { return lanes(v) }

// lutAct returns b[k*2+j], or 0 past kc.
func lutAct(b []int8, kc, k, j int) int64 {
	if k >= kc {
		return 0
	}
	return int64(b[k*LUTCols+j])
}

func lane2(s0, s1 int64) uint64 { return uint64(s0) + uint64(s1)<<32 }

// tripleDigits[m] are the balanced-ternary digits (w0, w1, w2) of m = 0..13.
var tripleDigits [14][3]int64

func init() {
	for m := range 14 {
		v := m
		var d [3]int64
		for i := 2; i >= 0; i-- {
			r := ((v % 3) + 3) % 3
			if r == 2 {
				r = -1
			}
			d[i] = int64(r)
			v = (v - r) / 3
		}
		tripleDigits[m] = d
	}
}

// BuildPairTables fills tab[16*i : 16*i+16] for the np pairs of the B
// micro-panel b (kc rows valid, 2 columns). len(tab) >= 16*np.
func BuildPairTables(tab []uint64, b []int8, kc, np int) {
	tab = tab[:LUTEntries*np]
	for i := range np {
		t := tab[LUTEntries*i:][:LUTEntries]
		x00, x01 := lutAct(b, kc, 2*i, 0), lutAct(b, kc, 2*i, 1)
		x10, x11 := lutAct(b, kc, 2*i+1, 0), lutAct(b, kc, 2*i+1, 1)
		for w0 := int64(-1); w0 <= 1; w0++ {
			for w1 := int64(-1); w1 <= 1; w1++ {
				t[3*w0+w1+4] = lane2(w0*x00+w1*x10, w0*x01+w1*x11)
			}
		}
		clear(t[9:])
	}
}

// BuildTripleTables fills tab[32*i : 32*i+32] for the nt triples of the B
// micro-panel b (kc rows valid, 2 columns): entries m = 0..13 for +m, 16+m
// for -m (the negated entry), the others zero. len(tab) >= 32*nt.
func BuildTripleTables(tab []uint64, b []int8, kc, nt int) {
	tab = tab[:TripleEntries*nt]
	for i := range nt {
		t := tab[TripleEntries*i:][:TripleEntries]
		var x [3][2]int64
		for r := range 3 {
			x[r][0], x[r][1] = lutAct(b, kc, 3*i+r, 0), lutAct(b, kc, 3*i+r, 1)
		}
		for m, d := range tripleDigits {
			s0 := d[0]*x[0][0] + d[1]*x[1][0] + d[2]*x[2][0]
			s1 := d[0]*x[0][1] + d[1]*x[1][1] + d[2]*x[2][1]
			t[m], t[16+m] = lane2(s0, s1), lane2(-s0, -s1)
		}
		t[14], t[15], t[30], t[31] = 0, 0, 0, 0
	}
}

// TripleEntries is the stride of one triple's table (magnitude | sign<<4).
const TripleEntries = 32

// PairDot returns the sum over the pairs of idx (two 4-bit TL1 indices a
// byte, low nibble first: pairs 2j and 2j+1 in byte j) of their table
// entries. len(tab) >= 32*len(idx); every nibble must be <= 15 (always) and
// the table's unused entries are zero.
func PairDot(tab []uint64, idx []byte) uint64 {
	if len(tab) < 2*LUTEntries*len(idx) {
		panic("gemm: PairDot table too short")
	}
	pt := unsafe.Pointer(unsafe.SliceData(tab))
	var s0, s1 uint64
	j := 0
	for ; j+2 <= len(idx); j += 2 {
		b0, b1 := idx[j], idx[j+1]
		t := (*[4 * LUTEntries]uint64)(unsafe.Add(pt, j*2*LUTEntries*8))
		s0 += t[b0&15] + t[LUTEntries+int(b0>>4)]
		s1 += t[2*LUTEntries+int(b1&15)] + t[3*LUTEntries+int(b1>>4)]
	}
	if j < len(idx) {
		b0 := idx[j]
		t := (*[2 * LUTEntries]uint64)(unsafe.Add(pt, j*2*LUTEntries*8))
		s0 += t[b0&15] + t[LUTEntries+int(b0>>4)]
	}
	return s0 + s1
}

// TripleDot returns the sum over nt triples of their signed table entries:
// magnitude of triple i in nibble i%2 of mag[i/2] (low first), sign in bit
// i%8 of sign[i/8] (1: negative), selecting entry mag | sign<<4.
// len(tab) >= 32*nt, len(mag) >= ceil(nt/2), len(sign) >= ceil(nt/8).
func TripleDot(tab []uint64, mag, sign []byte, nt int) uint64 {
	if nt <= 0 {
		return 0
	}
	if len(tab) < TripleEntries*nt || len(mag) < (nt+1)/2 || len(sign) < (nt+7)/8 {
		panic("gemm: TripleDot buffers too short")
	}
	pt := unsafe.Pointer(unsafe.SliceData(tab))
	var s0, s1 uint64
	i := 0
	for ; i+8 <= nt; i += 8 {
		sg := uint(sign[i/8]) << 4
		m := (*[4]byte)(mag[i/2:])
		t := (*[8 * TripleEntries]uint64)(unsafe.Add(pt, i*TripleEntries*8))
		s0 += t[uint(m[0]&15)|sg&16]
		s1 += t[TripleEntries+(uint(m[0]>>4)|sg>>1&16)]
		s0 += t[2*TripleEntries+(uint(m[1]&15)|sg>>2&16)]
		s1 += t[3*TripleEntries+(uint(m[1]>>4)|sg>>3&16)]
		s0 += t[4*TripleEntries+(uint(m[2]&15)|sg>>4&16)]
		s1 += t[5*TripleEntries+(uint(m[2]>>4)|sg>>5&16)]
		s0 += t[6*TripleEntries+(uint(m[3]&15)|sg>>6&16)]
		s1 += t[7*TripleEntries+(uint(m[3]>>4)|sg>>7&16)]
	}
	for ; i < nt; i++ {
		v := uint(mag[i/2]>>(4*uint(i&1))&15) | uint(sign[i/8]>>uint(i%8)&1)<<4
		s0 += tab[TripleEntries*i+int(v)]
	}
	return s0 + s1
}

// PairDirect returns the entry of one TL1 index for activations (a0, a1) of
// each column, computed without a table (the TL2 remainder pair).
func PairDirect(idx byte, b []int8, kc, k int) uint64 {
	w0, w1 := int64(idx/3)-1, int64(idx%3)-1
	if idx > 8 {
		return 0
	}
	return lane2(w0*lutAct(b, kc, k, 0)+w1*lutAct(b, kc, k+1, 0), w0*lutAct(b, kc, k, 1)+w1*lutAct(b, kc, k+1, 1))
}
