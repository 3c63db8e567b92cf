package conv

import (
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

// LUT chunk lengths (values of k per table): a multiple of 4 (two pair
// indices a byte) for pairs, of 24 (eight sign bits a byte) for triples.
// A chunk's table is 16 entries of 8 bytes per group: 16 KiB for pairs,
// 10 KiB for triples, held in L1 while every row of the unit reads it.
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

// newLUTWeights lays w out for the LUT kernels. src is the weight as the
// caller passed it (TL1 / TL2 / I2_S), w the same values in I2_S.
func newLUTWeights(d *Dims, src, w Weights, sc *scaler) (*lutWeights, error) {
	lw := &lutWeights{triples: src.QType == ternary.TL2}
	q := ternary.TL1
	if lw.triples {
		q = ternary.TL2
	}
	if sc.nb == 1 && src.QType == q {
		lw.seg, lw.segBytes = src.Packed, len(src.Packed)/d.O
		return lw, nil
	}
	vals := make([]int8, d.WLen)
	if err := ternary.Unpack(w.Packed, vals); err != nil {
		return nil, errs.Value("weight: %v", err)
	}
	rows := d.O * sc.nb
	n, err := ternary.PackedLenQ(q, d.WLen, rows)
	if err != nil {
		return nil, err
	}
	lw.seg = make([]byte, n)
	if err := ternary.PackQ(q, vals, rows, lw.seg); err != nil {
		return nil, err
	}
	lw.segBytes = n / rows
	return lw, nil
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
		p.tabLen = gemm.LUTEntries * (lutKCTriples / 3)
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

// runLUT runs the LUT algorithm on quantized activations; src is the weight
// as passed, w the same values in I2_S.
func runLUT(d *Dims, src, w Weights, acts *activations, sc *scaler, out []float32) error {
	if acts == nil {
		return errs.Value("algorithm 'lut' needs int8 activations (act_bits=8)")
	}
	lw, err := newLUTWeights(d, src, w, sc)
	if err != nil {
		return err
	}
	lutConv(d, lw, acts, sc, out)
	return nil
}

// lutConv: per unit (sample, group, tile of output positions, block of
// output channels), per scale block and chunk of k, the activations are
// packed into B micro-panels of 2 columns (as im2col does), and for each
// micro-panel the chunk's tables are built once and read by every row.
func lutConv(d *Dims, lw *lutWeights, acts *activations, sc *scaler, out []float32) {
	const nr = gemm.LUTCols
	p := planLUT(d, lw.triples)
	per := d.C * d.H * d.W
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
		for u := lo; u < hi; u++ {
			mb := u % p.mBlocks
			tile := u / p.mBlocks % p.nTiles
			g := u / (p.mBlocks * p.nTiles) % d.Groups
			n := u / (p.mBlocks * p.nTiles * d.Groups)
			p0 := tile * p.nTile
			cols := min(p.nTile, d.P-p0)
			npn := ceilDivPos(cols, nr)
			r0 := mb * p.rows
			r1 := min(d.Og, r0+p.rows)
			xs := acts.q[n*per : (n+1)*per]
			a := acts.a[n]
			for b := range sc.nb {
				kb0, kb1 := b*sc.bl, (b+1)*sc.bl
				clear(acc)
				for k0 := kb0; k0 < kb1; k0 += p.kcL {
					kc := min(p.kcL, kb1-k0)
					c := (k0 - kb0) / p.kcL
					bb := buf[:npn*kc*nr]
					if pointwise {
						packRows(bb, xs, d, g*d.Cg+k0, kc, p0, cols, nr)
					} else {
						packIm2col(bb, xs, d, g*d.Cg, k0, kc, p0, cols, nr)
					}
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

// preferLUT is the planner's rule for int8 activations (Auto): run the LUT
// algorithm where it measured faster than multiply-add on this project's
// bench machine. See lutRule.
func preferLUT(d *Dims) bool {
	return d.N*d.P <= 4 && d.K >= 256 && d.Og >= 64
}
