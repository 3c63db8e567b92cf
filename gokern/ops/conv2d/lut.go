package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The LUT algorithm (int8 activations only): the lookup-table kernels of
// gokern/gemm (see lut.go there) on the same int32 accumulators as the
// multiply-add kernels, folded by the same foldI32, so every output is
// bit-identical to the other algorithms'.
//
// Weights are read in TL1 (pairs) or TL2 (triples) row layout, one row per
// scale segment: with one scale per tensor the segments are the O rows of K
// values and TL1 / TL2 weights are used as given; with per-block scales each
// row of K is cut into its K/BlockSize blocks and each block is packed as a
// row of its own, so that no pair or triple straddles two scales. A TL2
// weight runs the triple kernel, TL1 and I2_S the pair kernel.
//
// Where a SIMD family provides them (gemm.LUT16: AVX2), lutConv16 (lut16.go)
// runs the same rows on the wide kernels: 16-column micro-panels, int16
// tables, int32 accumulators, bit-identical to lutConv, which stays the
// version under -tags noasm and BITNET_GO_DISABLE=avx2.

// LUT chunk lengths (values of k per table): a multiple of 4 (two pair
// indices a byte) for pairs, of 24 (eight sign bits a byte) for triples.
// A chunk's table is 16 (pairs) or 32 (triples) entries of 8 bytes per
// group: 16 KiB for pairs, 20 KiB for triples, held in L1 while every row of
// the unit reads it.
const (
	lutKCPairs   = 256
	lutKCTriples = 240
	lutMaxCols   = 64 // output positions per unit at most
)

// lutWeights is a weight in LUT row layout.
type lutWeights struct {
	triples  bool
	seg      []byte // rows*nb segments of segBytes each
	segBytes int
}

// newLUTWeights lays w (I2_S, TL1 or TL2, checked) out for the LUT kernels.
func newLUTWeights(d *Dims, w Weights, sc *scaler) (*lutWeights, error) {
	lw := &lutWeights{triples: w.QType == ternary.TL2}
	q := ternary.TL1
	if lw.triples {
		q = ternary.TL2
	}
	if sc.nb == 1 && w.QType == q {
		lw.seg, lw.segBytes = w.Packed, len(w.Packed)/d.O
		return lw, nil
	}
	vals := make([]int8, d.WLen)
	if err := ternary.UnpackQ(w.QType, w.Packed, d.O, vals); err != nil {
		return nil, errs.Value("weight: %v", err)
	}
	rows := d.O * sc.nb
	n, err := ternary.PackedLenQ(q, d.WLen, rows)
	if err != nil {
		return nil, err
	}
	lw.seg = make([]byte, n)
	lw.segBytes = n / rows
	if q == ternary.TL1 {
		packPairs(vals, rows, sc.bl, lw.seg)
		return lw, nil
	}
	if err := ternary.PackQ(q, vals, rows, lw.seg); err != nil {
		return nil, err
	}
	return lw, nil
}

// packPairs is ternary.PackQ(TL1, vals, rows, dst) for checked values
// (-1, 0, +1) of rows of k, four values a byte, in parallel: the I2_S
// weights' conversion, once per call.
func packPairs(vals []int8, rows, k int, dst []byte) {
	rb := ternary.TL1RowBytes(k)
	par.Run(par.Chunks(rows, max(1, 1<<15/max(k, 1))), func(_, lo, hi int) {
		for r := lo; r < hi && !par.Stopped(); r++ {
			w := vals[r*k : (r+1)*k]
			out := dst[r*rb : (r+1)*rb]
			full := k / 4
			for j := range full {
				v := (*[4]int8)(w[4*j:])
				out[j] = byte(3*v[0]+v[1]+4) | byte(3*v[2]+v[3]+4)<<4
			}
			if full < rb {
				var v [4]int8
				copy(v[:], w[4*full:])
				b := byte(3*v[0] + v[1] + 4)
				if 4*full+2 < k {
					b |= byte(3*v[2]+v[3]+4) << 4
				}
				out[full] = b
			}
		}
	})
}

