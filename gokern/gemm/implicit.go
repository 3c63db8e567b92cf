package gemm

import "unsafe"

// # Implicit GEMM for int8 activations
//
// The im2col algorithm copies every input value kH*kW times into B panels,
// and on AVX2 that copy costs more than the multiply-adds. The implicit GEMM
// reads the activations where they are instead: gokern/ops/conv2d writes the
// sample once as unsigned bytes u = q + 128, channels last (NHWC) and
// zero-padded (u = 128) in space, so that for every output pixel and kernel
// tap the channels to multiply are contiguous. A channel quad (4 bytes) is
// broadcast to every lane and multiplied with 16 output channels' weights
// for those 4 channels at once.
//
// Weights are repacked per call by PackImplicit, per group and block of
// ImplicitOC output channels, as int8 values -1, 0, +1 in quads: for each
// quad, in the order the kernel reads them (kernel tap, then channel quad),
// 64 bytes, byte 4*o + c = w(o, channel 4q+c). The sums the kernel returns
// are of w*u = w*q + 128*w; corr[o] = 128 * sum_k w(o, k), from the packer,
// is what the fold (FoldTiles) subtracts.
//
// The kernel walks the K dimension as segments (ImplicitSegs): runs of quads
// that are contiguous in the activations (a whole row of kernel taps when
// the channels fill the row) at a byte offset from the pixel, each with a
// flag telling the kernel to widen its 16-bit partial sums into int32 (at
// least every ImplicitMaxQuads quads: |w*u| pairs are at most 510, so 64 of
// them fit in an int16 lane).

// ImplicitOC and ImplicitPix are the output channels and pixels of one tile
// of the implicit-GEMM kernel.
const (
	ImplicitOC  = 16
	ImplicitPix = 6
	// ImplicitMaxQuads is the most quads between two flushes.
	ImplicitMaxQuads = 64
	// implicitQuadBytes is the weight bytes of one quad of a block.
	implicitQuadBytes = 4 * ImplicitOC
)

// ImplicitI8 computes the implicit GEMM's int32 sums as tiles, pixel
// after pixel: for each pixel i < len(px) (a multiple of ImplicitPix) and
// channel o < ImplicitOC,
//
//	t[i*ImplicitOC+o] = sum over segments s, quads q < n_s, c < 4 of
//	    w[(Q_s+q)*64 + 4*o + c] * x[px[i] + off_s + 4*q + c]
//
// where segment s is segs[3s:3s+3] = (off_s, n_s, flush_s) and Q_s the
// quads of the segments before it. The weights are -1, 0 or +1, the
// segments are ImplicitSegs's, every byte read lies inside x and len(t) >=
// ImplicitOC*len(px) (the wrappers panic otherwise). int32 arithmetic
// wraps, so t is exact whenever the true value fits. The corrections
// (PackImplicit's corr) are left to the fold (FoldTiles), which turns the
// tiles into output rows.
type ImplicitI8 func(w []int8, x []byte, px []int, segs []int32, t []int32)

// ImplicitI8Pair is ImplicitI8 for two blocks at once: the block at w[:blen]
// into t0 and the block at w[blen:] into t1. A kernel set that has one runs
// it where a group has two blocks left (it reads each pixel's activations
// once for both).
type ImplicitI8Pair func(w []int8, blen int, x []byte, px []int, segs []int32, t0, t1 []int32)

// implicitPairBlocks returns the two weight blocks of an ImplicitI8Pair call
// (the wrappers panic unless blen > 0 and w holds both blocks).
func implicitPairBlocks(w []int8, blen int) (w0, w1 []int8) {
	if blen <= 0 || len(w)/2 < blen { // a division: nothing wraps
		panic("gemm: implicit pair arguments malformed")
	}
	return w[:blen], w[blen : 2*blen]
}

// implicitI8PairGeneric is the generic ImplicitI8Pair, the oracle: the
// generic kernel on each block.
func implicitI8PairGeneric(w []int8, blen int, x []byte, px []int, segs []int32, t0, t1 []int32) {
	w0, w1 := implicitPairBlocks(w, blen)
	implicitI8Generic(w0, x, px, segs, t0)
	implicitI8Generic(w1, x, px, segs, t1)
}

