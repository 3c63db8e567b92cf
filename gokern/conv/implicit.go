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

// implicitConv computes the convolution with kern from the A panels apan
// (PackA) and the quantized activations: weights repacked into blocks of
// gemm.ImplicitOC output channels (gemm.PackImplicit), then work units
// (sample, group, range of implicitPix output pixels, block), blocks
// fastest so that a range's activations stay in cache, each folded into
// out as soon as its sums are done.
func implicitConv(d *Dims, apan []byte, acts *activations, sc *scaler, out []float32, kern gemm.ImplicitI8) {
	g := newImplicitGeom(d)
	xp, xh := nhwcU8(d, acts.q, g)
	defer layoutScratch.Put(xh)
	khw, quads := d.KH*d.KW, g.cg4/4
	blen := gemm.ImplicitBlockLen(khw, quads)
	nob := ceilDivPos(d.Og, gemm.ImplicitOC)
	wbBytes, wh := weightScratch.Sized(d.Groups * nob * blen)
	defer weightScratch.Put(wh)
	wb := asInt8(wbBytes)
	corr := make([][gemm.ImplicitOC]int32, d.Groups*nob)
	gpan := gemm.Panels(d.Og) * d.K
	par.Run(par.ChunksWork(d.Groups*nob, blen), func(_, lo, hi int) {
		for b := lo; b < hi; b++ {
			gemm.PackImplicit(wb[b*blen:][:blen], &corr[b], apan[b/nob*gpan:][:gpan], d.Cg, khw, b%nob)
		}
	})
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
			kern(wb[b*blen:][:blen], xp, px[:npx], segs, &corr[b], rows[:], implicitPix)
			for o := range min(gemm.ImplicitOC, d.Og-ob*gemm.ImplicitOC) {
				oc := gi*d.Og + ob*gemm.ImplicitOC + o
				foldI32(sc, out[(n*d.O+oc)*d.P+p0:][:cnt], rows[o*implicitPix:][:cnt], oc, 0, acts.a[n])
			}
		}
	})
}

// actZero is the byte of activation 0 in the implicit layout (q + 128).
const actZero = 0x80

// nhwcU8 writes the quantized samples q (N, C, H, W) in the implicit
// layout g, into a layoutScratch buffer (returned with its handle): byte q+128 of channel c at pixel (h+PadT, w+PadL), channel
// offset group*cg4 + c%Cg; the spatial padding holds actZero. The bytes of
// the channels that round a group up to a quad keep what the scratch
// buffer held: their weights are 0.
func nhwcU8(d *Dims, q []int8, g implicitGeom) ([]byte, *[]byte) {
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
				for c0 := 0; c0 < d.Cg; c0 += 4 {
					src := q[(n*d.C+gi*d.Cg+c0)*hw+h*d.W:]
					at := gi*g.cg4 + c0
					if c0+8 <= d.Cg {
						c0 += 4 // the loop's step adds the other 4
						transpose8(body[at:], src, hw, d.W, g.cp)
						continue
					}
					if c0+4 <= d.Cg {
						s0, s1, s2, s3 := src[:d.W], src[hw:][:d.W], src[2*hw:][:d.W], src[3*hw:][:d.W]
						pd := unsafe.Pointer(unsafe.SliceData(body[at:]))
						for w := range d.W {
							v := uint32(uint8(s0[w])) | uint32(uint8(s1[w]))<<8 | uint32(uint8(s2[w]))<<16 | uint32(uint8(s3[w]))<<24
							*(*uint32)(unsafe.Add(pd, w*g.cp)) = v ^ 0x80808080
						}
						continue
					}
					for c := range d.Cg - c0 {
						s := src[c*hw:][:d.W]
						for w := range d.W {
							body[w*g.cp+at+c] = byte(s[w]) ^ actZero
						}
					}
				}
			}
		}
	})
	return xp, h
}

