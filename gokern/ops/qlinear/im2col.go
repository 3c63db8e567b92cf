package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The channel-quad layout of a convolution's K (quadConv): k runs over
// (kh, kw, channel quad, channel % 4), kq = KH*KW*ceil(cg/4) quads, the
// channels past cg zero in both operands. The input of one image and
// group is rewritten once per call into quad planes (quadInput): for each
// channel quad, the padded input's positions as uint32 words holding the
// 4 channels' codes, the columns of each row split by their phase modulo
// StrideW. A quad of a tile (4 channels at one (kh, kw) for 8 outputs) is
// then 8 words, and 8 consecutive words (32 bytes copied at once) when the
// 8 outputs lie in one output row: no per-byte im2col, no bounds tests.
// The tiles' row sums come from the sums over the channels of each padded
// position, KH*KW additions per output.

// quadConv reports whether a convolution of cg channels per group takes
// the channel-quad layout: the quads padded with zero channels waste
// compute below 3 channels (depthwise convs keep the k-by-k im2col).
func quadConv(s ConvShape, cg int) bool { return cg >= 3 || s.KH*s.KW == 1 }

// quadPerm returns, for each packed k of the channel-quad layout, the index
// of its weight code in a channel's (cg, KH, KW) codes, -1 where the
// channel is past cg.
func quadPerm(cg, kh, kw int) []int32 {
	c4 := (cg + 3) / 4
	perm := make([]int32, kh*kw*c4*4)
	i := 0
	for h := 0; h < kh; h++ {
		for w := 0; w < kw; w++ {
			for ch := 0; ch < c4*4; ch++ {
				perm[i] = -1
				if ch < cg {
					perm[i] = int32((ch*kh+h)*kw + w)
				}
				i++
			}
		}
	}
	return perm
}

// quadInput is the quad planes of one image and group (see above).
type quadInput struct {
	s     ConvShape
	c4    int      // channel quads
	hp    int      // padded rows
	wq    int      // words of one phase of a row: ceil(padded columns / StrideW)
	wrow  int      // words of a row: StrideW*wq
	plane int      // words of one quad's plane: hp*wrow
	q     []uint32 // c4 planes
	sum   []int32  // per position: the sum of the cg channels' codes
	// the scratch buffers behind q and sum (release puts them back); the
	// few words of a row that no padded column maps to (stride phases of
	// unequal length) keep stale bytes: no output reads them
	qh     *[]byte
	sumh   *[]int32
	ho, wo int
	d      []int // per (kh, kw): the offset of its word from an output's base
	// for Kernels.QuadRun: per quad of a tile, its word's offset from the
	// output's base (c*plane + d), and d per (kh, kw), as int32
	offs, doffs  []int32
	maxOff, maxD int // their largest values
}