// FoldTiles turns n pixels of an ImplicitI8 tile t into float32 output
// rows: for i < n and o < noc (1 to ImplicitOC),
//
//	dst[o*ldd+i] = float32(float32(float32(t[i*16+o] - corr[o]) / a) * sc[o])
//
// plus bias[o] when bias is not nil, each operation rounded to float32 in
// that order (the int8 fold's arithmetic, FoldI32, per channel), with ldd
// >= n, len(t) >= 16*n and dst holding (noc-1)*ldd+n values (the wrappers
// panic otherwise). stream asks for non-temporal stores where the rows
// allow them (the caller then runs its set's Fence before the output is
// read). buf is the kernel's working space, at least FoldTilesScratch
// values (contents ignored and overwritten): the caller keeps one per
// goroutine, so that no call clears a buffer of its own.
type FoldTiles func(dst []float32, ldd int, t []int32, n, noc int, corr *[ImplicitOC]int32, a float32,
	sc, bias *[ImplicitOC]float32, stream bool, buf []int32)

// FoldTilesScratch is the least length of FoldTiles' buf.
const FoldTilesScratch = ImplicitOC * foldTilesPart

// foldTilesPart is the pixels per pass of a FoldTiles buffer: an implicit
// work unit's (96).
const foldTilesPart = 96

// checkFoldTiles panics on a bad FoldTiles call.
func checkFoldTiles(ld, ldd, lt, n, noc, lbuf int) {
	// ld >= (noc-1)*ldd + n, written with a division so that no ldd wraps
	if n < 1 || noc < 1 || noc > ImplicitOC || ldd < n || lt/ImplicitOC < n || ld < n || lbuf < FoldTilesScratch ||
		(noc > 1 && (ld-n)/(noc-1) < ldd) {
		panic("gemm: bad FoldTiles arguments")
	}
}

// foldTilesGeneric is the generic FoldTiles, the oracle (stream ignored).
func foldTilesGeneric(dst []float32, ldd int, t []int32, n, noc int, corr *[ImplicitOC]int32, a float32,
	sc, bias *[ImplicitOC]float32, _ bool, buf []int32) {
	checkFoldTiles(len(dst), ldd, len(t), n, noc, len(buf))
	foldTilesRange(dst, ldd, t, 0, n, noc, corr, a, sc, bias)
}

// foldTilesRange is foldTilesGeneric's arithmetic for pixels i0 <= i < i1.
func foldTilesRange(dst []float32, ldd int, t []int32, i0, i1, noc int, corr *[ImplicitOC]int32, a float32,
	sc, bias *[ImplicitOC]float32) {
	for o := range noc {
		row := dst[o*ldd:]
		for i := i0; i < i1; i++ {
			v := Fold1I32(t[i*ImplicitOC+o]-corr[o], a, sc[o])
			if bias != nil {
				v = v + bias[o]
			}
			row[i] = v
		}
	}
}

// ImplicitSegs returns the segments of one output pixel's K dimension: taps
// at byte offsets taps[i] (in the order of the packed weights), each
// covering quads channel quads; runs that continue one another in x are
// merged, and flushes are set at least every ImplicitMaxQuads quads and on
// the last segment.
func ImplicitSegs(taps []int, quads int) []int32 {
	var segs []int32
	budget := ImplicitMaxQuads
	for _, off := range taps {
		for q := 0; q < quads; {
			m := min(quads-q, budget)
			o := off + 4*q
			if k := len(segs) - 3; k >= 0 && segs[k+2] == 0 && int(segs[k])+4*int(segs[k+1]) == o {
				segs[k+1] += int32(m)
			} else {
				segs = append(segs, int32(o), int32(m), 0)
			}
			q += m
			if budget -= m; budget == 0 {
				segs[len(segs)-1] = 1
				budget = ImplicitMaxQuads
			}
		}
	}
	if len(segs) > 0 {
		segs[len(segs)-1] = 1
	}
	return segs
}

// checkImplicit panics unless the buffers hold what ImplicitI8 reads and
// writes; it returns the quads of segs.
func checkImplicit(w []int8, x []byte, px []int, segs []int32, t []int32) int {
	if len(segs) == 0 || len(segs)%3 != 0 || len(px) == 0 || len(px)%ImplicitPix != 0 ||
		len(t)/ImplicitOC < len(px) {
		panic("gemm: implicit kernel arguments malformed")
	}
	quads, since, span := 0, 0, 0
	for s := 0; s < len(segs); s += 3 {
		off, n := int(segs[s]), int(segs[s+1])
		if off < 0 || n < 1 {
			panic("gemm: implicit segment malformed")
		}
		quads += n
		if since += n; since > ImplicitMaxQuads {
			panic("gemm: implicit segments flush too rarely")
		}
		if segs[s+2] != 0 {
			since = 0
		}
		span = max(span, off+4*n)
	}
	if segs[len(segs)-1] == 0 || len(w) < implicitQuadBytes*quads {
		panic("gemm: implicit segments or weights malformed")
	}
	for _, p := range px {
		if p < 0 || p > len(x)-span {
			panic("gemm: implicit pixel outside the activations")
		}
	}
	return quads
}

