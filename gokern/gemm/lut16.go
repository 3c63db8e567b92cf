package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// Wide LUT kernels for TL1 pairs and TL2 triples. The generic versions here
// are the SIMD versions' oracle; convolutions without a SIMD family run the
// 2-column kernels of lut.go (under -tags noasm or BITNET_GO_DISABLE=avx2).
//
// # Tables
//
// The activations come as a B micro-panel of LUT16Cols = 16 columns, k-major
// (b[k*16+j], the micro-panel of the AVX2 multiply-add kernel); rows at or
// past kc read as zero. For pair i = (b[2i][.], b[2i+1][.]) the table holds
// LUT16Entries = 9 entries of 16 int16, entry e = 3*w0 + w1 + 4 at
// tab[144*i + 16*e + j] = w0*b[2i][j] + w1*b[2i+1][j] (|.| <= 256). After
// the last pair, LUT16Pad = 7 zero entries, so that an index nibble up to 15
// of the last (padding) pair reads zeros: TL1 rows pad an odd number of
// pairs with a nibble nothing checks.
//
// # Dot
//
// A row's TL1 index bytes (two pairs a byte, low nibble first) select one
// entry per pair; the 16 column sums are accumulated in int16 lanes, which
// wrap modulo 2^16. The true sum of at most LUT16MaxPairs = 126 pairs is at
// most 126*256 = 32256 < 2^15 in magnitude, so the wrapped int16 is exact;
// it is widened to int32 and added to the row's output. Callers therefore
// cut k into chunks of at most 252 values (the conv driver uses 128).
//
// Departure from DESIGN.md ("integer accumulation is int32, never int16"):
// that rule guards against VPMADDUBSW's saturating pair sums. Here nothing
// saturates (VPADDW wraps) and every chunk's true sum is bounded below 2^15,
// so the int16 partial sums are exact and each chunk ends in int32; the
// tests drive the bounds to their extremes (126*256 and 85*384).
// Indices 0..8 only, except in the padding pair (checked weights: see
// gokern/ops/conv2d checkTL).

// Wide triple tables (TL2): for triple i = rows 3i, 3i+1, 3i+2 of the
// micro-panel, LUT16TripleEntries = 32 entries of 16 int16 at
// tab[512*i + 16*e + j]: e = m (0..13) the sum w0*x0 + w1*x1 + w2*x2 for the
// balanced-ternary digits of m = 9*w0 + 3*w1 + w2, e = 16+m its negation,
// e = 14, 15, 30, 31 zero (|.| <= 384), so that the TL2 magnitude nibble
// with the sign bit as bit 4 selects the signed entry. TripleDot's int16
// sums are exact for at most LUT16MaxTriples = 85 triples (85*384 = 32640).

// The wide tables' dimensions and the bounds that keep int16 sums exact.
const (
	// LUT16Cols is the number of columns of a wide table.
	LUT16Cols = 16
	// LUT16Entries is the number of entries of one pair's wide table.
	LUT16Entries = 9
	// LUT16Pad is the number of zero entries after the last pair's table.
	LUT16Pad = 7
	// LUT16MaxPairs bounds the pairs of one dot so that int16 sums are exact.
	LUT16MaxPairs = 126
	// LUT16TripleEntries is the number of entries of one triple's wide table
	// (the wide triple tables above).
	LUT16TripleEntries = 32
	// LUT16MaxTriples bounds the triples of one dot so that int16 sums are
	// exact.
	LUT16MaxTriples = 85
)

