package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The LUT algorithm on the wide pair kernels of a SIMD family
// (gemm.LUT16Kernels, TL1 and I2_S weights): the same units, scale blocks and
// weight rows as lutConv, but B micro-panels of 16 columns, int16 tables of
// 9 entries x 16 columns per pair (288 bytes), and chunks of lut16KC values
// of k: 64 pairs, an 18 KiB table held in L1 while every row of the unit
// reads it, and |sum| <= 64*256 per chunk, well inside the int16 bound of
// the kernels (gemm.LUT16MaxPairs). Each chunk's int16 sums are widened and
// added to int32 accumulators, folded by foldI32 as everywhere else: the
// result is bit-identical to lutConv's.
//
// TL2 weights run the triple kernels on chunks of lut16KCTriples values
// (24 triples: a 24 KiB table of 32 entries x 16 columns per triple, |sum|
// <= 24*384 per chunk) and add the row's remainder pair (K%3 values at the
// end of a scale block) in Go, as lutConv does with PairDirect.
const (
	lut16KC        = 128
	lut16KCTriples = 72 // a multiple of 24: whole sign bytes per chunk
)

func lutConv16(d *Dims, lw *lutWeights, acts *activations, sc *scaler, out []float32, k *gemm.LUT16Kernels) {
	const nr = gemm.LUT16Cols
	nTile := roundUp(min(d.P, lutMaxCols), nr)
	nTiles := ceilDivPos(d.P, nTile)
	rowsPer := d.Og
	mBlocks, units := 0, 0
	count := func() {
		mBlocks = ceilDivPos(d.Og, rowsPer)
		units = d.N * d.Groups * nTiles * mBlocks
	}
	count()
	for th := par.Threads(); units < 2*th && rowsPer > 32; count() {
		rowsPer = ceilDivPos(rowsPer, 2)
	}
	per := d.C * d.H * d.W
	q := im2colSource(d, acts.q)
	pointwise := d.Pointwise()
	ldi := sc.nb * lw.segBytes // bytes from one output channel's row to the next
	kcL, tabLen := lut16KC, nr*(gemm.LUT16Entries*lut16KC/2+gemm.LUT16Pad)
	magBytes := 0
	if lw.triples {
		kcL, tabLen = lut16KCTriples, nr*gemm.LUT16TripleEntries*(lut16KCTriples/3)
		magBytes = (sc.bl/3 + 1) / 2
	}
	par.Run(par.Chunks(units, 1), func(_, lo, hi int) {
		buf := make([]int8, nTile*min(kcL, d.K))
		tab := make([]int16, tabLen)
		acc := make([]int32, rowsPer*nTile)
		for u := lo; u < hi && !par.Stopped(); u++ {
			mb, g, n, p0, cols, npn := splitUnit(d, u, mBlocks, nTiles, nTile, nr)
			r0 := mb * rowsPer
			rows := min(d.Og, r0+rowsPer) - r0
			xs := q[n*per : (n+1)*per]
			a := acts.a[n]
			for b := range sc.nb {
				kb0, kb1 := b*sc.bl, (b+1)*sc.bl
				clear(acc)
				for k0 := kb0; k0 < kb1; k0 += kcL {
					if par.Stopped() {
						return
					}
					kc := min(kcL, kb1-k0)
					c := (k0 - kb0) / kcL
					bb := buf[:npn*kc*nr]
					packB(bb, xs, d, pointwise, g, k0, kc, p0, cols, nr)
					seg0 := ((g*d.Og+r0)*sc.nb + b) * lw.segBytes
					if lw.triples {
						nt := kc / 3
						for jp := range npn {
							bp := bb[jp*kc*nr : (jp+1)*kc*nr]
							if nt > 0 {
								k.BuildTriples(tab, bp, nt, nt+nt%2)
								k.TripleDot(nt, tab, lw.seg[seg0+c*lut16KCTriples/6:], lw.seg[seg0+magBytes+c*lut16KCTriples/24:],
									ldi, rows, acc[jp*nr:], nTile)
							}
							if kc%3 != 0 {
								lut16Remainder(acc[jp*nr:], nTile, rows, lw.seg[seg0+lw.segBytes-1:], ldi, bp, kc, 3*nt)
							}
						}
						continue
					}
					nbytes := ((kc+1)/2 + 1) / 2
					idx := lw.seg[seg0+c*lut16KC/4:]
					for jp := range npn {
						k.Build(tab, bb[jp*kc*nr:(jp+1)*kc*nr], kc, 2*nbytes)
						k.Dot(nbytes, tab, idx, ldi, rows, acc[jp*nr:], nTile)
					}
				}
				for row := range rows {
					o := g*d.Og + r0 + row
					foldI32(sc, out[(n*d.O+o)*d.P+p0:][:cols], acc[row*nTile:][:cols], o, b, a)
				}
			}
		}
	})
}

// lut16Remainder adds, for each of rows rows, the TL2 remainder pair (the
// TL1 index in the low nibble of rem[r*ldi]) on rows k, k+1 of the
// 16-column micro-panel bp (kc rows) to acc[r*ldacc : r*ldacc+16].
func lut16Remainder(acc []int32, ldacc, rows int, rem []byte, ldi int, bp []int8, kc, k int) {
	const nr = gemm.LUT16Cols
	x0 := bp[k*nr:][:nr]
	var x1 [nr]int8
	if k+1 < kc {
		copy(x1[:], bp[(k+1)*nr:][:nr])
	}
	for r := range rows {
		idx := rem[r*ldi] & 15
		w0, w1 := int32(idx/3)-1, int32(idx%3)-1
		if idx > 8 {
			continue
		}
		o := acc[r*ldacc:][:nr]
		for j := range o {
			o[j] += w0*int32(x0[j]) + w1*int32(x1[j])
		}
	}
}