// implicitI8Generic is the generic ImplicitI8, the oracle.
func implicitI8Generic(w []int8, x []byte, px []int, segs []int32, t []int32) {
	checkImplicit(w, x, px, segs, t)
	for i, p := range px {
		var acc [ImplicitOC]int32
		wq := w
		for s := 0; s < len(segs); s += 3 {
			off, n := int(segs[s]), int(segs[s+1])
			for q := range n {
				xv := x[p+off+4*q:][:4]
				wv := wq[q*implicitQuadBytes:][:implicitQuadBytes]
				for o := range acc {
					for c, u := range xv {
						acc[o] += int32(wv[4*o+c]) * int32(u)
					}
				}
			}
			wq = wq[n*implicitQuadBytes:]
		}
		copy(t[i*ImplicitOC:][:ImplicitOC], acc[:])
	}
}

// ImplicitBlockLen is the bytes of one packed block (ImplicitOC output
// channels) for taps kernel taps of quads channel quads each.
func ImplicitBlockLen(taps, quads int) int { return taps * quads * implicitQuadBytes }

// PackImplicit writes the packed block of output channels 16*ob .. of one
// group into dst (ImplicitBlockLen(taps, ceil(cg/4)) bytes) and their
// corrections into corr, from the group's A panels (PackA's layout: panel i
// of the group at panels[i*k:], k = cg*taps, row k = channel*taps + tap).
// Channels past the group's (panels past len(panels)/k, channels past cg)
// get zero weights.
func PackImplicit(dst []int8, corr *[ImplicitOC]int32, panels []byte, cg, taps, ob int) {
	k := cg * taps
	quads := (cg + 3) / 4
	np := len(panels) / k
	if len(dst) < ImplicitBlockLen(taps, quads) {
		panic("gemm: implicit block buffer too short")
	}
	pd := unsafe.Pointer(unsafe.SliceData(dst))
	for pi := range MR {
		pn := MR*ob + pi
		if pn >= np {
			for i := range taps * quads {
				clear(dst[i*implicitQuadBytes+16*pi:][:16])
			}
			for r := range MR {
				corr[MR*pi+r] = 0
			}
			continue
		}
		row := panels[pn*k : (pn+1)*k]
		var total [MR]int
		for t := range taps {
			var sums uint64 // code sums (0..2) of rows 0..3, 16-bit lanes
			base := t*quads*implicitQuadBytes + 16*pi
			q, c0 := 0, t
			for ; 4*q+4 <= cg; q, c0 = q+1, c0+4*taps {
				// the address is made per quad: a pointer stepped past the
				// last one would point past dst (checkptr rejects that)
				at := unsafe.Add(pd, base+q*implicitQuadBytes)
				b0, b1, b2, b3 := row[c0], row[c0+taps], row[c0+2*taps], row[c0+3*taps]
				*(*uint64)(at) = implicitLo[0][b0] | implicitLo[1][b1] | implicitLo[2][b2] | implicitLo[3][b3]
				*(*uint64)(unsafe.Add(at, 8)) = implicitHi[0][b0] | implicitHi[1][b1] | implicitHi[2][b2] | implicitHi[3][b3]
				sums += implicitSum[b0] + implicitSum[b1] + implicitSum[b2] + implicitSum[b3]
				if q&4095 == 4095 { // at most 8 per lane and quad
					addLanes(&total, &sums)
				}
			}
			if q < quads {
				var lo, hi uint64
				for c := range cg - 4*q {
					b := row[c0+c*taps]
					lo |= implicitLo[c][b]
					hi |= implicitHi[c][b]
					sums += implicitSum[b]
				}
				at := unsafe.Add(pd, base+q*implicitQuadBytes)
				*(*uint64)(at) = lo
				*(*uint64)(unsafe.Add(at, 8)) = hi
			}
			addLanes(&total, &sums)
		}
		for r := range MR {
			corr[MR*pi+r] = int32(128 * (total[r] - k))
		}
	}
}

// addLanes adds the four 16-bit lanes of *sums to total and clears *sums.
func addLanes(total *[MR]int, sums *uint64) {
	for r := range MR {
		total[r] += int(*sums >> (16 * r) & 0xffff)
	}
	*sums = 0
}