// wantLUT reports whether Conv2D runs the LUT algorithm: on request, or by
// the planner's rule (preferLUT, with the wide kernels k) for int8
// activations.
func wantLUT(d *Dims, opt Options, q ternary.QType, k *gemm.LUT16Kernels) bool {
	return opt.Algo == LUT || (opt.Algo == Auto && opt.ActBits == 8 && preferLUT(d, q, k))
}

// SWAR masks over the nibbles of a uint64.
const (
	nib7 = 0x7777777777777777
	nib8 = 0x8888888888888888
)

// badNibbles returns the bit 3 of every nibble of x above max (8: TL1
// indices; 13: TL2 magnitudes), or 0 when none is. No carry crosses a
// nibble: (n&7)+7 <= 14 and n&7 < 8.
func badNibbles(x uint64, max int) uint64 {
	if max == 8 { // n > 8: bit 3 and any of bits 0..2
		return x & ((x & nib7) + nib7) & nib8
	}
	return x & (x << 1) & (x << 2) & nib8 // n >= 14: bits 3, 2 and 1
}

// checkNibbles returns the index of the first of the first n nibbles of src
// (low nibble first) above max, or -1.
func checkNibbles(src []byte, n, max int) int {
	full := n / 16
	for i := range full {
		b := src[8*i : 8*i+8]
		x := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if badNibbles(x, max) != 0 {
			for j := 16 * i; j < 16*i+16; j++ {
				if int(src[j/2]>>(4*uint(j&1))&15) > max {
					return j
				}
			}
		}
	}
	for j := 16 * full; j < n; j++ {
		if int(src[j/2]>>(4*uint(j&1))&15) > max {
			return j
		}
	}
	return -1
}

// checkTL validates a TL1 / TL2 weight the LUT kernels read as it is: its
// length and every index they read (TL1 indices <= 8, TL2 magnitudes <= 13,
// the remainder index <= 8), as ternary.UnpackQ would.
func checkTL(d *Dims, w Weights) error {
	want, err := checkPacked(d, w)
	if err != nil {
		return err
	}
	rb := want / d.O
	chunks := par.Chunks(d.O, max(1, 1<<16/max(rb, 1)))
	bad := make([]error, len(chunks)-1)
	par.Run(chunks, func(c, lo, hi int) {
		for r := lo; r < hi && !par.Stopped(); r++ {
			row := w.Packed[r*rb : (r+1)*rb]
			if w.QType == ternary.TL1 {
				if j := checkNibbles(row, (d.K+1)/2, 8); j >= 0 {
					bad[c] = errs.Value("weight: row %d: invalid TL1 index %d", r, row[j/2]>>(4*uint(j&1))&15)
					return
				}
				if d.K%2 == 1 && row[rb-1]>>(4*uint((d.K/2)&1))&15%3 != 1 {
					bad[c] = errs.Value("weight: row %d: invalid TL1 padding value (the last pair of an odd K must be (w, 0))", r)
					return
				}
				continue
			}
			t := d.K / 3
			if j := checkNibbles(row, t, 13); j >= 0 {
				bad[c] = errs.Value("weight: row %d: invalid TL2 magnitude %d in triple %d", r, row[j/2]>>(4*uint(j&1))&15, j)
				return
			}
			if rem := row[rb-1] & 15; d.K%3 != 0 && (rem > 8 || (d.K%3 == 1 && rem%3 != 1)) {
				bad[c] = errs.Value("weight: row %d: invalid TL2 remainder index %d", r, rem)
				return
			}
		}
	})
	for _, e := range bad {
		if e != nil {
			return e
		}
	}
	return nil
}

// lutPlan is the tiling of the LUT algorithm.
type lutPlan struct {
	nTile, nTiles  int // output positions per unit (a multiple of 2), units per (sample, group)
	rows, mBlocks  int // output channels per unit, blocks per group
	units          int
	kcL            int
	tabLen, bufLen int
}

