package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// depthwiseLanes is depthwise (direct.go) for float32 activations with the
// channels in the vector lanes, for small planes, where depthwisePadded's
// per-channel cost dominates. A unit is (sample, block of L = dw.Lanes
// consecutive channels, band of output rows):
//
//   - the band's input rows of the L channels are interleaved (dw.Interleave)
//     straight into a zero-padded position-major tile: padded row r, padded
//     column c, channel l at (r*tw+c)*L+l, tw = W+PadL+PadR;
//   - for each scale block, dw.LanesF32 sums every tap of the block in the
//     generic kernel's order, output (oh, ow) reading tile position
//     (oh*sH+kh*dilH, ow*sW+kw*dilW): products of -1, 0, +1 are exact and
//     the padding adds w*0 = ±0 to sums that start at +0, so the sums are
//     the generic kernel's bits. Zero weights are never skipped: on finite
//     x they add ±0 (nothing), on NaN and Inf NaN, as the generic kernel
//     does when x is not known finite.
//     At stride 1 without column dilation, dw.LanesRowsF32 runs the same
//     sums with each input vector loaded once per kernel row (3 and 5
//     columns; else LanesF32);
//   - with one scale block (per tensor or per channel), LanesF32 also folds
//     (s*scale, then + bias, rounded after each as the fold does) and
//     dw.Deinterleave stores the block's channels straight into their NCHW
//     runs; with several, the sums of each block are deinterleaved and the
//     fold (foldF32) writes each channel's run.
//
// Only for one output channel per group (Og == 1) and strides 1 and 2 (the
// kernels' assembly). The interleave writes the band's input rows straight
// into the tile (a position table: row i/W, column i%W); the tile's
// padding columns are never written (zero from its allocation), its rows of
// padding are cleared in every unit. The last block of C % L channels runs
// the generic interleave on its lanes (the other lanes keep stale values,
// never stored).

// dwLanesTile bounds a unit's padded tile (floats, per worker).
const dwLanesTile = 1 << 14

// dwLanesScratch keeps the workers' tiles and sums between calls (a fresh
// 100 KB a worker and call cost more than a small layer's work).
var dwLanesScratch = &buf.List[float32]{MaxCap: 1 << 24, MaxCount: par.MaxThreads}

// useLanes reports whether the float32 depthwise kernel on d runs
// depthwiseLanes on the conv_dw family dw: wherever its kernels apply (one
// output channel per group, column stride 1 or 2). Measured on 2026-11-24
// (AMD EPYC Zen 4, 2 vCPUs, 1 thread; go test ./gokern/ops/conv2d -run X
// -bench BenchmarkDepthwiseLanes -benchtime 200x, us per call, per-channel
// depthwisePadded -> depthwiseLanes, avx512 / avx2):
//
//	3x3   32@112 s1 N=1  300 -> 234 / 304 -> 320 (tie: 4 runs 293-312 -> 259-328)
//	3x3   32@112 s1 N=8  3224 -> 2241 / 3747 -> 2673
//	3x3   96@112 s2 N=1  922 -> 347 / 1007 -> 380
//	3x3  144@56  s1 N=8  4078 -> 2888 / 4345 -> 2975
//	3x3  144@56  s2 N=1  401 -> 148 / 433 -> 192
//	3x3  192@28  s1 N=1  152 -> 124 / 223 -> 129
//	3x3  384@14  s1 N=8  1028 -> 386 / 1065 -> 443
//	3x3  576@14  s2 N=8  2092 -> 341 / 2226 -> 355
//	3x3  960@7   s1 N=1  185 -> 68 / 186 -> 76
//	3x3  960@7   s1 N=8  1456 -> 295 / 1969 -> 311
//	5x5  240@14  s1 N=8  981 -> 409 / 980 -> 455
//	5x5  240@28  s1 N=8  2420 -> 1508 / 2944 -> 1881
//
// faster on every plane size measured, 7x7 to 112x112, both strides (the
// per-channel kernel's cost per plane is paid once per 16 / 8 channels);
// the per-channel kernel stays for channel multipliers and column strides
// above 2 (and int8 activations: see useLanesI8).
func useLanes(d *Dims, dw *gemm.DepthwiseKernels) bool {
	return dwLanesOn && dw != nil && dw.Lanes > 0 && dw.LanesF32 != nil && d.Og == 1 && d.StrideW <= 2
}

