package conv2d

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The int8 implicit GEMM (gemm.ImplicitI8; see gokern/gemm/implicit.go):
// the im2col algorithm's sums for int8 activations without any column
// buffer. Each sample is written once as unsigned bytes q+128, channels last
// and padded in space; the kernel then reads every (pixel, kernel tap) run
// of channels where it lies. The sums are the exact int32 sums of the other
// algorithms, so the results are bit-identical.

// implicitPix is the most output pixels of one work unit (a multiple of
// gemm.ImplicitPix): 96 x 16 int32 sums per unit.
const implicitPix = 96

// implicitGeom is the padded channels-last layout of one sample: hp x wp
// pixels of cp bytes (groups x cg4 channels, each group's rounded up to
// whole quads). In rows mode (rowQuads > 0, see implicitRowsMode) a pixel
// holds its cg4 = C channels unrounded, and wp counts slack pixels after
// the right padding: the kernel reads a kernel row's KW*C bytes as
// rowQuads whole quads, past its last tap.
type implicitGeom struct {
	hp, wp, cg4, cp, per int
	rowQuads             int // rows mode: quads a kernel row; 0 otherwise
}

func newImplicitGeom(d *Dims) implicitGeom {
	g := implicitGeom{hp: d.H + d.PadT + d.PadB, wp: d.W + d.PadL + d.PadR, cg4: roundUp(d.Cg, 4)}
	if implicitRowsMode(d) {
		g.rowQuads, g.cg4 = ceilDivPos(d.KW*d.Cg, 4), d.Cg
		// the row's last quad reads up to 3 bytes past its last tap, and the
		// layout writer's 4-byte stores spill 4-C bytes past the last pixel
		g.wp += max(ceilDivPos(4*g.rowQuads-d.KW*d.Cg, d.Cg), ceilDivPos(4-d.Cg, d.Cg))
	}
	g.cp = d.Groups * g.cg4
	g.per = g.hp * g.wp * g.cp // may overflow where useImplicit is false
	return g
}

// implicitRowsMode reports whether the implicit GEMM runs d in rows mode:
// one group of fewer than 4 channels (an RGB stem) whose taps lie next to
// each other along a row (DilW 1), where a kernel row's KW*C bytes, read
// as whole quads, take fewer quads than KW taps of a channel quad each (a
// 7x7 stem on 3 channels: 6 quads a row, not 7, 14% fewer multiply-adds,
// none of them on a quad's padding channel). The planner never brings a
// one-channel layer here: it is depthwise (useImplicit).
func implicitRowsMode(d *Dims) bool {
	return d.Groups == 1 && d.Cg < 4 && d.DilW == 1 && ceilDivPos(d.KW*d.Cg, 4) < d.KW
}

// taps returns the byte offsets of a pixel's K segments in the layout
// (each kernel tap, or in rows mode each kernel row) and the quads each
// covers, in the order of the packed weights (implicitWeights).
func (g implicitGeom) taps(d *Dims) ([]int, int) {
	if g.rowQuads > 0 {
		taps := make([]int, d.KH)
		for i := range taps {
			taps[i] = i * d.DilH * g.wp * g.cp
		}
		return taps, g.rowQuads
	}
	taps := make([]int, 0, d.KH*d.KW)
	for i := range d.KH {
		for j := range d.KW {
			taps = append(taps, (i*d.DilH*g.wp+j*d.DilW)*g.cp)
		}
	}
	return taps, g.cg4 / 4
}

// useImplicit reports whether the int8 im2col (or 1x1) convolution d runs as
// the implicit GEMM: the kernel set has one, every output channel has one
// scale block (the kernel's K order, tap by tap, cuts across blocks of the
// flattened weight), and the padded copy stays within 4x the input plus a
// MB with offsets in int32. It runs however few the pixels: its weight
// blocks are kept in the weight cache (wcache.go), and on few pixels it
// beats the im2col path too (best of 15 alternated runs, 2 threads, Zen 4,
// both families: 3x3 512->512 on 2x2 pixels 7x, 1x1 512 on 2x3x3 1.6x,
// 1x1 4096->4096 on 4x4 1.3x to 1.5x).
func useImplicit(d *Dims, sc *scaler, ks *gemm.ConvI8) bool {
	if ks.Implicit == nil || sc.nb != 1 || d.Depthwise() {
		return false
	}
	// The padded sizes are checked with mul: with paddings near MaxDim,
	// hp*wp*cp overflows (and may wrap to a small value).
	g := newImplicitGeom(d)
	per, ok := mul(1<<31-1, g.hp, g.wp, g.cp)
	padded, ok2 := mul(1<<62, d.N, per)
	return ok && ok2 && padded <= 4*d.XLen+1<<20
}