// newQuadInput rewrites x (cg channel planes of H x W codes, xored with
// flip; padding holds pad) into quad planes, rows in parallel, in scratch
// buffers that release gives back (every word an output reads is written:
// no allocation or clearing per call).
func newQuadInput(k *Kernels, s ConvShape, x []byte, cg, ho, wo int, pad, flip byte) *quadInput {
	c4 := (cg + 3) / 4
	hp, wp := s.H+s.PadT+s.PadB, s.W+s.PadL+s.PadR
	wq := (wp + s.StrideW - 1) / s.StrideW
	q := &quadInput{s: s, c4: c4, hp: hp, wq: wq, wrow: s.StrideW * wq, ho: ho, wo: wo}
	q.plane = hp * q.wrow
	var qb []byte
	qb, q.qh = scratchBytes.Sized(4 * c4 * q.plane)
	q.q = asWords(qb)
	q.sum, q.sumh = scratchInts.Sized(q.plane)
	q.d = make([]int, s.KH*s.KW)
	for kh := 0; kh < s.KH; kh++ {
		for kw := 0; kw < s.KW; kw++ {
			c := kw * s.DilW
			q.d[kh*s.KW+kw] = kh*s.DilH*q.wrow + (c%s.StrideW)*wq + c/s.StrideW
		}
	}
	for _, d := range q.d {
		q.doffs = append(q.doffs, int32(d))
		q.maxD = max(q.maxD, d)
		for c := 0; c < c4; c++ {
			q.offs = append(q.offs, int32(c*q.plane+d))
			q.maxOff = max(q.maxOff, c*q.plane+d)
		}
	}
	// each padded column's word in a row (its phase's run, then its place)
	col := make([]int32, wp)
	for iw := range col {
		col[iw] = int32((iw%s.StrideW)*wq + iw/s.StrideW)
	}
	var padWord, flipWord uint32 // pad and flip in the 4 channels of a quad
	for cc := 0; cc < 4; cc++ {
		padWord |= uint32(pad) << (8 * cc)
		flipWord |= uint32(flip) << (8 * cc)
	}
	hw := s.H * s.W
	par.Run(par.ChunksWork(hp, cg*wp), func(_, lo, hi int) {
		for ih := lo; ih < hi; ih++ {
			q.quadRow(k, x, ih, cg, hw, col, padWord, flipWord)
		}
	})
	return q
}

// quadRow writes padded row ih of every quad plane and its sums: with
// stride 1, full quads and rows of 16 inputs or more, the input positions
// 16 at a time by k.QuadRow (the last 16 of a row as one more block), the
// rest in Go.
func (q *quadInput) quadRow(k *Kernels, x []byte, ih, cg, hw int, col []int32, padWord, flipWord uint32) {
	s := q.s
	y := ih - s.PadT
	sums := q.sum[ih*q.wrow : (ih+1)*q.wrow]
	clear(sums)
	w0 := 0 // the input columns [0, w0) are written
	if k.QuadRow != nil && s.StrideW == 1 && cg%4 == 0 && y >= 0 && y < s.H && s.W >= 16 {
		w0 = s.W &^ 15
		k.QuadRow(x[y*s.W:], hw, w0/16, q.c4, q.q[ih*q.wrow+s.PadL:], q.plane, flipWord, sums[s.PadL:])
		if w0 < s.W { // the last 16 columns again: the same words and sums where they overlap
			e := s.W - 16
			k.QuadRow(x[y*s.W+e:], hw, 1, q.c4, q.q[ih*q.wrow+s.PadL+e:], q.plane, flipWord, sums[s.PadL+e:])
			w0 = s.W
		}
		if w0 == s.W && s.PadL+s.PadR == 0 {
			return // no padding and every input column written
		}
	}
	for c := 0; c < q.c4; c++ {
		n := min(4, cg-c*4)
		mask := uint32(uint64(1)<<(8*n) - 1) // the quad's channels below cg
		row := q.q[c*q.plane+ih*q.wrow : c*q.plane+(ih+1)*q.wrow]
		pw := padWord & mask
		if y < 0 || y >= s.H {
			for _, j := range col {
				row[j] = pw
				sums[j] += byteSum(pw)
			}
			continue
		}
		for _, j := range col[:s.PadL] {
			row[j] = pw
			sums[j] += byteSum(pw)
		}
		for _, j := range col[s.PadL+s.W:] {
			row[j] = pw
			sums[j] += byteSum(pw)
		}
		cols := col[s.PadL+w0 : s.PadL+s.W]
		o := c*4*hw + y*s.W + w0
		fw := flipWord & mask
		nw := s.W - w0
		if n == 4 {
			r0, r1, r2, r3 := x[o:o+nw], x[o+hw:o+hw+nw], x[o+2*hw:o+2*hw+nw], x[o+3*hw:o+3*hw+nw]
			for i, j := range cols {
				v := (uint32(r0[i]) | uint32(r1[i])<<8 | uint32(r2[i])<<16 | uint32(r3[i])<<24) ^ fw
				row[j] = v
				sums[j] += byteSum(v)
			}
			continue
		}
		r0 := x[o : o+nw]
		switch n {
		case 3:
			r1, r2 := x[o+hw:o+hw+nw], x[o+2*hw:o+2*hw+nw]
			for i, j := range cols {
				v := (uint32(r0[i]) | uint32(r1[i])<<8 | uint32(r2[i])<<16) ^ fw
				row[j] = v
				sums[j] += byteSum(v)
			}
		case 2:
			r1 := x[o+hw : o+hw+nw]
			for i, j := range cols {
				v := (uint32(r0[i]) | uint32(r1[i])<<8) ^ fw
				row[j] = v
				sums[j] += byteSum(v)
			}
		default:
			for i, j := range cols {
				v := uint32(r0[i]) ^ fw
				row[j] = v
				sums[j] += int32(v)
			}
		}
	}
}