func planLUT(d *Dims, triples bool) lutPlan {
	var p lutPlan
	p.kcL = lutKCPairs
	p.tabLen = gemm.LUTEntries * (lutKCPairs / 2)
	if triples {
		p.kcL = lutKCTriples
		p.tabLen = gemm.TripleEntries * (lutKCTriples / 3)
	}
	p.nTile = roundUp(min(d.P, lutMaxCols), gemm.LUTCols)
	p.nTiles = ceilDivPos(d.P, p.nTile)
	p.rows = d.Og
	count := func() {
		p.mBlocks = ceilDivPos(d.Og, p.rows)
		p.units = d.N * d.Groups * p.nTiles * p.mBlocks
	}
	count()
	th := par.Threads()
	for p.units < 2*th && p.rows > 32 {
		p.rows = ceilDivPos(p.rows, 2)
		count()
	}
	p.bufLen = p.nTile * min(p.kcL, d.K)
	return p
}

// runLUT runs the LUT algorithm on quantized activations with the wide
// kernels k (lut16), or the 2-column Go kernels where k is the generic set
// (lut), and returns the kernel's name; w is I2_S, TL1 or TL2 (checked).
func runLUT(d *Dims, w Weights, acts *activations, sc *scaler, out []float32, k *gemm.LUT16Kernels) (string, error) {
	if acts == nil {
		return "", errs.Value("algorithm 'lut' needs int8 activations (act_bits=8)")
	}
	lw, err := newLUTWeights(d, w, sc)
	if err != nil {
		return "", err
	}
	if k.Family != cpu.Generic {
		lutConv16(d, lw, acts, sc, out, k)
		return kernelName("lut16", k.Family), nil
	}
	lutConv(d, lw, acts, sc, out)
	return kernelName("lut", cpu.Generic), nil
}

// lutConv: per unit (sample, group, tile of output positions, block of
// output channels), per scale block and chunk of k, the activations are
// packed into B micro-panels of 2 columns (as im2col does), and for each
// micro-panel the chunk's tables are built once and read by every row.
func lutConv(d *Dims, lw *lutWeights, acts *activations, sc *scaler, out []float32) {
	const nr = gemm.LUTCols
	p := planLUT(d, lw.triples)
	per := d.C * d.H * d.W
	q := im2colSource(d, acts.q)
	pointwise := d.Pointwise()
	magBytes := 0
	if lw.triples {
		magBytes = (sc.bl/3 + 1) / 2
	}
	par.Run(par.Chunks(p.units, 1), func(_, lo, hi int) {
		buf := make([]int8, p.bufLen)
		tab := make([]uint64, p.tabLen)
		npnMax := p.nTile / nr
		acc := make([]uint64, p.rows*npnMax)
		ti := make([]int32, p.nTile)
		for u := lo; u < hi && !par.Stopped(); u++ {
			mb, g, n, p0, cols, npn := splitUnit(d, u, p.mBlocks, p.nTiles, p.nTile, nr)
			r0 := mb * p.rows
			r1 := min(d.Og, r0+p.rows)
			xs := q[n*per : (n+1)*per]
			a := acts.a[n]
			for b := range sc.nb {
				kb0, kb1 := b*sc.bl, (b+1)*sc.bl
				clear(acc)
				for k0 := kb0; k0 < kb1; k0 += p.kcL {
					if par.Stopped() {
						return
					}
					kc := min(p.kcL, kb1-k0)
					c := (k0 - kb0) / p.kcL
					bb := buf[:npn*kc*nr]
					packB(bb, xs, d, pointwise, g, k0, kc, p0, cols, nr)
					for jp := range npn {
						bp := bb[jp*kc*nr : (jp+1)*kc*nr]
						if lw.triples {
							nt := kc / 3
							gemm.BuildTripleTables(tab, bp, kc, nt)
							for row := r0; row < r1; row++ {
								seg := lw.seg[((g*d.Og+row)*sc.nb+b)*lw.segBytes:][:lw.segBytes]
								s := gemm.TripleDot(tab, seg[c*lutKCTriples/6:], seg[magBytes+c*lutKCTriples/24:], nt)
								if kc%3 != 0 {
									s += gemm.PairDirect(seg[len(seg)-1]&15, bp, kc, 3*nt)
								}
								acc[(row-r0)*npnMax+jp] += s
							}
						} else {
							nbytes := ((kc+1)/2 + 1) / 2
							gemm.BuildPairTables(tab, bp, kc, 2*nbytes)
							for row := r0; row < r1; row++ {
								seg := lw.seg[((g*d.Og+row)*sc.nb+b)*lw.segBytes:]
								acc[(row-r0)*npnMax+jp] += gemm.PairDot(tab, seg[c*lutKCPairs/4:][:nbytes])
							}
						}
					}
				}
				for row := r0; row < r1; row++ {
					for jp := range npn {
						v0, v1 := gemm.LUTLanes(acc[(row-r0)*npnMax+jp])
						ti[jp*nr], ti[jp*nr+1] = v0, v1
					}
					o := g*d.Og + row
					foldI32(sc, out[(n*d.O+o)*d.P+p0:][:cols], ti[:cols], o, b, a)
				}
			}
		}
	})
}

