package conv2d

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The float32 implicit (direct) convolution: the op "conv_directf" of
// gemm (gemm.DirectF32Kernels) over a padded copy of the input, for
// convolutions with float32 activations. No column buffer: the input is
// rewritten once per call into zero-padded planes (split by stride phase,
// flatGeom), in which output position q = oh*ws + ow of every (channel,
// tap) k reads x[q + offs[k]], so the kernel's vectors of consecutive
// positions are plain loads; the weights are expanded once to float32 (ternary value times its
// scale: every scale mode, block scales included, is one sum) in panels of
// MR output channels and kept in the weight cache. A tile holds MR channels
// by up to NV vectors of positions in registers for the whole K; tiles run
// across the padded rows, whose columns ow >= Wo are computed and dropped
// when the tile is copied out, except where Wo is a multiple of the vector
// (row tiles, written in place; see directConvF32) and for in-place 1x1
// layers (the bias is the accumulators' starting value).
//
// The planner runs it (algorithm auto with float32 activations) where
// useImplicitF32 says; every product is computed (zero weights too), so
// NaN and Inf propagate as in torch.

// implicitF32 is the planner's internal name of the kernel (an Im2col
// request's GEMM runs as the implicit float32 kernel instead, as int8 runs
// the implicit GEMM): never a C ABI number.
const implicitF32 Algo = -1

// useImplicitF32 is the planner's rule for algorithm auto with float32
// activations (where the planner would run im2col or the 1x1 GEMM, not
// GEMV): the implicit float32 kernel when the conv_directf family selected
// has SIMD kernels (the generic oracle is slower than the im2col GEMM's
// Go loops). Timed against im2col and the 1x1 GEMM (min of 15 calls, one
// thread, avx512 and avx2): 1.2-1.6x faster on 3x3 layers, 1.14-1.5x on
// the 7x7/2 stem and 3x3/2 layers, 1.0-1.45x on stride-1 1x1 layers from
// 7 to 56 wide (ResNet-50's), so every such layer runs it (strided 1x1
// layers were not timed and keep im2col).
//
// Geometries whose padded layout would be much larger than the input
// (paddings, strides or dilations of thousands: every sub-plane is written)
// keep im2col, and so do layers whose expanded weight (4 bytes a weight)
// the weight cache would not keep, unless they have 256 output positions
// or more (N*Ho*Wo) to pay for expanding it on every call.
func useImplicitF32(d *Dims, k *gemm.DirectF32Kernels) bool {
	return k.Family != cpu.Generic && (d.KH*d.KW > 1 || d.StrideH == 1 && d.StrideW == 1) && implicitLayoutOK(d) &&
		(expandedKept(d) || d.N*d.P >= 256)
}

// expandedKept reports whether the weight cache would keep d's expanded
// weight (4 bytes a weight): f32Kept.
func expandedKept(d *Dims) bool {
	n, ok := mul(ternary.MaxElements, d.O, d.K)
	return ok && f32Kept(d, n)
}

// f32Kept reports whether the weight cache would keep a float32 layout of
// n values of d's weight: buf.Cache keeps a value when it and the copy of
// its key's bytes (the codes and the scales) take at most half the
// budget; panel padding and the scales are allowed for by a tenth more.
func f32Kept(d *Dims, n int) bool {
	return (4*n+d.WLen/4)/10*11 <= layoutCache.MaxBytes/2
}

// implicitLayoutOK reports whether the flat layout of a channel (and so
// the blocked one, its stride-1 case) takes at most 4*H*W + 4096 values.
func implicitLayoutOK(d *Dims) bool {
	hp, wp := d.H+d.PadT+d.PadB, d.W+d.PadL+d.PadR
	_, ok := mul(4*d.H*d.W+4096, d.StrideH, d.StrideW, ceilDivPos(hp, d.StrideH), ceilDivPos(wp, d.StrideW))
	return ok
}

// directScratch keeps the padded inputs between calls.
var directScratch = &buf.List[float32]{MaxCap: 1 << 28, MaxCount: 2}

// directGeom is the geometry of the padded input (blocked layout).
type directGeom struct {
	hp, wp, plane int // padded height, width, hp*wp
}

func newDirectGeom(d *Dims) directGeom {
	g := directGeom{hp: d.H + d.PadT + d.PadB, wp: d.W + d.PadL + d.PadR}
	g.plane = g.hp * g.wp
	return g
}