// LUT16Kernels is one family's set of wide LUT kernels.
type LUT16Kernels struct {
	Family cpu.Family
	// Build fills the tables of np pairs of the 16-column micro-panel b
	// (kc rows valid) and the LUT16Pad zero entries after them.
	// len(tab) >= 16*(9*np+7), len(b) >= 16*kc.
	Build func(tab []int16, b []int8, kc, np int)
	// Dot adds, for each of rows rows r, the table sums of the 2*nb pairs
	// indexed by idx[r*ldi : r*ldi+nb] to out[r*ldo : r*ldo+16].
	// 1 <= nb <= LUT16MaxPairs/2.
	Dot func(nb int, tab []int16, idx []byte, ldi, rows int, out []int32, ldo int)
	// BuildTriples fills the tables of triples 0 .. nt-1 of b (3*nt <=
	// kc rows) and zeroes those of triples nt .. ntab-1.
	// len(tab) >= 512*ntab, len(b) >= 48*nt.
	BuildTriples func(tab []int16, b []int8, nt, ntab int)
	// TripleDot adds, for each of rows rows r, the table sums of nt TL2
	// triples to out[r*ldo : r*ldo+16]: magnitudes at mag[r*ldi:] (two a
	// byte, low nibble first), signs at sign[r*ldi:] (bit i%8 of byte i/8).
	// For odd nt the high nibble of the last magnitude byte selects from
	// triple nt, whose table must be zero (ntab = nt+1 in BuildTriples).
	// 1 <= nt <= LUT16MaxTriples.
	TripleDot func(nt int, tab []int16, mag, sign []byte, ldi, rows int, out []int32, ldo int)
}

// LUT16Op is the registry's op "conv_lut": the wide LUT kernels per SIMD
// family. Its generic set (the Go versions below) is the SIMD kernels'
// oracle; a convolution that gets it runs the 2-column kernels of lut.go
// instead, which are faster in Go.
var LUT16Op = cpu.NewOp("conv_lut", &LUT16Kernels{Family: cpu.Generic, Build: lut16BuildGeneric,
	Dot: lut16DotGeneric, BuildTriples: lut16BuildTriplesGeneric, TripleDot: lut16TripleDotGeneric})

// registerLUT16 adds a SIMD family's wide LUT kernels.
func registerLUT16(k *LUT16Kernels) bool { return LUT16Op.Register(k.Family, k) }

func checkLUT16Build(tab []int16, b []int8, kc, np int) {
	if np < 0 || kc < 0 || len(tab) < LUT16Cols*(LUT16Entries*np+LUT16Pad) || len(b) < LUT16Cols*kc {
		panic("gemm: LUT16 Build buffers too short")
	}
}

func checkLUT16Dot(nb int, tab []int16, idx []byte, ldi, rows int, out []int32, ldo int) {
	if nb < 1 || 2*nb > LUT16MaxPairs {
		panic("gemm: LUT16 Dot: nb out of range")
	}
	if rows < 1 || ldi < 0 || ldo < 0 || len(tab) < LUT16Cols*(LUT16Entries*2*nb+LUT16Pad) ||
		len(idx) < (rows-1)*ldi+nb || len(out) < (rows-1)*ldo+LUT16Cols {
		panic("gemm: LUT16 Dot buffers too short")
	}
}

// lut16BuildTail fills the tables of pairs p0 .. np-1 (rows past kc zero)
// and the padding entries, in Go.
func lut16BuildTail(tab []int16, b []int8, kc, p0, np int) {
	for i := p0; i < np; i++ {
		t := tab[LUT16Cols*LUT16Entries*i:][:LUT16Cols*LUT16Entries]
		for j := range LUT16Cols {
			var x0, x1 int16
			if 2*i < kc {
				x0 = int16(b[2*i*LUT16Cols+j])
			}
			if 2*i+1 < kc {
				x1 = int16(b[(2*i+1)*LUT16Cols+j])
			}
			for w0 := int16(-1); w0 <= 1; w0++ {
				for w1 := int16(-1); w1 <= 1; w1++ {
					t[LUT16Cols*(3*w0+w1+4)+int16(j)] = w0*x0 + w1*x1
				}
			}
		}
	}
	clear(tab[LUT16Cols*LUT16Entries*np:][:LUT16Cols*LUT16Pad])
}

// lut16BuildGeneric is Build in Go (the oracle of the SIMD versions).
func lut16BuildGeneric(tab []int16, b []int8, kc, np int) {
	checkLUT16Build(tab, b, kc, np)
	lut16BuildTail(tab, b, kc, 0, np)
}