// Tables of PackImplicit: for an A panel byte b (four rows' codes) holding
// channel c of a quad, implicitLo[c][b] has row r's weight at byte 4r+c
// (rows 0, 1) and implicitHi[c][b] at byte 4(r-2)+c (rows 2, 3);
// implicitSum[b] has row r's code (0..2) in 16-bit lane r.
var (
	implicitLo, implicitHi [4][256]uint64
	implicitSum            [256]uint64
)

func init() {
	for b := range 256 {
		for r := range MR {
			code := b >> (2 * r) & 3
			if code == 3 { // never in a panel
				code = 1
			}
			implicitSum[b] |= uint64(code) << (16 * r)
			for c := range 4 {
				v := uint64(uint8(int8(code)-1)) << (8 * (4*(r%2) + c))
				if r < 2 {
					implicitLo[c][b] |= v
				} else {
					implicitHi[c][b] |= v
				}
			}
		}
	}
}

// ImplicitGeneric returns the generic ImplicitI8, the oracle (no kernel set
// carries it: scalar, it is slower than the generic im2col kernels).
func ImplicitGeneric() ImplicitI8 { return implicitI8Generic }

// ImplicitPairGeneric returns the generic ImplicitI8Pair (tests of the
// callers' pair path run it on any CPU).
func ImplicitPairGeneric() ImplicitI8Pair { return implicitI8PairGeneric }

// QuantU8x8 quantizes 8 channels of one row of activations straight into the
// implicit layout: for pixel x < w and channel i < 8,
//
//	dst[x*cp+i] = byte(Quant8(src[i*hw+x], a)) ^ 0x80
//
// (the byte q+128 of Quant8's q), with w >= 1, hw >= w, cp >= 8 and the
// slices long enough (the wrappers panic otherwise). gokern/ops/conv2d writes the
// implicit GEMM's input with it: one pass from float32 NCHW to u8 NHWC.
type QuantU8x8 func(dst []byte, src []float32, hw, w, cp int, a float32)

// QuantU8x16 is QuantU8x8 for 16 channels (i < 16, cp >= 16): a row of a
// layer with 16 or more channels a group in half the calls.
type QuantU8x16 func(dst []byte, src []float32, hw, w, cp int, a float32)

// QuantU8x4 is QuantU8x8 for a quad of nc (1 to 4) channels: for x < w and
// i < 4, dst[x*cp+i] = byte(Quant8(src[min(i, nc-1)*hw+x], a)) ^ 0x80 (the
// quad's missing channels repeat its last one), with cp >= nc, written
// pixel after pixel: with cp < 4 (a packed row, cp = nc) each pixel's bytes
// past cp are overwritten by the next pixel's, and after the last pixel's
// nc bytes come 4-nc copies of its last channel (for the caller to
// overwrite).
type QuantU8x4 func(dst []byte, src []float32, hw, w, cp, nc int, a float32)

// checkQuantU8 panics (recovered by the C ABI) on a bad QuantU8x16 (width
// 16, nc 16), QuantU8x8 (width 8, nc 8) or QuantU8x4 (width 4, nc 1 to 4)
// call.
func checkQuantU8(ld, ls, hw, w, cp, nc, width int) {
	if w < 1 || hw < w || nc < 1 || nc > width || (width >= 8 && nc != width) || cp < nc ||
		ld < (w-1)*cp+width || ls < (nc-1)*hw+w {
		panic("gemm: bad QuantU8x16/QuantU8x8/QuantU8x4 arguments")
	}
}

// quantU8x16Generic is the generic QuantU8x16, the oracle.
func quantU8x16Generic(dst []byte, src []float32, hw, w, cp int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, 16, 16)
	quantU8Generic(dst, src, hw, w, cp, 16, 16, a)
}

// quantU8x8Generic is the generic QuantU8x8, the oracle.
func quantU8x8Generic(dst []byte, src []float32, hw, w, cp int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, 8, 8)
	quantU8Generic(dst, src, hw, w, cp, 8, 8, a)
}

// quantU8x4Generic is the generic QuantU8x4, the oracle.
func quantU8x4Generic(dst []byte, src []float32, hw, w, cp, nc int, a float32) {
	checkQuantU8(len(dst), len(src), hw, w, cp, nc, 4)
	quantU8Generic(dst, src, hw, w, cp, nc, 4, a)
}

// quantU8Generic writes width bytes per pixel from nc channels (the last
// one repeated), pixel after pixel (QuantU8x4 with cp < 4).
func quantU8Generic(dst []byte, src []float32, hw, w, cp, nc, width int, a float32) {
	for x := range w {
		px := dst[x*cp:][:width]
		for i := range px {
			px[i] = byte(Quant8(src[min(i, nc-1)*hw+x], a)) ^ 0x80
		}
	}
}
