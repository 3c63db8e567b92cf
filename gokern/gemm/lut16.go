package gemm

import "github.com/bitnet-go/bitnet_go/gokern/cpu"

// Wide LUT kernels for TL1 pairs (SIMD families only; see lut.go for the
// generic 2-column kernels, which remain the algorithm's oracle and its only
// version under -tags noasm or BITNET_GO_DISABLE=avx2).
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
// Indices 0..8 only, except in the padding pair (checked weights: see
// gokern/conv checkTL).

// LUT16Cols is the number of columns of a wide table.
const LUT16Cols = 16

// LUT16Entries is the number of entries of one pair's wide table.
const LUT16Entries = 9

// LUT16Pad is the number of zero entries after the last pair's table.
const LUT16Pad = 7

// LUT16MaxPairs bounds the pairs of one dot so that int16 sums are exact.
const LUT16MaxPairs = 126

// LUT16Kernels is a SIMD family's pair of wide LUT kernels.
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
}

var lut16Kernels = map[cpu.Family]*LUT16Kernels{}

// LUT16 returns the wide LUT kernels of the best usable family, or nil when
// none is (generic only: use the 2-column kernels of lut.go). It consults
// cpu.Pick on every call, so cpu.Override takes effect at once, and records
// the choice as "conv_lut".
func LUT16() *LUT16Kernels {
	var impl []cpu.Family
	for f := range lut16Kernels {
		impl = append(impl, f)
	}
	k := lut16Kernels[cpu.Pick(impl...)]
	if k == nil {
		cpu.Record("conv_lut", cpu.Generic)
		return nil
	}
	cpu.Record("conv_lut", k.Family)
	return k
}

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
