package conv

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Tile budget of the GEMM algorithms: k values per packed B chunk, and the
// bytes of one B chunk and of one tile of partial sums (each, per worker).
const (
	kcMax     = 256
	tileBytes = 128 << 10
	maxCols   = 256 // columns (output positions) per tile at most
)

type elem interface{ float32 | int8 }

type accum interface{ float32 | int32 }

// microFn and foldFn are the shapes of a gemm micro-kernel and of a fold.
type (
	microFn[T elem, A accum] func(kc int, a []byte, b []T, t []A, ldt int, add bool)
	foldFn[A accum]          func(s *scaler, dst []float32, src []A, o, b int, a float32)
)

func roundUp(v, m int) int { return (v + m - 1) / m * m }

func ceilDivPos(a, b int) int { return (a + b - 1) / b }

// gemmPlan is the tiling of a GEMM convolution.
type gemmPlan struct {
	nTile            int // output positions per tile (a multiple of nr)
	nTiles           int // tiles per (sample, group)
	mcPanels         int // A panels (MR rows each) per block of rows
	mBlocks          int // row blocks per group
	units            int // N * groups * nTiles * mBlocks
	kcCap            int // longest B chunk
	bufElems, tElems int // per-worker buffer sizes
}

// planGEMM sizes the tiles within tileBytes and splits the work into at least
// par.Threads() units where the shape allows it: first smaller column
// tiles, then blocks of rows.
func planGEMM(d *Dims, nr, esize int) gemmPlan {
	np := gemm.Panels(d.Og)
	var p gemmPlan
	p.kcCap = min(kcMax, d.K)
	p.nTile = roundUp(min(d.P, maxCols, max(nr, tileBytes/(kcMax*esize))), nr)
	p.mcPanels = min(np, max(1, tileBytes/(gemm.MR*p.nTile*4)))
	count := func() {
		p.nTiles = ceilDivPos(d.P, p.nTile)
		p.mBlocks = ceilDivPos(np, p.mcPanels)
		p.units = d.N * d.Groups * p.nTiles * p.mBlocks
	}
	count()
	th := par.Threads()
	for p.units < th && p.nTile > 8*nr {
		p.nTile = roundUp(p.nTile/2, nr)
		count()
	}
	for p.units < th && p.mcPanels > 1 {
		p.mcPanels = ceilDivPos(p.mcPanels, 2)
		count()
	}
	p.bufElems = p.kcCap * p.nTile
	p.tElems = p.mcPanels * gemm.MR * p.nTile
	return p
}

