package conv

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

// implicitMinPix is the fewest output pixels (over all samples) for which
// the implicit GEMM runs: its weights take a byte per value, repacked on
// every call, which fewer pixels do not amortize (measured: 1x1 4096->4096
// over 16 pixels, 7.3 ms by im2col, 17 ms implicit; 3x3 512->512 over 49
// pixels, 5.2 ms by im2col, 3.5 ms implicit).
const implicitMinPix = 32

// implicitGeom is the padded channels-last layout of one sample: hp x wp
// pixels of cp bytes (groups x cg4 channels, each group's rounded up to
// whole quads).
type implicitGeom struct {
	hp, wp, cg4, cp, per int
}

func newImplicitGeom(d *Dims) implicitGeom {
	g := implicitGeom{hp: d.H + d.PadT + d.PadB, wp: d.W + d.PadL + d.PadR, cg4: roundUp(d.Cg, 4)}
	g.cp = d.Groups * g.cg4
	g.per = g.hp * g.wp * g.cp
	return g
}

// useImplicit reports whether the int8 im2col (or 1x1) convolution d runs as
// the implicit GEMM: the kernel set has one, every output channel has one
// scale block (the kernel's K order, tap by tap, cuts across blocks of the
// flattened weight), and the padded copy stays within 4x the input plus a
// MB with offsets in int32.
func useImplicit(d *Dims, sc *scaler, ks *gemm.Kernels) bool {
	if ks.Implicit == nil || sc.nb != 1 || d.Depthwise() || d.N*d.P < implicitMinPix {
		return false
	}
	g := newImplicitGeom(d)
	padded, ok := mul(1<<62, d.N, g.per)
	return ok && g.per < 1<<31 && padded <= 4*d.XLen+1<<20
}

// implicitKernels are the kernels of the implicit GEMM: the GEMM itself and
// the quantizers into its layout.
type implicitKernels struct {
	gemm gemm.ImplicitI8
	q8   gemm.QuantU8x8
	q4   gemm.QuantU8x4
}

// implicitOf returns the kernel set's implicit kernels.
func implicitOf(ks *gemm.Kernels) implicitKernels {
	return implicitKernels{ks.Implicit, ks.QuantU8x8, ks.QuantU8x4}
}

// implicitConv computes the convolution with the kernels k from the
// weight's implicit blocks wl (implicitWeights) and the activations x with
// their scales a (quantized into the implicit layout by layoutU8): work
// units (sample, group, range of implicitPix output pixels, block), blocks
// fastest so that a range's activations stay in cache, each folded into
// out as soon as its sums are done.
func implicitConv(d *Dims, wl *weightLayout, x, a []float32, sc *scaler, out []float32, k implicitKernels) {
	g := newImplicitGeom(d)
	xp, xh := layoutU8(d, x, a, g, k)
	defer layoutScratch.Put(xh)
	khw, quads := d.KH*d.KW, g.cg4/4
	blen, nob, wb, corr := wl.blen, wl.nob, wl.blocks, wl.corr
	taps := make([]int, 0, khw)
	for i := range d.KH {
		for j := range d.KW {
			taps = append(taps, (i*d.DilH*g.wp+j*d.DilW)*g.cp)
		}
	}
	segs := gemm.ImplicitSegs(taps, quads)
	nr := ceilDivPos(d.P, implicitPix)
	units := d.N * d.Groups * nr * nob
	par.Run(par.ChunksWork(units, implicitPix*gemm.ImplicitOC*d.K), func(_, lo, hi int) {
		px := make([]int, implicitPix)
		var rows [gemm.ImplicitOC * implicitPix]int32 // the sums, a row per channel
		for u := lo; u < hi; u++ {
			ob, r, gi, n := splitUnit(u, nob, nr, d.Groups)
			p0 := r * implicitPix
			cnt := min(implicitPix, d.P-p0)
			npx := roundUp(cnt, gemm.ImplicitPix)
			if ob == 0 || u == lo {
				oh, ow := p0/d.Wo, p0%d.Wo
				for i := range npx {
					px[i] = n*g.per + (oh*d.StrideH*g.wp+ow*d.StrideW)*g.cp + gi*g.cg4
					if i < cnt-1 { // a partial tile repeats its last pixel
						if ow++; ow == d.Wo {
							oh, ow = oh+1, 0
						}
					}
				}
			}
			b := gi*nob + ob
			k.gemm(wb[b*blen:][:blen], xp, px[:npx], segs, &corr[b], rows[:], implicitPix)
			for o := range min(gemm.ImplicitOC, d.Og-ob*gemm.ImplicitOC) {
				oc := gi*d.Og + ob*gemm.ImplicitOC + o
				foldI32(sc, out[(n*d.O+oc)*d.P+p0:][:cnt], rows[o*implicitPix:][:cnt], oc, 0, a[n])
			}
		}
	})
}

// actZero is the byte of activation 0 in the implicit layout (q + 128).
const actZero = 0x80

// layoutU8 writes the samples x (N, C, H, W) quantized with their scales a
// in the implicit layout g, into a layoutScratch buffer (returned with its
// handle): byte Quant8(x, a_n)+128 of channel c at pixel (h+PadT, w+PadL),
// channel offset group*cg4 + c%Cg; the spatial padding holds actZero. Runs
// of 8 channels go through k.q8, the rest of a group's channels a quad at a
// time through k.q4. The channels that round a group up to a quad (weights
// 0) get a copy of its last channel.
func layoutU8(d *Dims, x, a []float32, g implicitGeom, k implicitKernels) ([]byte, *[]byte) {
	xp, h := layoutScratch.Sized(d.N * g.per)
	rowLen := g.wp * g.cp
	hw := d.H * d.W
	par.Run(par.ChunksWork(d.N*g.hp, rowLen), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			n, h := r/g.hp, r%g.hp-d.PadT
			dst := xp[r*rowLen:][:rowLen]
			if h < 0 || h >= d.H {
				fill(dst, actZero)
				continue
			}
			fill(dst[:d.PadL*g.cp], actZero)
			fill(dst[(d.PadL+d.W)*g.cp:], actZero)
			body := dst[d.PadL*g.cp:][:d.W*g.cp]
			for gi := range d.Groups {
				for c0 := 0; c0 < d.Cg; {
					dst, src := body[gi*g.cg4+c0:], x[(n*d.C+gi*d.Cg+c0)*hw+h*d.W:]
					if c0+8 <= d.Cg {
						k.q8(dst, src, hw, d.W, g.cp, a[n])
						c0 += 8
					} else {
						k.q4(dst, src, hw, d.W, g.cp, min(4, d.Cg-c0), a[n])
						c0 += 4
					}
				}
			}
		}
	})
	return xp, h
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
// megabytes cost page faults and garbage collections that took as long as
// the convolution itself when called from Python (a 1x1 256->64 @56 int8
// call: 2.2-4.6 ms with fresh buffers, 1.9 ms reused). They come back with
// stale contents; every user writes all it reads. Buffers above 256 MB are
// not kept.
var actScratch, layoutScratch = newScratch(), newScratch()

func newScratch() *buf.List[byte] { return &buf.List[byte]{MaxCap: 1 << 28, MaxCount: par.MaxThreads} }

// asInt8 views b as int8 values.
func asInt8(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