// directWeights returns the weight expanded for k: per group and panel of
// k.MR output channels (the last padded with zero rows), K*MR floats,
// element (kk, r) = q(o, kk) * s(o, kk / bl) at kk*MR + r. It is kept in
// the weight cache keyed by the codes and compared with the codes and the
// scales (the scales are folded in).
func directWeights(d *Dims, w Weights, sc *scaler, k *gemm.DirectF32Kernels) ([]float32, error) {
	np := ceilDivPos(d.Og, k.MR)
	n, ok := mul(ternary.MaxElements, d.Groups, np, k.MR, d.K)
	if !ok {
		return nil, errs.Memory("expanded weight would take more than %d values", ternary.MaxElements)
	}
	pl := k.MR * d.K
	return expandedF32(d, w, layoutDirectF32, k.MR, n, func(vals []int8, out []float32) {
		par.Run(par.ChunksWork(d.Groups*np, pl), func(_, lo, hi int) {
			for pi := lo; pi < hi; pi++ {
				g, p := pi/np, pi%np
				dst := out[pi*pl:][:pl]
				for r := range k.MR {
					o := p*k.MR + r
					if o >= d.Og {
						break
					}
					o += g * d.Og
					row := vals[o*d.K:][:d.K]
					for kk, v := range row {
						dst[kk*k.MR+r] = float32(v) * sc.scale(o, kk/sc.bl)
					}
				}
			}
		})
	})
}

// expandedF32 returns w expanded to n float32 values by fill (given the
// weight's ternary values), kept in the weight cache under kind and tile
// (cachedScaled: the codes and the scales compared).
func expandedF32(d *Dims, w Weights, kind layoutKind, tile, n int, fill func(vals []int8, out []float32)) ([]float32, error) {
	l, err := cachedScaled(d, w, kind, tile, func(w Weights) (*weightLayout, int, error) {
		vals := make([]int8, d.WLen)
		if err := unpackI2S(w.Packed, vals); err != nil {
			return nil, 0, err
		}
		out := make([]float32, n)
		fill(vals, out)
		return &weightLayout{f32: out}, 4 * n, nil
	})
	if err != nil {
		return nil, err
	}
	return l.f32, nil
}

// flatGeom is the geometry of the flat layout's input: per channel, the
// zero-padded plane split by stride phase into sH*sW sub-planes of hs x
// ws values (sub-plane (a, b) holds the padded rows a, a+sH, ... and
// columns b, b+sW, ...; one sub-plane, the padded plane itself, for stride
// 1), so that output position q = oh*ws + ow reads, for tap (kh, kw),
// sub-plane (kh*dilH % sH, kw*dilW % sW) at q + (kh*dilH/sH)*ws +
// kw*dilW/sW: consecutive positions are consecutive values for any stride.
type flatGeom struct {
	hs, ws, sub, ch int // sub-plane height, width, hs*ws, values per channel
	qn              int // flat positions per sample up to the last output, (Ho-1)*ws + Wo
}

func newFlatGeom(d *Dims) flatGeom {
	hp, wp := d.H+d.PadT+d.PadB, d.W+d.PadL+d.PadR
	g := flatGeom{hs: ceilDivPos(hp, d.StrideH), ws: ceilDivPos(wp, d.StrideW)}
	g.sub = g.hs * g.ws
	g.ch = d.StrideH * d.StrideW * g.sub
	g.qn = (d.Ho-1)*g.ws + d.Wo
	return g
}

// offset returns where tap (kh, kw) of channel c reads for position 0.
func (g flatGeom) offset(d *Dims, c, kh, kw int) int {
	dh, dw := kh*d.DilH, kw*d.DilW
	return c*g.ch + (dh%d.StrideH*d.StrideW+dw%d.StrideW)*g.sub + dh/d.StrideH*g.ws + dw/d.StrideW
}