// byteSum returns the sum of v's 4 bytes.
func byteSum(v uint32) int32 {
	t := v&0x00ff00ff + v>>8&0x00ff00ff
	return int32(t&0xffff + t>>16)
}

func (q *quadInput) rows() int { return q.ho * q.wo }

// tile writes tile t: quad (kh, kw, c) at ((kh*KW+kw)*c4 + c)*MR*4.
func (q *quadInput) tile(k *Kernels, t int, dst []byte, rs []int32) {
	s := q.s
	wide := k.WideA
	P := q.ho * q.wo
	p0 := t * MR
	nr := min(MR, P-p0)
	var base [MR]int // each output's word for kh = kw = 0, channel quad 0
	for r := 0; r < nr; r++ {
		oh, ow := (p0+r)/q.wo, (p0+r)%q.wo
		base[r] = oh*s.StrideH*q.wrow + ow
	}
	run := nr == MR && base[MR-1]-base[0] == MR-1
	if nr < MR {
		clear(dst) // the rows past the last output
	}
	n := len(q.d) * q.c4 * MR // words of the tile
	if run && k.QuadRun != nil {
		k.QuadRun(q.q[base[0]:], q.offs, q.maxOff, dst[:tileBytes(k, len(q.d)*q.c4)], q.sum[base[0]:], q.doffs, q.maxD, rs)
		return
	}
	words := asWords(dst[:4*n])
	i := 0
	if run {
		// every quad's 8 words are consecutive: src[base[0]+d+c*plane:][:8]
		for _, d := range q.d {
			src := q.q[base[0]+d:]
			for c := 0; c < q.c4; c++ {
				d, v := (*[MR]uint32)(words[i:i+MR]), (*[MR]uint32)(src[c*q.plane:c*q.plane+MR])
				d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7] = v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
				i += MR
			}
		}
	} else {
		for _, d := range q.d {
			for c := 0; c < q.c4; c++ {
				src := q.q[c*q.plane+d:]
				for r := 0; r < nr; r++ {
					words[i+r] = src[base[r]]
				}
				i += MR
			}
		}
	}
	var sums [MR]int32
	if run {
		for _, d := range q.d {
			v := (*[MR]int32)(q.sum[base[0]+d : base[0]+d+MR])
			for r := range sums {
				sums[r] += v[r]
			}
		}
	} else {
		for r := 0; r < nr; r++ {
			for _, d := range q.d {
				sums[r] += q.sum[base[r]+d]
			}
		}
	}
	copy(rs, sums[:])
	if wide {
		widenInPlace(dst, 4*n)
	}
}

// widenInPlace zero-extends the first n bytes of b to 16 bits each, in
// place (b holds 2n): the int16 codes of a WideA tile.
func widenInPlace(b []byte, n int) {
	for j := n - 1; j >= 0; j-- {
		b[2*j], b[2*j+1] = b[j], 0
	}
}

// release gives q's scratch buffers back; q is not used afterwards.
func (q *quadInput) release() {
	scratchBytes.Put(q.qh)
	scratchInts.Put(q.sumh)
	q.q, q.sum = nil, nil
}