// gemmConv runs the im2col algorithm (or, with pointwise, the 1x1 GEMM on
// the input): per unit (sample, group, tile of output positions, block of
// output channels) it packs chunks of at most kcMax rows of the im2col matrix
// straight from src into B micro-panels, never the whole matrix, runs the
// micro-kernel over every (A panel, B micro-panel) pair, and folds each scale
// block's partial sums into out.
func gemmConv[T elem, A accum](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	pointwise bool, nr int, micro microFn[T, A], fold foldFn[A]) {
	var zero T
	p := planGEMM(d, nr, int(unsafe.Sizeof(zero)))
	np := gemm.Panels(d.Og)
	per := d.C * d.H * d.W
	ldt := p.nTile
	par.Run(par.Chunks(p.units, 1), func(_, lo, hi int) {
		buf := make([]T, p.bufElems)
		t := make([]A, p.tElems)
		var ihb, iwb []int
		if !pointwise {
			ihb, iwb = make([]int, p.nTile), make([]int, p.nTile)
		}
		for u := lo; u < hi; u++ {
			mb := u % p.mBlocks
			tile := u / p.mBlocks % p.nTiles
			g := u / (p.mBlocks * p.nTiles) % d.Groups
			n := u / (p.mBlocks * p.nTiles * d.Groups)
			p0 := tile * p.nTile
			cols := min(p.nTile, d.P-p0)
			npn := ceilDivPos(cols, nr)
			i0 := mb * p.mcPanels
			i1 := min(np, i0+p.mcPanels)
			xs := src[n*per : (n+1)*per]
			if !pointwise {
				oh, ow := p0/d.Wo, p0%d.Wo
				for q := range cols {
					ihb[q], iwb[q] = oh*d.StrideH-d.PadT, ow*d.StrideW-d.PadL
					if ow++; ow == d.Wo {
						ow = 0
						oh++
					}
				}
			}
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			for b := range sc.nb {
				kb0, kb1 := b*sc.bl, (b+1)*sc.bl
				for k0 := kb0; k0 < kb1; k0 += kcMax {
					kc := min(kcMax, kb1-k0)
					bb := buf[:npn*kc*nr]
					if pointwise {
						packRows(bb, xs, d, g*d.Cg+k0, kc, p0, cols, nr)
					} else {
						packIm2col(bb, xs, d, g*d.Cg, k0, kc, cols, nr, ihb, iwb)
					}
					for jp := range npn {
						bp := bb[jp*kc*nr : (jp+1)*kc*nr]
						for i := i0; i < i1; i++ {
							ap := apan[(g*np+i)*d.K+k0:][:kc]
							micro(kc, ap, bp, t[(i-i0)*gemm.MR*ldt+jp*nr:], ldt, k0 != kb0)
						}
					}
				}
				for i := i0; i < i1; i++ {
					for r := range gemm.MR {
						row := i*gemm.MR + r
						if row >= d.Og {
							break
						}
						o := g*d.Og + row
						dst := out[(n*d.O+o)*d.P+p0:][:cols]
						fold(sc, dst, t[((i-i0)*gemm.MR+r)*ldt:][:cols], o, b, a)
					}
				}
			}
		}
	})
}

// packRows packs rows ch .. ch+kc of a sample's (C, H*W) matrix, columns
// p0 .. p0+cols, into B micro-panels of nr columns (zeros past cols).
func packRows[T elem](dst []T, xs []T, d *Dims, ch, kc, p0, cols, nr int) {
	npn := ceilDivPos(cols, nr)
	full := cols / nr
	for kk := range kc {
		src := xs[(ch+kk)*d.P+p0:][:cols]
		for jp := range full {
			row := dst[(jp*kc+kk)*nr:][:nr]
			copySmall(row, src[jp*nr:][:nr])
		}
		if full < npn {
			row := dst[(full*kc+kk)*nr:][:nr]
			q0 := full * nr
			for l := range row {
				if q0+l < cols {
					row[l] = src[q0+l]
				} else {
					row[l] = 0
				}
			}
		}
	}
}

func copySmall[T elem](dst, src []T) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = v
	}
}

// packIm2col packs rows k0 .. k0+kc of the im2col matrix of one sample and
// group (input channels cbase ..) for the tile's cols output positions, whose
// input origins (top-left of the receptive field, padding included) are
// ihb/iwb, into B micro-panels of nr columns. Row k is (c, i, j) =
// (k / (kH*kW), k / kW % kH, k % kW), the order of the flattened weight.
func packIm2col[T elem](dst []T, xs []T, d *Dims, cbase, k0, kc, cols, nr int, ihb, iwb []int) {
	khw := d.KH * d.KW
	hw := d.H * d.W
	npn := ceilDivPos(cols, nr)
	ihb, iwb = ihb[:cols], iwb[:cols]
	h, w := uint(d.H), uint(d.W)
	for kk := range kc {
		k := k0 + kk
		c, r := k/khw, k%khw
		dh, dw := r/d.KW*d.DilH, r%d.KW*d.DilW
		plane := xs[(cbase+c)*hw:][:hw]
		for jp := range npn {
			row := dst[(jp*kc+kk)*nr:][:nr]
			q0 := jp * nr
			for l := range row {
				var v T
				if q := q0 + l; q < cols {
					ih, iw := ihb[q]+dh, iwb[q]+dw
					if uint(ih) < h && uint(iw) < w {
						v = plane[ih*d.W+iw]
					}
				}
				row[l] = v
			}
		}
	}
}