// useLanesI8 reports whether the int8 depthwise kernel on d runs
// depthwiseLanes on dw: as useLanes, with one scale block (the int8 fold in
// LanesF32) and K < 2^16 (|sum| <= 128K < 2^24: the float32 sums of int8
// values are then exact integers, the int32 sums' values, whatever their
// order), and for
// output planes up to 56x56 or column stride 2. Measured on 2026-11-24
// (same machine and benchmark, act_bits 8, us per call, per-channel
// depthwisePadded -> depthwiseLanes, avx512 / avx2):
//
//	3x3   32@112 s1 N=1  274 -> 294 / 298 -> 319 (slower: the int8 per-channel kernel stays)
//	3x3   32@112 s1 N=8  2685 -> 2848 / 3062 -> 2904
//	3x3   96@112 s2 N=1  937 -> 467 / 976 -> 583
//	3x3  144@56  s1 N=1  361 -> 371 / 445 -> 380
//	3x3  144@56  s1 N=8  3567 -> 3168 / 3951 -> 3629
//	3x3  192@28  s1 N=8  1310 -> 803 / 1275 -> 1020
//	3x3  384@14  s1 N=8  963 -> 429 / 1012 -> 460
//	3x3  576@14  s2 N=8  1843 -> 373 / 1895 -> 397
//	3x3  960@7   s1 N=8  1506 -> 344 / 1503 -> 351
//	5x5  240@14  s1 N=8  874 -> 461 / 1010 -> 487
//	5x5  240@28  s1 N=8  2130 -> 1830 / 2277 -> 1855
func useLanesI8(d *Dims, sc *scaler, dw *gemm.DepthwiseKernels) bool {
	return useLanes(d, dw) && dw.InterleaveI8 != nil && sc.nb == 1 && d.K < 1<<16 &&
		(d.P <= 56*56 || d.StrideW == 2)
}

// dwLanesOn lets tests and benchmarks turn depthwiseLanes off.
var dwLanesOn = true

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