// padInput writes x into dst in the flat layout (every channel of every
// sample, geometry g); dst holds N*C*g.ch values and a tail it leaves as it
// is (read only for dropped columns). Its work items are the padded rows of
// each stride phase of each plane (not whole planes: a 7x7/2 stem has 3
// planes a sample, which split over 2 threads as 2 and 1).
func padInput(d *Dims, g flatGeom, x, dst []float32) {
	sh, sw := d.StrideH, d.StrideW
	rows := sh * g.hs // rows a plane: g.hs in each of the sh row phases
	par.Run(par.ChunksWork(d.N*d.C*rows, sw*g.ws*passWork), func(_, lo, hi int) {
		pi, a, i := lo/rows, lo%rows/g.hs, lo%g.hs
		for u := lo; u < hi && !par.Stopped(); u++ {
			p := dst[pi*g.ch:][:g.ch]
			ih := i*sh + a - d.PadT
			for b := range sw {
				row := p[(a*sw+b)*g.sub+i*g.ws:][:g.ws]
				if ih < 0 || ih >= d.H {
					clear(row)
					continue
				}
				xr := x[(pi*d.H+ih)*d.W:][:d.W]
				// columns j with 0 <= j*sw + b - PadL < W
				jlo := min(g.ws, ceilDivPos(max(0, d.PadL-b), sw))
				jhi := max(jlo, min(g.ws, ceilDivPos(d.PadL+d.W-b, sw)))
				clear(row[:jlo])
				iw := jlo*sw + b - d.PadL
				if seg := row[jlo:jhi]; sw == 1 {
					copy(seg, xr[iw:])
				} else {
					for j := range seg {
						seg[j] = xr[iw]
						iw += sw
					}
				}
				clear(row[jhi:])
			}
			if i++; i == g.hs { // the next item's row
				if i, a = 0, a+1; a == sh {
					a, pi = 0, pi+1
				}
			}
		}
	})
}

// directRun is one piece of a tile's output row: cols values from tile
// column src to output position dst.
type directRun struct{ src, dst, n int }

// tileRuns lists the output positions of the flat positions [q0, q1).
func tileRuns(d *Dims, g flatGeom, q0, q1 int, runs []directRun) []directRun {
	runs = runs[:0]
	for q := q0; q < q1; {
		oh, ow := q/g.ws, q%g.ws
		if ow >= d.Wo {
			q += g.ws - ow
			continue
		}
		n := min(d.Wo-ow, q1-q)
		runs = append(runs, directRun{q - q0, oh*d.Wo + ow, n})
		q += n
	}
	return runs
}