// preferLUT is the planner's rule for int8 activations (Auto): whether the
// LUT algorithm, with the wide kernels k or (k generic) the 2-column Go
// kernels, beats multiply-add for d with a weight in q. Measured on the
// 2-vCPU AMD EPYC Zen 4 (1 thread, medians of 15 calls, conv2d_with_info
// with algorithm "lut" against "im2col" / "direct" on the same TL weight):
//
//   - I2_S: never. The LUT repacks the weight as TL1 on every call, and no
//     rule was stable over the shapes measured. TQ2_0 and TQ1_0 are
//     converted to I2_S first (asI2S) and follow it.
//   - TL1 and TL2 with SIMD LUT kernels (lut16/avx2): never. Multiply-add
//     reads their conversion to I2_S, kept in the weight cache (asI2S), and
//     beat the LUT on every shape measured, with the avx512vnni and with
//     the avx2 multiply-add kernels: 2-5x on 3x3 layers of 49-392 output
//     positions (3x3 512@7 N=1: lut 2.5 ms, implicit GEMM 0.66 ms), 9-55x
//     on linear layers (4096x4096 N=8: 37 ms against 0.8 ms; 1024x1024
//     N=1: 0.27 against 0.03 ms); within noise only on a 1x1 64@4 layer
//     (16-19 us either way). The rule this replaces (LUT up to 1024 output
//     positions) was measured when every call converted TL to I2_S.
//   - TL1 and TL2 with the generic kernels (no SIMD family: other
//     architectures, BITNET_GO_DISABLE=all): the shapes that run as the
//     GEMV (1x1, stride 1, no padding, one group, at most gemvMaxP
//     positions: linear layers), where the Go LUT took 0.31-0.56x the
//     generic GEMV's time with TL1 and 0.44-0.82x with TL2 (4096x4096 N=1
//     4.7 against 12.8 ms; one 100x300 N=3 TL2 layer 1.16x, within noise).
//     On the other shapes measured (3x3 and 1x1 layers of 16 positions)
//     im2col was 1.1-2.1x faster.
//   - Never for fewer than 16 output channels per group (depthwise
//     included): a table then serves too few rows. This guard is a
//     heuristic, not a measurement.
func preferLUT(d *Dims, q ternary.QType, k *gemm.LUT16Kernels) bool {
	if d.Og < 16 || (q != ternary.TL1 && q != ternary.TL2) {
		return false
	}
	return k.Family == cpu.Generic && d.Pointwise() && useGEMV(d)
}