// depthwiseLanes has depthwise's arguments and the conv_dw family dw
// (dw.Lanes > 0), with interleave dw.Interleave (float32 activations, acts
// nil) or dw.InterleaveI8 (int8: acts set, one scale block, see
// useLanesI8).
func depthwiseLanes[T elem](d *Dims, apan []byte, src []T, acts *activations, sc *scaler, out []float32,
	dw *gemm.DepthwiseKernels, interleave func(dst []float32, src []T, ld int, pos []int)) {
	L := dw.Lanes
	np := gemm.Panels(d.Og)
	g := newDWLanesGeom(d, L)
	bands := ceilDivPos(d.Ho, g.rows)
	blocks := ceilDivPos(d.C, L)
	hw := d.H * d.W
	// the weights of block cb, tap k, lane l at wv[(cb*K+k)*L+l]; with one
	// scale block, the lanes' scales and biases (the fold in LanesF32)
	wv := make([]float32, blocks*d.K*L)
	var scv, biasv []float32
	mode := 0
	if sc.nb == 1 {
		mode = 1
		scv = make([]float32, blocks*L)
		biasv = make([]float32, blocks*L)
		if sc.bias != nil {
			mode = 3
		}
	}
	var div []float32 // int8: sample n's activation scale in each lane at n*L
	if acts != nil {
		mode |= 4
		div = make([]float32, d.N*L)
		for i := range div {
			div[i] = acts.a[i/L]
		}
	}
	for o := range d.O {
		cb, l := o/L, o%L
		panel := apan[o*np*d.K:][:d.K]
		for k, code := range panel {
			wv[(cb*d.K+k)*L+l] = float32(gemm.Weights(code)[0])
		}
		if mode != 0 {
			scv[o] = sc.scale(o, 0)
			biasv[o], _ = sc.biasAt(o, 0)
		}
	}
	tapAt := make([]int, d.K) // tap k's offset in the tile
	for k := range tapAt {
		tapAt[k] = (k/d.KW*d.DilH*g.tw + k%d.KW*d.DilW) * L
	}
	// input position i of a band's rows (row i/W, column i%W) in the tile
	// from its first input row
	pos := make([]int, g.trows*d.W)
	for i := range pos {
		pos[i] = (i/d.W*g.tw + d.PadL + i%d.W) * L
	}
	row := g.tw * L
	par.Run(par.Chunks(d.N*blocks*bands, 1), func(_, lo, hi int) {
		// one kept buffer a worker: tile, sums (position-major), sums
		// (channel-major); the tile cleared once (its padding columns are
		// never written after)
		nt, ns := g.trows*row, g.rows*d.Wo*L
		scratch, keep := dwLanesScratch.Sized(nt + 2*ns)
		defer dwLanesScratch.Put(keep)
		tile, sumsT, sums := scratch[:nt], scratch[nt:][:ns], scratch[nt+ns:][:ns]
		clear(tile)
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
			ihLo, ihHi := min(max(0, r0), r0+nr), max(min(d.H, r0+nr), r0)
			clear(tile[:max(0, ihLo-r0)*row]) // rows of padding
			clear(tile[max(0, ihHi-r0)*row : nr*row])
			if ihLo < ihHi {
				cnt := (ihHi - ihLo) * d.W
				first := (n*d.C+c0)*hw + ihLo*d.W
				at := tile[(ihLo-r0)*row:]
				if lv == L {
					interleave(at, src[first:(n*d.C+c0+L-1)*hw+ihHi*d.W], hw, pos[:cnt])
				} else {
					for l := range lv {
						for i, v := range src[first+l*hw:][:cnt] {
							at[pos[i]+l] = float32(v)
						}
					}
				}
			}
			span := (oh1 - oh0) * d.Wo
			st := sumsT[:span*L]
			ws := wv[cb*d.K*L:][:d.K*L]
			dst := out[(n*d.O+c0)*d.P+oh0*d.Wo:]
			xrow := d.StrideH * row
			if mode != 0 {
				var dv []float32
				if div != nil {
					dv = div[n*L:][:L]
				}
				if d.StrideW != 1 || d.DilW != 1 ||
					!dw.LanesRowsF32(st, tile, ws, d.KH, d.KW, d.DilH*row, d.Wo, oh1-oh0, xrow, dv, scv[c0:][:L], biasv[c0:][:L], mode) {
					dw.LanesF32(st, tile, tapAt, ws, d.StrideW, d.Wo, oh1-oh0, xrow, dv, scv[c0:][:L], biasv[c0:][:L], mode)
				}
				if lv == L {
					dw.Deinterleave(dst[:(L-1)*d.P+span], d.P, st, span)
					continue
				}
				dw.Deinterleave(sums, span, st, span)
				for l := range lv {
					copy(dst[l*d.P:][:span], sums[l*span:][:span])
				}
				continue
			}
			for b := range sc.nb {
				dw.LanesF32(st, tile, tapAt[b*sc.bl:][:sc.bl], ws[b*sc.bl*L:][:sc.bl*L], d.StrideW, d.Wo, oh1-oh0, xrow, nil, nil, nil, 0)
				dw.Deinterleave(sums, span, st, span)
				for l := range lv {
					o := c0 + l
					foldF32(sc, dst[l*d.P:][:span], sums[l*span:][:span], o, b, 0)
				}
			}
		}
	})
}