// implicitKernels are the kernels of the implicit GEMM: the GEMM itself, the
// quantizers into its layout and the fold of its tiles into the output.
type implicitKernels struct {
	gemm  gemm.ImplicitI8
	pair  gemm.ImplicitI8Pair // nil: gemm on each block
	q16   gemm.QuantU8x16
	q8    gemm.QuantU8x8
	q4    gemm.QuantU8x4
	fold  gemm.FoldTiles
	fence func()
}

// implicitOf returns the implicit kernels of the conv_i8 set i8.
func implicitOf(i8 *gemm.ConvI8) implicitKernels {
	return implicitKernels{i8.Implicit, i8.ImplicitPair, i8.QuantU8x16, i8.QuantU8x8, i8.QuantU8x4, i8.FoldTiles, i8.Fence}
}

// streamOutBytes is the least output for which the implicit GEMM writes it
// with streaming stores (FoldTiles' stream): an output this large leaves
// the caches anyway, and writing it past them saves reading every line
// first. Smaller outputs stay in the caches for the next layer. Tests
// lower it.
var streamOutBytes = 4 << 20

// implicitConv computes the convolution with the kernels k from the
// weight's implicit blocks wl (implicitWeights) and the activations x with
// their scales acts.a, in the implicit layout acts holds (written by
// actScales, or now by layoutU8; acts.release returns it): work units
// (group, range of implicitPix output pixels, block), each folded into out
// as soon as its sums are done.
func implicitConv(d *Dims, wl *weightLayout, x []float32, acts *activations, sc *scaler, out []float32, k implicitKernels) {
	g := newImplicitGeom(d)
	xp, a := acts.implicitLayout(d, x, g, k), acts.a
	blen, nob, wb, corr := wl.blen, wl.nob, wl.blocks, wl.corr
	segs := gemm.ImplicitSegs(g.taps(d))
	// Pixel ranges run over the samples' output pixels end to end (a range
	// may span samples: the kernel takes any pixel offsets), so that a few
	// pixels per sample do not each cost a pass over the weights. The units'
	// order keeps the larger of the two operands in place: weight blocks
	// fastest when a group's activations are the larger (each range's
	// activations stay in L1/L2 while every block passes), ranges fastest
	// when its weights are (each block stays while every range passes).
	total := d.N * d.P
	stream := 4*d.OutLen >= streamOutBytes
	nr := ceilDivPos(total, implicitPix)
	rangesFast := nob*blen > d.N*g.hp*g.wp*g.cg4
	// A unit's blocks: two at a time where the kernel set has a pair kernel
	// (a group's odd last block alone).
	step := 1
	if k.pair != nil && nob >= 2 {
		step = 2
	}
	nbu := ceilDivPos(nob, step) // block units per group
	units := d.Groups * nr * nbu
	scales, biases := blockParams(d, sc, nob)
	par.Run(par.ChunksWork(units, implicitPix*gemm.ImplicitOC*step*d.K), func(_, lo, hi int) {
		ws, wh := implicitWork.Sized(1) // the chunk's buffers, kept from call to call
		defer implicitWork.Put(wh)
		wk := &ws[0]
		px, runs := wk.px[:], wk.runs[:0]
		defer func() { wk.runs = runs[:0] }()
		lastR, lastG := -1, -1
		for u := lo; u < hi && !par.Stopped(); u++ {
			var bu, r, gi int
			if rangesFast {
				r, bu, gi = u%nr, u/nr%nbu, u/(nr*nbu)
			} else {
				bu, r, gi = u%nbu, u/nbu%nr, u/(nbu*nr)
			}
			ob := bu * step
			q0 := r * implicitPix // first pixel over all samples
			cnt := min(implicitPix, total-q0)
			npx := roundUp(cnt, gemm.ImplicitPix)
			if r != lastR || gi != lastG {
				n, p := q0/d.P, q0%d.P
				oh, ow := p/d.Wo, p%d.Wo
				// the offset steps along the output row; a new row (or
				// sample) computes it again
				wo, ho, dx := d.Wo, d.Ho, d.StrideW*g.cp
				rowAt := func() int { return n*g.per + oh*d.StrideH*g.wp*g.cp + gi*g.cg4 }
				at := rowAt() + ow*dx
				for i := range npx {
					px[i] = at
					if i < cnt-1 { // a partial tile repeats its last pixel
						if ow++; ow < wo {
							at += dx
						} else {
							if oh, ow = oh+1, 0; oh == ho {
								n, oh = n+1, 0
							}
							at = rowAt()
						}
					}
				}
				runs = runs[:0]
				for q := q0; q < q0+cnt; { // one run per sample
					n, p := q/d.P, q%d.P
					m := min(d.P-p, q0+cnt-q)
					runs = append(runs, sampleRun{n, n*d.O*d.P + p, q - q0, m})
					q += m
				}
				lastR, lastG = r, gi
			}
			b, nblk := gi*nob+ob, min(step, nob-ob)
			if nblk == 2 {
				k.pair(wb[b*blen:][:2*blen], blen, xp, px[:npx], segs, wk.tiles[0][:], wk.tiles[1][:])
			} else {
				k.gemm(wb[b*blen:][:blen], xp, px[:npx], segs, wk.tiles[0][:])
			}
			for bi := range nblk {
				oc0 := (ob + bi) * gemm.ImplicitOC // the block's first channel in the group
				noc := min(gemm.ImplicitOC, d.Og-oc0)
				oc0 += gi * d.Og
				var pb *[gemm.ImplicitOC]float32
				if biases != nil {
					pb = &biases[b+bi]
				}
				for _, run := range runs {
					k.fold(out[run.out+oc0*d.P:], d.P, wk.tiles[bi][run.at*gemm.ImplicitOC:], run.m, noc, &corr[b+bi],
						a[run.n], &scales[b+bi], pb, stream, wk.fold[:])
				}
			}
		}
		if stream {
			k.fence()
		}
	})
}

