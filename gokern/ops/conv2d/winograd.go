package conv2d

import (
	"math"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Winograd F(2x2, 3x3) for the implicit float32 path's 3x3 stride-1
// layers: each 2x2 block of outputs (a tile) of an output channel o is
//
//	Y = A^T [ sum_c (G g_oc G^T) .* (B^T d_c B) ] A
//
// with d_c the tile's 4x4 input pixels of channel c and g_oc the 3x3
// weight: 16 multiply-adds a tile and channel pair where the direct kernel
// does 36. The weight is transformed once (U = G g G^T, in float64, kept
// in the weight cache); per call the input is blocked and padded to whole
// tiles (blockInput), transformed by WinoIn into 16 planes V[xi][cb][tile]
// of 16 channels, and each unit of (block of output channels, block of up
// to BNP tiles) runs 16 Blocked tiles, one a transform element xi (a
// 1x1 convolution over the tiles' V[xi]), then WinoOut and a transpose
// into the NCHW output. The bias enters through element 5 (m[1][1]),
// which A^T m A adds to each of the four outputs with coefficient 1.
//
// The sums are in another order than the direct kernels' and pass through
// the transforms' additions: within float32 rounding of the same terms
// (the conv2d tests' bound), not the same bits. NaN and Inf would not
// propagate as in a direct sum (an Inf pixel's transform is Inf - Inf in
// places), so run takes the direct kernels for inputs that hold one and
// for weights with a non-finite scale (and, with a margin, for values
// that could overflow in the transforms: winoFinite).

// winoG is G, the weight transform's 4x3 matrix.
var winoG = [4][3]float64{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}

// winoMinC and winoMinWork bound the layers Winograd runs: at least 32
// input and output channels per group (a 32-channel output tile is the
// AVX-512 family's BOC), and at least 4M direct multiply-adds per thread
// (N*Ho*Wo*O*C*9 / threads). Measured against the direct kernels the
// planner picks otherwise (Go, 2-vCPU Zen 4, AVX-512 family, best of 3
// runs of 40 calls): 16@56 loses (0.27 vs 0.17 ms at 1 thread), 32@56
// gains 1.2x at 1 thread and ties at 2; at 2 threads 32@28 (7M
// multiply-adds) loses (0.18 vs 0.16 ms) and 64@7 too (0.031 vs 0.026
// ms), while the ResNet layers from 64@56 to 512@7 x8 gain 1.35-1.7x at
// 1 and 2 threads.
const (
	winoMinC    = 32
	winoMinWork = 1 << 22
)

// useWinograd is the planner's choice of Winograd over the direct kernels
// for an implicit float32 convolution on family k (see winoMinC and
// winoKept).
func useWinograd(d *Dims, k *gemm.DirectF32Kernels) bool {
	if k.WinoIn == nil || k.Blocked == nil || d.KH != 3 || d.KW != 3 || d.StrideH != 1 || d.StrideW != 1 ||
		d.DilH != 1 || d.DilW != 1 || d.Groups != 1 || d.Cg < winoMinC || d.Og < winoMinC || !winoKept(d, k.BOC) {
		return false
	}
	macs, ok := mul(math.MaxInt64, d.N, d.Ho, d.Wo, d.O, d.K)
	return !ok || macs/par.Threads() >= winoMinWork
}

// winoLen returns the values of the transformed weight for k's BOC and
// whether it is below ternary.MaxElements.
func winoLen(d *Dims, boc int) (int, bool) {
	return mul(ternary.MaxElements, ceilDivPos(d.Og, boc), 16, ceilDivPos(d.Cg, gemm.BlockC), gemm.BlockC, boc)
}

// winoKept reports whether the weight cache keeps the transformed weight
// (f32Kept, as for the direct kernels' one): transforming it on every call
// is not worth it.
func winoKept(d *Dims, boc int) bool {
	n, ok := winoLen(d, boc)
	return ok && f32Kept(d, n)
}

// winoMaxAbs bounds the magnitudes Winograd takes: the transforms add up to
// 4 inputs (and 9 weights, times 9/4 at most) before the multiply-adds, so
// values near float32's range could overflow in them where a direct sum
// would not.
const winoMaxAbs = 0x1p100

// winoFinite reports whether Winograd gives the direct kernels' NaN and
// Inf and overflows no sooner: x and the scales are finite and at most
// winoMaxAbs in magnitude (xmax: max|x| from checkFinite's scan, or
// unknownMax, then x is scanned here).
func winoFinite(x []float32, xmax float32, sc *scaler, scan *ternary.Quantizer) bool {
	for _, s := range sc.scales {
		if !(math.Abs(float64(s)) <= winoMaxAbs) { // NaN too
			return false
		}
	}
	m := xMax(x, xmax, scan)
	return m >= 0 && m <= winoMaxAbs
}

// winoWeights returns U = G g G^T for every output channel o and input
// channel c (g the 3x3 weight times its scales, in float64, U rounded once
// to float32) as (O/boc, 16, C/16, 16, boc): per block of output channels
// and transform element, one Blocked weight (zeros past Og and Cg). It is
// kept in the weight cache like the direct kernels' expanded weight.
func winoWeights(d *Dims, w Weights, sc *scaler, boc int) ([]float32, error) {
	const bc = gemm.BlockC
	n, ok := winoLen(d, boc)
	if !ok {
		return nil, errs.Memory("Winograd weight would take more than %d values", ternary.MaxElements)
	}
	nob, ncb := ceilDivPos(d.Og, boc), ceilDivPos(d.Cg, bc)
	per := 16 * ncb * bc * boc // one block of output channels
	return expandedF32(d, w, layoutWinogradF32, boc, n, func(vals []int8, out []float32) {
		par.Run(par.ChunksWork(nob, per*8), func(_, lo, hi int) {
			for ob := lo; ob < hi; ob++ {
				dst := out[ob*per:][:per]
				for j := range min(boc, d.Og-ob*boc) {
					o := ob*boc + j
					for c := range d.Cg {
						var g [3][3]float64
						for t := range 9 {
							kk := c*9 + t
							g[t/3][t%3] = float64(vals[o*d.K+kk]) * float64(sc.scale(o, kk/sc.bl))
						}
						var gg [4][3]float64 // G g
						for i := range 4 {
							for t := range 3 {
								gg[i][t] = winoG[i][0]*g[0][t] + winoG[i][1]*g[1][t] + winoG[i][2]*g[2][t]
							}
						}
						for i := range 4 {
							for jj := range 4 {
								u := gg[i][0]*winoG[jj][0] + gg[i][1]*winoG[jj][1] + gg[i][2]*winoG[jj][2]
								dst[((4*i+jj)*ncb*bc+c)*boc+j] = float32(u)
							}
						}
					}
				}
			}
		})
	})
}

// winoChunk is the most bytes of transformed input (16 planes of 4x4
// tiles: about 4x the input) one pass of winogradConvF32 writes before
// its multiply-adds read it back: samples beyond it run in further
// passes, so that the planes are read from the cache. 64@56 x8 in one
// pass (26 MB of planes) ran at 1.03x torch's float32 time per sample,
// against 0.70x for one sample.
var winoChunk = 4 << 20

// winoTiles keeps winogradPass's per-chunk tile buffers between calls.
var winoTiles = &buf.List[float32]{MaxCap: 1 << 22, MaxCount: 1}

// winogradConvF32 runs the float32 convolution d (3x3, stride 1, one
// group: useWinograd) as Winograd F(2x2, 3x3) with k's transforms and
// Blocked tiles, a few samples at a time (winoChunk).
func winogradConvF32(d *Dims, w Weights, x []float32, sc *scaler, out []float32, k *gemm.DirectF32Kernels) error {
	u, err := winoWeights(d, w, sc, k.BOC)
	if err != nil {
		return err
	}
	per := 16 * 4 * ceilDivPos(d.Ho, 2) * ceilDivPos(d.Wo, 2) * ceilDivPos(d.Cg, gemm.BlockC) * gemm.BlockC
	passes := min(d.N, ceilDivPos(d.N*per, winoChunk))
	for i := range passes {
		n0, n1 := d.N*i/passes, d.N*(i+1)/passes
		dc := *d
		dc.N = n1 - n0
		xs, os := d.C*d.H*d.W, d.O*d.Ho*d.Wo
		if err := winogradPass(&dc, u, x[n0*xs:n1*xs], sc, out[n0*os:n1*os], k); err != nil {
			return err
		}
	}
	return nil
}

// winogradPass is winogradConvF32 on the samples of d with the
// transformed weight u.
func winogradPass(d *Dims, u []float32, x []float32, sc *scaler, out []float32, k *gemm.DirectF32Kernels) error {
	const bc = gemm.BlockC
	boc, bnp := k.BOC, k.BNP
	th, tw := ceilDivPos(d.Ho, 2), ceilDivPos(d.Wo, 2)
	nob, ncb := ceilDivPos(d.Og, boc), ceilDivPos(d.Cg, bc)
	// the input padded at the bottom and right to whole tiles: 2*th+2 rows
	// of 2*tw+2 pixels (Ho = H+PadT+PadB-2 <= 2*th, so no padding shrinks)
	dp := *d
	dp.PadB, dp.PadR = 2*th+2-d.H-d.PadT, 2*tw+2-d.W-d.PadL
	g := newDirectGeom(&dp)
	nt, ok := mul(ternary.MaxElements, d.N, th, tw)
	xlen, ok1 := mul(ternary.MaxElements, d.N, ncb, g.plane, bc)
	vlen, ok2 := mul(ternary.MaxElements, 16, ncb, nt, bc)
	if !ok || !ok1 || !ok2 {
		return errs.Memory("Winograd buffers would take more than %d values", ternary.MaxElements)
	}
	xb, hx := directScratch.Sized(xlen)
	defer directScratch.Put(hx)
	blockInput(&dp, g, ncb, x, xb, k)

	v, hv := directScratch.Sized(vlen)
	defer directScratch.Put(hv)
	ldv := ncb * nt * bc // one transform element's plane
	par.Run(par.ChunksWork(d.N*ncb*th, tw*16*bc*passWork), func(_, lo, hi int) {
		for ui := lo; ui < hi && !par.Stopped(); ui++ {
			ty, cb, n := ui%th, ui/th%ncb, ui/(th*ncb)
			t0 := (n*th + ty) * tw
			k.WinoIn(tw, xb[((n*ncb+cb)*g.plane+2*ty*g.wp)*bc:], g.wp*bc, v[(cb*nt+t0)*bc:], ldv)
		}
	})

	offs := make([]int, ncb)
	for i := range offs {
		offs[i] = i * nt * bc
	}
	bias, zeros := make([]float32, nob*boc), make([]float32, boc)
	if sc.bias != nil {
		copy(bias, sc.bias[:d.Og])
	}
	per := ncb * bc * boc // one Blocked weight
	// Units: (block of output channels, block of tiles), the tiles
	// fastest: a worker's run of units reuses one block's 16 weights while
	// the tiles' V planes pass.
	nblk := ceilDivPos(nt, bnp)
	nb := ceilDivPos(nt, nblk) // tiles per block, the blocks within one of each other
	units := nob * nblk
	bounds := par.ChunksWork(units, nb*16*boc*d.Cg)
	// per chunk: 16 tiles' outputs m and the transformed y, kept between
	// calls (fresh ones, 35 KB a chunk and pass, brought the Go collector
	// into 64@56 x8 at 2 threads: 7 or 13 ms from call to call)
	mlen, ylen := 16*bnp*boc, 4*bnp*boc
	tiles, ht := winoTiles.Sized((len(bounds) - 1) * (mlen + ylen))
	defer winoTiles.Put(ht)
	par.Run(bounds, func(ci, lo, hi int) {
		m := tiles[ci*(mlen+ylen):][:mlen]
		y := tiles[ci*(mlen+ylen)+mlen:][:ylen]
		ldy := 2 * bnp * boc
		for ui := lo; ui < hi && !par.Stopped(); ui++ {
			ob, bi := ui/nblk, ui%nblk
			t0 := bi * nb
			np := min(nb, nt-t0)
			for xi := range 16 {
				b := zeros
				if xi == 5 {
					b = bias[ob*boc:][:boc]
				}
				k.Blocked(ncb, u[(ob*16+xi)*per:][:per], v[xi*ldv+t0*bc:], offs, b, m[xi*bnp*boc:], np)
			}
			k.WinoOut(np, m, bnp*boc, y, ldy)
			nc := min(boc, d.Og-ob*boc)
			// each run of tiles in one tile row: two output rows
			for p := 0; p < np; {
				t := t0 + p
				tx, ty, n := t%tw, t/tw%th, t/(tw*th)
				run := min(np-p, tw-tx)
				ow0 := 2 * tx
				cols := min(2*run, d.Wo-ow0)
				for i := range min(2, d.Ho-2*ty) {
					k.Transpose(out[((n*d.O+ob*boc)*d.Ho+2*ty+i)*d.Wo+ow0:], d.Ho*d.Wo, y[i*ldy+2*p*boc:], boc, cols, nc)
				}
				p += run
			}
		}
	})
	return nil
}
