package conv2d

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Tile budget of the GEMM algorithms: k values per packed B chunk at most,
// the bytes of one B micro-panel (it stays in L1 while every A panel of the
// tile runs over it), and the bytes of one B chunk and of one tile of
// partial sums (each, per worker).
const (
	kcMax      = 256
	microBytes = 32 << 10
	tileBytes  = 64 << 10
	maxCols    = 256 // columns (output positions) per tile at most
)

type elem interface{ float32 | int8 }

type accum interface{ float32 | int32 }

// microFn and foldFn are the shapes of a gemm micro-kernel and of a fold.
type (
	microFn[T elem, A accum] func(kc int, a []byte, b []T, t []A, ldt int, add bool)
	foldFn[A accum]          func(s *scaler, dst []float32, src []A, o, b int, a float32)
	// prepFn is gemm.Kernels.PrepareI8's shape: the micro-panel the
	// micro-kernel reads, made from a packed one (nil: the packed one).
	prepFn[T elem] func(src []T, kc int, buf *[]T) []T
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
// par.Threads() units where the shape allows it and each unit keeps
// par.MinWork(): first smaller column tiles, then blocks of rows.
func planGEMM(d *Dims, nr, esize int) gemmPlan {
	np := gemm.Panels(d.Og)
	var p gemmPlan
	// Wide float32 micro-panels (AVX-512: 64 columns) take shorter chunks.
	kc := min(kcMax, max(4, microBytes/(nr*esize)&^3))
	p.kcCap = min(kc, d.K)
	p.nTile = roundUp(min(d.P, maxCols, max(nr, tileBytes/(kc*esize))), nr)
	p.mcPanels = min(np, max(1, tileBytes/(gemm.MR*p.nTile*4)))
	count := func() {
		p.nTiles = ceilDivPos(d.P, p.nTile)
		p.mBlocks = ceilDivPos(np, p.mcPanels)
		p.units = d.N * d.Groups * p.nTiles * p.mBlocks
	}
	count()
	th := par.Threads()
	// split while there are fewer units than threads and each half would
	// still be worth a thread (par.MinWork multiply-adds)
	work := d.N * d.Groups * d.P * d.Og * d.K
	more := func() bool { return p.units < th && work/p.units >= 2*par.MinWork() }
	for more() && p.nTile > 8*nr {
		p.nTile = roundUp(p.nTile/2, nr)
		count()
	}
	for more() && p.mcPanels > 1 {
		p.mcPanels = ceilDivPos(p.mcPanels, 2)
		count()
	}
	p.bufElems = p.kcCap * p.nTile
	p.tElems = p.mcPanels * gemm.MR * p.nTile
	return p
}

// gemmConv runs the im2col algorithm (or, with pointwise, the 1x1 GEMM on
// the input): per unit (sample, group, tile of output positions, block of
// output channels) it packs chunks of at most kcCap rows of the im2col matrix
// straight from src into B micro-panels, never the whole matrix, runs the
// micro-kernel over every (A panel, B micro-panel) pair, and folds each scale
// block's partial sums into out.
func gemmConv[T elem, A accum](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	pointwise bool, nr int, micro microFn[T, A], prep prepFn[T], fold foldFn[A]) {
	var zero T
	p := planGEMM(d, nr, int(unsafe.Sizeof(zero)))
	np := gemm.Panels(d.Og)
	per := d.C * d.H * d.W
	src = im2colSource(d, src)
	ldt := p.nTile
	par.Run(par.ChunksWork(p.units, p.nTile*p.mcPanels*gemm.MR*d.K), func(_, lo, hi int) {
		buf := make([]T, p.bufElems)
		t := make([]A, p.tElems)
		var prepped []T
		for u := lo; u < hi && !par.Stopped(); u++ {
			mb, g, n, p0, cols, npn := splitUnit(d, u, p.mBlocks, p.nTiles, p.nTile, nr)
			i0 := mb * p.mcPanels
			i1 := min(np, i0+p.mcPanels)
			xs := src[n*per : (n+1)*per]
			var a float32
			if acts != nil {
				a = acts.a[n]
			}
			for b := range sc.nb {
				kb0, kb1 := b*sc.bl, (b+1)*sc.bl
				for k0 := kb0; k0 < kb1; k0 += p.kcCap {
					if par.Stopped() { // a unit runs K/kcCap chunks
						return
					}
					kc := min(p.kcCap, kb1-k0)
					bb := buf[:npn*kc*nr]
					packB(bb, xs, d, pointwise, g, k0, kc, p0, cols, nr)
					for jp := range npn {
						bp := bb[jp*kc*nr : (jp+1)*kc*nr]
						if prep != nil {
							bp = prep(bp, kc, &prepped)
						}
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

// packB packs rows k0 .. k0+kc of group g's B matrix of one sample, for the
// cols output positions from p0, into micro-panels of nr columns: the input
// rows themselves (pointwise: the 1x1 GEMM) or the im2col rows (xs as
// im2colSource returns it).
func packB[T elem](dst, xs []T, d *Dims, pointwise bool, g, k0, kc, p0, cols, nr int) {
	if pointwise {
		packRows(dst, xs, d, g*d.Cg+k0, kc, p0, cols, nr)
		return
	}
	packIm2col(dst, xs, d, g*d.Cg, k0, kc, p0, cols, nr)
}

// packRows packs rows ch .. ch+kc of a sample's (C, H*W) matrix, columns
// p0 .. p0+cols, into B micro-panels of nr columns (zeros past cols).
func packRows[T elem](dst []T, xs []T, d *Dims, ch, kc, p0, cols, nr int) {
	npn := ceilDivPos(cols, nr)
	full := cols / nr
	for kk := range kc {
		src := xs[(ch+kk)*d.P+p0:][:cols]
		if nr == 16 { // the AVX2 width: fixed-size copies the compiler inlines
			for jp := range full {
				*(*[16]T)(dst[(jp*kc+kk)*16:]) = [16]T(src[jp*16:])
			}
		} else {
			for jp := range full {
				row := dst[(jp*kc+kk)*nr:][:nr]
				copySmall(row, src[jp*nr:][:nr])
			}
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

// im2colSource returns the input as packIm2col reads it: x itself when
// the phase order is the identity (phased false: every pointwise shape);
// otherwise a copy with every row (W values) grouped by column phase modulo
// the stride, [x0, xs, x2s, ..., x1, x1+s, ...], so that the columns
// ow*s+off of one kernel column are one contiguous run.
func im2colSource[T elem](d *Dims, x []T) []T {
	if !phased(d) {
		return x
	}
	s, w := d.StrideW, d.W
	dst := make([]T, len(x))
	rows := len(x) / w
	par.Run(par.ChunksWork(rows, w), func(_, lo, hi int) {
		for r := lo; r < hi && !par.Stopped(); r++ {
			src, out := x[r*w:][:w], dst[r*w:][:w]
			i := 0
			for ph := range s { // s < w (phased)
				for c := ph; c < w; c += s {
					out[i] = src[c]
					i++
				}
			}
		}
	})
	return dst
}

// phased reports whether im2colSource reorders the rows of d's input: for
// a column stride of 1, and for one of at least W (each phase then holds
// at most one column, in order), the phase order is the identity.
func phased(d *Dims) bool { return d.StrideW > 1 && d.StrideW < d.W }

// phasePos returns where column iw of a row of w values sits in the row's
// phase order for stride s (im2colSource): after the ceil((w-r)/s) values of
// every phase r < iw%s.
func phasePos(iw, w, s int) int {
	ph := iw % s
	return ph*(w/s) + min(ph, w%s) + iw/s
}

// packIm2col packs rows k0 .. k0+kc of the im2col matrix of one sample and
// group (input channels cbase ..) for the cols output positions starting at
// p0, into B micro-panels of nr columns (zeros past cols); xs is the sample
// as im2colSource returns it. Row k is (c, i, j) = (k / (kH*kW),
// k / kW % kH, k % kW), the order of the flattened weight. Positions are
// walked one output row at a time: the input row and the range of columns
// inside the image are computed once per row, so the inner loops only copy
// a contiguous run (for any stride, thanks to the phase order) or write the
// zeros of the padding, a micro-panel segment at a time (panelCursor).
func packIm2col[T elem](dst []T, xs []T, d *Dims, cbase, k0, kc, p0, cols, nr int) {
	khw := d.KH * d.KW
	hw := d.H * d.W
	npn := ceilDivPos(cols, nr)
	sw, ph := d.StrideW, phased(d)
	for kk := range kc {
		k := k0 + kk
		c, r := k/khw, k%khw
		offH := r/d.KW*d.DilH - d.PadT
		offW := r%d.KW*d.DilW - d.PadL
		owLo, owHi := validRange(d.Wo, d.W, sw, offW)
		plane := xs[(cbase+c)*hw:][:hw]
		pc := panelCursor{di: kk * nr, nr: nr, step: (kc - 1) * nr}
		oh, ow0 := p0/d.Wo, p0%d.Wo
		for q := 0; q < cols; oh, ow0 = oh+1, 0 {
			ow1 := min(d.Wo, ow0+cols-q)
			q += ow1 - ow0
			ih := oh*d.StrideH + offH
			lo, hi := max(ow0, owLo), min(ow1, owHi)
			if ih < 0 || ih >= d.H || hi <= lo {
				zeroRun(dst, &pc, ow1-ow0)
				continue
			}
			row := plane[ih*d.W:][:d.W]
			zeroRun(dst, &pc, lo-ow0)
			st := lo*sw + offW
			if ph {
				st = phasePos(st, d.W, sw)
			}
			copyRun(dst, &pc, row[st:st+hi-lo])
			zeroRun(dst, &pc, ow1-hi)
		}
		zeroRun(dst, &pc, npn*nr-cols)
	}
}

// panelCursor is the write position of packIm2col in one row k of the B
// micro-panels: index di, lane within the current micro-panel; from the last
// lane of a micro-panel, step more elements lead to the first of the next.
type panelCursor struct{ di, lane, nr, step int }

// advance moves the cursor past m (<= nr-lane) values just written.
func (pc *panelCursor) advance(m int) {
	pc.di += m
	if pc.lane += m; pc.lane == pc.nr {
		pc.lane = 0
		pc.di += pc.step
	}
}

// copyRun writes consecutive columns.
func copyRun[T elem](dst []T, pc *panelCursor, vals []T) {
	for len(vals) > 0 {
		m := min(pc.nr-pc.lane, len(vals))
		copy(dst[pc.di:pc.di+m], vals[:m])
		vals = vals[m:]
		pc.advance(m)
	}
}

// zeroRun writes n zero columns.
func zeroRun[T elem](dst []T, pc *panelCursor, n int) {
	for n > 0 {
		m := min(pc.nr-pc.lane, n)
		clear(dst[pc.di : pc.di+m])
		n -= m
		pc.advance(m)
	}
}

// splitUnit decomposes a work unit of the tiled drivers (im2col, LUT):
// units run over (sample n, group g, output tile, row block mb), row blocks
// fastest, so u = ((n*groups + g)*nTiles + tile)*mBlocks + mb. The tile
// holds the output positions [p0, p0+cols) of d.P, nTile a tile (fewer in
// the last), in npn micro-panels of nr columns.
func splitUnit(d *Dims, u, mBlocks, nTiles, nTile, nr int) (mb, g, n, p0, cols, npn int) {
	tile := u / mBlocks % nTiles
	mb, g, n = u%mBlocks, u/(mBlocks*nTiles)%d.Groups, u/(mBlocks*nTiles*d.Groups)
	p0 = tile * nTile
	cols = min(nTile, d.P-p0)
	return mb, g, n, p0, cols, ceilDivPos(cols, nr)
}