// implicitChunkWork is the buffers of one chunk of implicitConv's units:
// the pixel offsets of a range, the tiles of a unit's one or two blocks,
// the fold's buffer and the range's runs. Every field is written before it
// is read, so a kept one serves with stale contents.
type implicitChunkWork struct {
	px    [implicitPix]int
	tiles [2][gemm.ImplicitOC * implicitPix]int32
	fold  [gemm.FoldTilesScratch]int32
	runs  []sampleRun
}

// implicitWork keeps implicitConv's chunk buffers from call to call: fresh
// ones (25 KB a chunk then, up to four chunks a thread) were 94% of the bytes a
// call allocated, and their clearing and the collections they caused about
// 4% of a 1x1 layer's time (Zen 4, one thread).
var implicitWork = &buf.List[implicitChunkWork]{MaxCap: 1, MaxCount: par.MaxThreads}

// blockParams returns the scales and biases of the weight's blocks of
// gemm.ImplicitOC output channels as FoldTiles takes them: block b (in
// wl.corr's order: group b/nob, channels (b%nob)*16 .. of it) at [b], a
// partial block's entries past its channels zero; biases nil without a
// bias. One scale block per channel (useImplicit).
func blockParams(d *Dims, sc *scaler, nob int) (scales, biases [][gemm.ImplicitOC]float32) {
	scales = make([][gemm.ImplicitOC]float32, d.Groups*nob)
	if sc.bias != nil {
		biases = make([][gemm.ImplicitOC]float32, len(scales))
	}
	for b := range scales {
		oc0 := b/nob*d.Og + b%nob*gemm.ImplicitOC
		for o := range min(gemm.ImplicitOC, d.Og-b%nob*gemm.ImplicitOC) {
			scales[b][o] = sc.scale(oc0+o, 0)
			if biases != nil {
				biases[b][o] = sc.bias[oc0+o]
			}
		}
	}
	return scales, biases
}

// sampleRun is the part of a pixel range in one sample n: m pixels from
// index at of the range, written from out[run.out + channel*P].
type sampleRun struct{ n, out, at, m int }