// transpose8 writes 8 channels of one input row (src: channel i's w values
// at src[i*hw:]) as bytes q+128 at dst[x*cp : x*cp+8] for pixel x: 8x8
// blocks transposed in 64-bit registers (three rounds of swaps of bytes,
// 16-bit and 32-bit pairs between rows), the tail byte by byte.
func transpose8(dst []byte, src []int8, hw, w, cp int) {
	_ = dst[(w-1)*cp+7]
	_ = src[7*hw+w-1]
	ps := unsafe.Pointer(unsafe.SliceData(src))
	pd := unsafe.Pointer(unsafe.SliceData(dst))
	x := 0
	for ; x+8 <= w; x += 8 {
		r0, r1 := *(*uint64)(unsafe.Add(ps, x)), *(*uint64)(unsafe.Add(ps, hw+x))
		r2, r3 := *(*uint64)(unsafe.Add(ps, 2*hw+x)), *(*uint64)(unsafe.Add(ps, 3*hw+x))
		r4, r5 := *(*uint64)(unsafe.Add(ps, 4*hw+x)), *(*uint64)(unsafe.Add(ps, 5*hw+x))
		r6, r7 := *(*uint64)(unsafe.Add(ps, 6*hw+x)), *(*uint64)(unsafe.Add(ps, 7*hw+x))
		r0, r1 = swapPairs(r0, r1, 0x00ff00ff00ff00ff, 8)
		r2, r3 = swapPairs(r2, r3, 0x00ff00ff00ff00ff, 8)
		r4, r5 = swapPairs(r4, r5, 0x00ff00ff00ff00ff, 8)
		r6, r7 = swapPairs(r6, r7, 0x00ff00ff00ff00ff, 8)
		r0, r2 = swapPairs(r0, r2, 0x0000ffff0000ffff, 16)
		r1, r3 = swapPairs(r1, r3, 0x0000ffff0000ffff, 16)
		r4, r6 = swapPairs(r4, r6, 0x0000ffff0000ffff, 16)
		r5, r7 = swapPairs(r5, r7, 0x0000ffff0000ffff, 16)
		r0, r4 = swapPairs(r0, r4, 0x00000000ffffffff, 32)
		r1, r5 = swapPairs(r1, r5, 0x00000000ffffffff, 32)
		r2, r6 = swapPairs(r2, r6, 0x00000000ffffffff, 32)
		r3, r7 = swapPairs(r3, r7, 0x00000000ffffffff, 32)
		const z = 0x8080808080808080
		at := unsafe.Add(pd, x*cp)
		*(*uint64)(at) = r0 ^ z
		*(*uint64)(unsafe.Add(at, cp)) = r1 ^ z
		*(*uint64)(unsafe.Add(at, 2*cp)) = r2 ^ z
		*(*uint64)(unsafe.Add(at, 3*cp)) = r3 ^ z
		*(*uint64)(unsafe.Add(at, 4*cp)) = r4 ^ z
		*(*uint64)(unsafe.Add(at, 5*cp)) = r5 ^ z
		*(*uint64)(unsafe.Add(at, 6*cp)) = r6 ^ z
		*(*uint64)(unsafe.Add(at, 7*cp)) = r7 ^ z
	}
	for ; x < w; x++ {
		for i := range 8 {
			dst[x*cp+i] = byte(src[i*hw+x]) ^ actZero
		}
	}
}

// swapPairs exchanges the high part of a's pairs of fields with the low
// part of b's (fields of shift bits, mask selecting the low ones): one
// round of transpose8.
func swapPairs(a, b, mask uint64, shift uint) (uint64, uint64) {
	t := (a>>shift ^ b) & mask
	return a ^ t<<shift, b ^ t
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

// Scratch buffers per role (quantized activations, the implicit layout,
// repacked weights), kept from call to call (gokern/buf): fresh buffers of
// megabytes cost page faults and garbage collections that took as long as
// the convolution itself when called from Python (a 1x1 256->64 @56 int8
// call: 2.2-4.6 ms with fresh buffers, 1.9 ms reused). They come back with
// stale contents; every user writes all it reads. Buffers above 256 MB are
// not kept.
var actScratch, layoutScratch, weightScratch = newScratch(), newScratch(), newScratch()

func newScratch() *buf.List[byte] { return &buf.List[byte]{MaxCap: 1 << 28, MaxCount: par.MaxThreads} }

// asInt8 views b as int8 values.
func asInt8(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