// lut16DotGeneric is Dot in Go (the oracle of the SIMD versions), with the
// same int16 wrap-around.
func lut16DotGeneric(nb int, tab []int16, idx []byte, ldi, rows int, out []int32, ldo int) {
	checkLUT16Dot(nb, tab, idx, ldi, rows, out, ldo)
	for r := range rows {
		var acc [LUT16Cols]int16
		for i, x := range idx[r*ldi : r*ldi+nb] {
			lo := tab[LUT16Cols*(LUT16Entries*2*i+int(x&15)):][:LUT16Cols]
			hi := tab[LUT16Cols*(LUT16Entries*(2*i+1)+int(x>>4)):][:LUT16Cols]
			for j := range acc {
				acc[j] += lo[j] + hi[j]
			}
		}
		o := out[r*ldo:][:LUT16Cols]
		for j, v := range acc {
			o[j] += int32(v)
		}
	}
}

func checkLUT16BuildTriples(tab []int16, b []int8, nt, ntab int) {
	if nt < 0 || ntab < nt || len(tab) < LUT16Cols*LUT16TripleEntries*ntab || len(b) < 3*LUT16Cols*nt {
		panic("gemm: LUT16 BuildTriples buffers too short")
	}
}

func checkLUT16TripleDot(nt int, tab []int16, mag, sign []byte, ldi, rows int, out []int32, ldo int) {
	if nt < 1 || nt > LUT16MaxTriples {
		panic("gemm: LUT16 TripleDot: nt out of range")
	}
	if rows < 1 || ldi < 0 || ldo < 0 || len(tab) < LUT16Cols*LUT16TripleEntries*(nt+nt%2) ||
		len(mag) < (rows-1)*ldi+(nt+1)/2 || len(sign) < (rows-1)*ldi+(nt+7)/8 || len(out) < (rows-1)*ldo+LUT16Cols {
		panic("gemm: LUT16 TripleDot buffers too short")
	}
}

// lut16BuildTriplesGo fills triples p0 .. nt-1 and zeroes nt .. ntab-1.
func lut16BuildTriplesGo(tab []int16, b []int8, p0, nt, ntab int) {
	const te = LUT16Cols * LUT16TripleEntries
	for i := p0; i < nt; i++ {
		t := tab[te*i:][:te]
		clear(t)
		for j := range LUT16Cols {
			x0 := int64(b[(3*i)*LUT16Cols+j])
			x1 := int64(b[(3*i+1)*LUT16Cols+j])
			x2 := int64(b[(3*i+2)*LUT16Cols+j])
			for m, d := range tripleDigits {
				v := int16(d[0]*x0 + d[1]*x1 + d[2]*x2)
				t[LUT16Cols*m+j], t[LUT16Cols*(16+m)+j] = v, -v
			}
		}
	}
	clear(tab[te*nt : te*ntab])
}

func lut16BuildTriplesGeneric(tab []int16, b []int8, nt, ntab int) {
	checkLUT16BuildTriples(tab, b, nt, ntab)
	lut16BuildTriplesGo(tab, b, 0, nt, ntab)
}

func lut16TripleDotGeneric(nt int, tab []int16, mag, sign []byte, ldi, rows int, out []int32, ldo int) {
	checkLUT16TripleDot(nt, tab, mag, sign, ldi, rows, out, ldo)
	for r := range rows {
		var acc [LUT16Cols]int16
		m, s := mag[r*ldi:], sign[r*ldi:]
		for i := range nt + nt%2 {
			e := int(m[i/2]>>(4*uint(i&1))&15) | int(s[min(i, nt-1)/8]>>uint(i%8)&1)<<4
			t := tab[LUT16Cols*(LUT16TripleEntries*i+e):][:LUT16Cols]
			for j := range acc {
				acc[j] += t[j]
			}
		}
		o := out[r*ldo:][:LUT16Cols]
		for j, v := range acc {
			o[j] += int32(v)
		}
	}
}