// directConvF32 runs the implicit float32 convolution with kernel k.
func directConvF32(d *Dims, w Weights, x []float32, sc *scaler, out []float32, k *gemm.DirectF32Kernels) error {
	wf, err := directWeights(d, w, sc, k)
	if err != nil {
		return err
	}
	g := newFlatGeom(d)
	mr, tw := k.MR, k.NV*k.Lanes
	np := ceilDivPos(d.Og, mr)
	nt := ceilDivPos(g.qn, tw)
	offs := make([]int, d.K)
	khw := d.KH * d.KW
	for kk := range offs {
		c, r := kk/khw, kk%khw
		offs[kk] = g.offset(d, c, r/d.KW, r%d.KW)
	}
	// A 1x1 stride-1 unpadded layer reads x as it is (its flat layout,
	// positions = output positions) and its tiles write out in place; the
	// tiles that would read past x or write past a row go through t.
	inPlace := d.Pointwise()
	xp := x
	if !inPlace {
		xlen, ok := mul(ternary.MaxElements, d.N, d.C, g.ch)
		if !ok {
			return errs.Memory("padded input would take more than %d values", ternary.MaxElements)
		}
		// the last tile of the last group of the last sample reads up to here
		last := ((d.N-1)*d.C+(d.Groups-1)*d.Cg)*g.ch + offs[d.K-1] + nt*tw
		var h *[]float32
		xp, h = directScratch.Sized(max(xlen, last))
		defer directScratch.Put(h)
		padInput(d, g, x, xp)
	}
	bias := make([]float32, d.Groups*np*mr)
	if sc.bias != nil {
		for gi := range d.Groups {
			copy(bias[gi*np*mr:], sc.bias[gi*d.Og:][:d.Og])
		}
	}

	// In place, when every channel's row starts at the same place in a
	// vector (g.ch a multiple of Lanes), a head tile of the first head
	// positions puts the other tiles' loads on vector boundaries: a
	// NumPy array starts 16 bytes past a 64-byte line, and its ZMM loads
	// crossing lines made 1x1 256->64 @56 x8 1.2x slower (11.4 against
	// 9.2 ms at 1 thread from Python, x at 16 and 0 bytes past a line).
	head := 0
	if inPlace && g.ch%k.Lanes == 0 {
		if a := int(uintptr(unsafe.Pointer(unsafe.SliceData(x))) / 4 % uintptr(k.Lanes)); a != 0 {
			head = min(k.Lanes-a, g.qn)
		}
	}
	// A layer not run in place whose output rows are whole vectors (Wo a
	// multiple of Lanes: the 112-wide 7x7/2 stem) runs tiles within each output
	// row, written in place too, instead of tiles across the rows'
	// padded columns copied out of t: the stem 2.56 -> 2.41 ms at 1
	// thread and 1.31 -> 1.21 at 2, 5x5 8@32 x4 1.17x, 3x3 16@112
	// 1.08x, 3x3 24@64 x2 the same (Go, 3 alternated runs); on avx2,
	// where 56 = 24+24+8 ends a row with a one-vector tile, 3x3 16@56
	// took the same time as before (0.19 ms).
	rowTiles := !inPlace && d.Wo%k.Lanes == 0
	ntr := ceilDivPos(d.Wo, tw) // tiles per output row (rowTiles)
	switch {
	case rowTiles:
		nt = d.Ho * ntr
	case head > 0:
		nt = 1 + ceilDivPos(g.qn-head, tw)
	}
	// span returns tile's flat positions [q0, q1) and the output position
	// of q0 where the tile's positions are consecutive outputs, else -1.
	span := func(tile int) (q0, q1, o0 int) {
		switch {
		case rowTiles:
			oh, ow := tile/ntr, tile%ntr*tw
			q0 = oh*g.ws + ow
			return q0, q0 + min(tw, d.Wo-ow), oh*d.Wo + ow
		case head > 0 && tile == 0:
			return 0, head, 0
		case head > 0:
			q0 = head + (tile-1)*tw
		default:
			q0 = tile * tw
		}
		o0 = -1
		if inPlace {
			o0 = q0
		}
		return q0, min(q0+tw, g.qn), o0
	}

	// Units: (group, block of panels, sample, tile), tiles fastest; a
	// unit runs its tile over each panel of its block, whose weights
	// (about half of L2 at most) stay in cache for the next tiles.
	pl := mr * d.K
	nbk := ceilDivPos(np, max(1, min(np, (512<<10)/(4*pl))))
	pb := ceilDivPos(np, nbk) // blocks of even size
	nbk = ceilDivPos(np, pb)
	units := d.Groups * nbk * d.N * nt
	par.Run(par.ChunksWork(units, tw*pb*pl), func(_, lo, hi int) {
		t := make([]float32, mr*tw)
		var runs []directRun
		var tail []float32 // inPlace: a tail tile's input, channel c at c*tw
		var tailOffs []int
		for u := lo; u < hi && !par.Stopped(); u++ {
			tile, n := u%nt, u/nt%d.N
			bk, gi := u/(nt*d.N)%nbk, u/(nt*d.N*nbk)
			q0, q1, o0 := span(tile)
			nv := ceilDivPos(q1-q0, k.Lanes)
			runs = tileRuns(d, g, q0, q1, runs)
			base := (n*d.C + gi*d.Cg) * g.ch
			xs, xo := xp[base+q0:], offs
			if inPlace && base+q0+offs[d.K-1]+nv*k.Lanes > len(xp) {
				if tail == nil {
					tail, tailOffs = make([]float32, d.Cg*tw), make([]int, d.Cg)
					for c := range tailOffs {
						tailOffs[c] = c * tw
					}
				}
				for c := range d.Cg {
					row := tail[c*tw:][:tw]
					clear(row[copy(row, xp[base+c*g.ch+q0:base+c*g.ch+q1]):])
				}
				xs, xo = tail, tailOffs
			}
			for p := bk * pb; p < min(np, (bk+1)*pb); p++ {
				pi := gi*np + p
				if o0 >= 0 && (p+1)*mr <= d.Og && q0+nv*k.Lanes == q1 {
					o := gi*d.Og + p*mr
					k.Tile(d.K, wf[pi*pl:][:pl], xs, xo, bias[pi*mr:][:mr], out[(n*d.O+o)*d.P+o0:], d.P, nv)
					continue
				}
				k.Tile(d.K, wf[pi*pl:][:pl], xs, xo, bias[pi*mr:][:mr], t, tw, nv)
				for r := range min(mr, d.Og-p*mr) {
					o := gi*d.Og + p*mr + r
					dst := out[(n*d.O+o)*d.P:][:d.P]
					src := t[r*tw:][:tw]
					for _, run := range runs {
						copy(dst[run.dst:run.dst+run.n], src[run.src:])
					}
				}
			}
		}
	})
	return nil
}

// unpackI2S decodes the I2_S codes of a weight into vals. A code 3 among
// the values is reported as the other kernels report it (the first, by its
// flat position); ternary.Unpack's own checks (the padding after the last
// value is code 1) come after it.
func unpackI2S(packed []byte, vals []int8) error {
	err := ternary.Unpack(packed, vals)
	if err == nil {
		return nil
	}
	if p := gemm.Code3(packed[:ternary.PackedLen(len(vals))]); p >= 0 && p < len(vals) {
		return errs.Value("weight: invalid I2_S code 3 at element %d", p)
	}
	return errs.Value("weight: %v", err)
}