// actZero is the byte of activation 0 in the implicit layout (q + 128).
const actZero = 0x80

// layoutU8 writes the samples x (N, C, H, W) quantized with their scales a
// in the implicit layout g, into a layoutScratch buffer (returned with its
// handle): byte Quant8(x, a_n)+128 of channel c at pixel (h+PadT, w+PadL),
// channel offset group*cg4 + c%Cg; the spatial padding holds actZero. Runs
// of 16 channels go through k.q16, then of 8 through k.q8, the rest of a
// group's channels a quad at a time through k.q4. The channels that round
// a group up to a quad (weights 0) get a copy of its last channel. In rows
// mode (g.rowQuads > 0) a pixel holds its C channels, cp = C bytes, written
// by k.q4 in pixel order.
func layoutU8(d *Dims, x, a []float32, g implicitGeom, k implicitKernels) ([]byte, *[]byte) {
	xp, h := layoutScratch.Sized(d.N * g.per)
	layoutRows(d, x, a, g, k, xp, 0, d.N)
	return xp, h
}

// layoutRows writes layoutU8's bytes of samples n0 <= n < n1 into xp, in
// one parallel pass over their padded rows.
func layoutRows(d *Dims, x, a []float32, g implicitGeom, k implicitKernels, xp []byte, n0, n1 int) {
	rowLen := g.wp * g.cp
	hw := d.H * d.W
	first := n0 * g.hp
	par.Run(par.ChunksWork((n1-n0)*g.hp, rowLen*passWork), func(_, lo, hi int) {
		// padding (rows, columns) and rows mode first, row by row; then the
		// channels' runs, run after run over the chunk's rows, so that a
		// run's planes are read as a few sequential streams (a row at a
		// time, every run of a row in turn, was as many streams as
		// channels, reading from L3 at a fraction of its speed)
		for r := first + lo; r < first+hi && !par.Stopped(); r++ {
			n, h := r/g.hp, r%g.hp-d.PadT
			dst := xp[r*rowLen:][:rowLen]
			if h < 0 || h >= d.H {
				fill(dst, actZero)
				continue
			}
			fill(dst[:d.PadL*g.cp], actZero)
			if g.rowQuads > 0 { // a pixel's C bytes in a row: 4-byte stores, each spilling onto the next
				k.q4(dst[d.PadL*g.cp:], x[n*d.C*hw+h*d.W:], hw, d.W, g.cp, d.Cg, a[n])
				fill(dst[(d.PadL+d.W)*g.cp:], actZero) // after: over the last pixel's spill
				continue
			}
			fill(dst[(d.PadL+d.W)*g.cp:], actZero)
		}
		if g.rowQuads > 0 {
			return
		}
		for gi := range d.Groups {
			for c0 := 0; c0 < d.Cg && !par.Stopped(); {
				width := 4
				if c0+16 <= d.Cg {
					width = 16
				} else if c0+8 <= d.Cg {
					width = 8
				}
				for r := first + lo; r < first+hi; r++ {
					n, h := r/g.hp, r%g.hp-d.PadT
					if h < 0 || h >= d.H {
						continue
					}
					body := xp[r*rowLen+d.PadL*g.cp:][:d.W*g.cp]
					dst, src := body[gi*g.cg4+c0:], x[(n*d.C+gi*d.Cg+c0)*hw+h*d.W:]
					switch width {
					case 16:
						k.q16(dst, src, hw, d.W, g.cp, a[n])
					case 8:
						k.q8(dst, src, hw, d.W, g.cp, a[n])
					default:
						k.q4(dst, src, hw, d.W, g.cp, min(4, d.Cg-c0), a[n])
					}
				}
				c0 += width
			}
		}
	})
}

// fill sets every byte of b to v.
func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// Scratch buffers per role (quantized activations, the implicit layout),
// kept from call to call (gokern/buf): fresh buffers of
// megabytes cost page faults and garbage collections that can take as long
// as the convolution itself. They come back with
// stale contents; every user writes all it reads. Buffers above 256 MB are
// not kept.
var actScratch, layoutScratch = newScratch(), newScratch()

func newScratch() *buf.List[byte] { return &buf.List[byte]{MaxCap: 1 << 28, MaxCount: par.MaxThreads} }

// asInt8 views b as int8 values.
func asInt8(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
