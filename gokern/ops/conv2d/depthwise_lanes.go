package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// depthwiseLanes is depthwise (direct.go) for float32 activations with the
// channels in the vector lanes, for small planes, where depthwisePadded's
// per-channel cost dominates. A unit is (sample, block of L = dw.Lanes
// consecutive channels, band of output rows):
//
//   - the band's input rows of the L channels are interleaved (dw.Interleave)
//     into a position-major stage, then copied row by row into a zero-padded
//     tile: padded row r, padded column c, channel l at (r*tw+c)*L+l, tw =
//     W+PadL+PadR;
//   - for each scale block, dw.LanesF32 sums every tap of the block in the
//     generic kernel's order, output (oh, ow) reading tile position
//     (oh*sH+kh*dilH, ow*sW+kw*dilW): products of -1, 0, +1 are exact and
//     the padding adds w*0 = ±0 to sums that start at +0, so the sums are
//     the generic kernel's bits (zero weights are skipped only where every
//     lane's is zero and x is finite, as the generic kernel skips them);
//   - dw.Deinterleave turns the sums channel-major and the fold (scale,
//     bias) writes each channel's NCHW run.
//
// Only for one output channel per group (Og == 1) and strides 1 and 2 (the
// kernels' assembly); the last block of C % L channels runs the generic
// interleave on its lanes (the other lanes keep stale values, never folded).

// dwLanesTile bounds a unit's padded tile (floats, per worker).
const dwLanesTile = 1 << 14

// useLanes reports whether the float32 depthwise kernel on d runs
// depthwiseLanes on the conv_dw family dw: see the measurements below.
//
// TODO(measure) the plane rule.
func useLanes(d *Dims, dw *gemm.DepthwiseKernels) bool {
	if dw == nil || dw.Lanes == 0 || dw.LanesF32 == nil || d.Og != 1 || d.StrideW != d.StrideH ||
		d.StrideW > 2 {
		return false
	}
	return d.P <= dwLanesMaxPlane
}

// dwLanesMaxPlane is the largest output plane Ho*Wo that runs
// depthwiseLanes.
var dwLanesMaxPlane = 14 * 14

// dwLanesGeom is depthwiseLanes' tile layout.
type dwLanesGeom struct {
	tw    int // padded columns of a tile row
	rows  int // output rows per band
	trows int // padded rows of a full band's tile
}

func newDWLanesGeom(d *Dims, lanes int) dwLanesGeom {
	tw := d.W + d.PadL + d.PadR
	span := (d.KH-1)*d.DilH + 1
	rows := max(1, min(d.Ho, (dwLanesTile/(tw*lanes)-span)/d.StrideH+1))
	return dwLanesGeom{tw: tw, rows: rows, trows: (rows-1)*d.StrideH + span}
}

// depthwiseLanes has depthwise's arguments (float32 activations) and the
// conv_dw family dw (dw.Lanes > 0).
func depthwiseLanes(d *Dims, apan []byte, src []float32, sc *scaler, out []float32, skipZero bool, dw *gemm.DepthwiseKernels) {
	L := dw.Lanes
	np := gemm.Panels(d.Og)
	g := newDWLanesGeom(d, L)
	bands := ceilDivPos(d.Ho, g.rows)
	blocks := ceilDivPos(d.C, L)
	hw := d.H * d.W
	// the weights of block cb, tap k, lane l at wv[(cb*K+k)*L+l]; nz: some
	// lane's is nonzero
	wv := make([]float32, blocks*d.K*L)
	nz := make([]bool, blocks*d.K)
	for o := range d.O {
		cb, l := o/L, o%L
		panel := apan[o*np*d.K:][:d.K]
		for k, code := range panel {
			w := gemm.Weights(code)[0]
			wv[(cb*d.K+k)*L+l] = float32(w)
			nz[cb*d.K+k] = nz[cb*d.K+k] || w != 0
		}
	}
	tapAt := make([]int, d.K) // tap k's offset in the tile
	for k := range tapAt {
		tapAt[k] = (k/d.KW*d.DilH*g.tw + k%d.KW*d.DilW) * L
	}
	par.Run(par.Chunks(d.N*blocks*bands, 1), func(_, lo, hi int) {
		tile := make([]float32, g.trows*g.tw*L)
		stage := make([]float32, g.trows*d.W*L)
		sumsT := make([]float32, g.rows*d.Wo*L)
		sums := make([]float32, L*g.rows*d.Wo)
		offs, wf := make([]int, 0, d.K), make([]float32, 0, d.K*L)
		for u := lo; u < hi && !par.Stopped(); u++ {
			band := u % bands
			cb := u / bands % blocks
			n := u / (bands * blocks)
			c0 := cb * L
			lv := min(L, d.C-c0)
			oh0 := band * g.rows
			oh1 := min(d.Ho, oh0+g.rows)
			r0 := oh0*d.StrideH - d.PadT // input row of tile row 0
			nr := (oh1-oh0-1)*d.StrideH + (d.KH-1)*d.DilH + 1
			ihLo, ihHi := max(0, r0), min(d.H, r0+nr)
			if ihLo < ihHi {
				cnt := (ihHi - ihLo) * d.W
				first := (n*d.C+c0)*hw + ihLo*d.W
				if lv == L {
					dw.Interleave(stage, src[first:(n*d.C+c0+L-1)*hw+ihHi*d.W], hw, cnt)
				} else {
					for l := range lv {
						for i, v := range src[first+l*hw:][:cnt] {
							stage[i*L+l] = v
						}
					}
				}
			}
			for r := range nr {
				row := g.tw * L
				dst := tile[r*row:][:row]
				ih := r0 + r
				if ih < 0 || ih >= d.H {
					clear(dst)
					continue
				}
				copy(dst[d.PadL*L:][:d.W*L], stage[(ih-ihLo)*d.W*L:][:d.W*L])
			}
			span := (oh1 - oh0) * d.Wo
			st := sumsT[:span*L]
			for b := range sc.nb {
				offs, wf = offs[:0], wf[:0]
				for k := b * sc.bl; k < (b+1)*sc.bl; k++ {
					if skipZero && !nz[cb*d.K+k] {
						continue
					}
					offs = append(offs, tapAt[k])
					wf = append(wf, wv[(cb*d.K+k)*L:][:L]...)
				}
				if len(offs) == 0 {
					clear(st)
				} else {
					dw.LanesF32(st, tile, offs, wf, d.StrideW, d.Wo, oh1-oh0, d.StrideH*g.tw*L)
				}
				dw.Deinterleave(sums, span, st, span)
				for l := range lv {
					o := c0 + l
					foldF32(sc, out[(n*d.O+o)*d.P+oh0*d.Wo:][:span], sums[l*span:][:span], o, b, 0)
				}
			}
		}
	})
}
