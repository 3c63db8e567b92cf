package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// ConvShape is a 2-D convolution's geometry: x (N, C, H, W), weight (O,
// C/Groups, KH, KW), padding per side (top, left, bottom, right).
type ConvShape struct {
	N, C, H, W, O, KH, KW, Groups int
	StrideH, StrideW              int
	PadT, PadL, PadB, PadR        int
	DilH, DilW                    int
}

// Out returns the output's spatial size, checking the geometry.
func (s ConvShape) Out() (ho, wo int, err error) {
	if s.Groups < 1 || s.C%s.Groups != 0 || s.O%s.Groups != 0 {
		return 0, 0, errs.Value("groups must be >= 1 and divide in_channels %d and out_channels %d, got %d", s.C, s.O, s.Groups)
	}
	if s.StrideH < 1 || s.StrideW < 1 || s.DilH < 1 || s.DilW < 1 {
		return 0, 0, errs.Value("stride and dilation must be >= 1, got (%d, %d) and (%d, %d)", s.StrideH, s.StrideW, s.DilH, s.DilW)
	}
	if s.PadT < 0 || s.PadL < 0 || s.PadB < 0 || s.PadR < 0 {
		return 0, 0, errs.Value("padding must be >= 0")
	}
	eh := s.DilH*(s.KH-1) + 1
	ew := s.DilW*(s.KW-1) + 1
	ih, iw := s.H+s.PadT+s.PadB, s.W+s.PadL+s.PadR
	if s.KH < 1 || s.KW < 1 || eh > ih || ew > iw {
		return 0, 0, errs.Value("the (dilated) kernel %dx%d is larger than the padded input %dx%d", eh, ew, ih, iw)
	}
	return (ih-eh)/s.StrideH + 1, (iw-ew)/s.StrideW + 1, nil
}

// Conv2D computes the quantized convolution of x (N, C, H, W codes) with w
// (O, C/Groups, KH, KW codes; scales and zero points per tensor or per
// output channel) plus bias into out (N, O, Ho, Wo codes), as fbgemm does:
// Linear's arithmetic over the im2col matrix of each image and group, the
// padded positions holding the input's zero point.
func Conv2D(k *Kernels, s ConvShape, x Act, w Weight, bias []float32, o Output, out []byte) (Info, error) {
	ho, wo, err := s.Out()
	if err != nil {
		return Info{}, err
	}
	if err := checkParams(x, w, &o, s.O); err != nil {
		return Info{}, err
	}
	cg, og := s.C/s.Groups, s.O/s.Groups
	K := cg * s.KH * s.KW
	P := ho * wo
	// the weights of every group at once: panels per group, kept from call
	// to call; in the channel-quad layout (im2col.go) when it serves
	quads := quadConv(s, cg)
	kh, kw := 0, 0
	if quads {
		kh, kw = s.KH, s.KW
	}
	pw := weightPanels(w, s.O, K, s.Groups, true, kh, kw)
	za := x.Zero
	var flip byte
	if x.Signed {
		za += 128
		flip = 0x80
	}
	call, ch := getCall() // the epilogue's slices, kept from call to call
	defer calls.Put(ch)
	call.zw = zeroPointsInto(call.zw, w, s.O)
	r := requantInto(&call.r, s.O, K, za, call.zw, pw.cs, x.Scale, w.Scales, bias, &o)
	for n := 0; n < s.N; n++ {
		for g := 0; g < s.Groups; g++ {
			xg := x.Data[(n*s.C+g*cg)*s.H*s.W:]
			var src actSrc = &im2colSrc{s: s, x: xg, cg: cg, ho: ho, wo: wo, pad: byte(za), flip: flip}
			var qi *quadInput
			if quads {
				qi = newQuadInput(k, s, xg, cg, ho, wo, byte(za), flip)
				src = qi
			}
			// channels of group g: its panels; the epilogue's per-channel
			// slices start at g*og
			rg := &Requant{ColTerm: r.ColTerm[g*og:], ZW: r.ZW[g*og:], Mult: r.Mult[g*og:], ZO: r.ZO, Lo: r.Lo, Hi: r.Hi, ZWZero: r.ZWZero}
			if r.BiasQ != nil {
				rg.BiasQ = r.BiasQ[g*og:]
			}
			gm := &gemm{M: P, N: og, K: K, P: pw, Panel0: g * pw.npg, R: rg, Out: out, off: (n*s.O + g*og) * P, rs: 1, cs: P}
			if P >= fusedMinRows {
				gm.Src = src
				gm.run(k)
			} else {
				var h *[]byte
				gm.Tiles, gm.RowSum, h = packActs(k, src, pw.kq)
				gm.run(k)
				scratch.Put(h)
			}
			if qi != nil {
				qi.release()
			}
		}
	}
	if quads {
		return Info{Kernel: kernelName("quad_tiles", k)}, nil
	}
	return Info{Kernel: kernelName("im2col_tiles", k)}, nil
}

// fusedMinRows is the least output positions of a conv whose activation
// tiles are packed task by task (gemm.runFused: each task all channels of
// taskRows rows); fewer pack every tile first, so that the tasks can split
// the channels too.
const fusedMinRows = 8 * taskRows

// im2colSrc is the im2col matrix of the cg channels of one image at x
// (C-contiguous H x W planes, codes xored with flip): ho*wo rows of K =
// cg*KH*KW values (k in (channel, kh, kw) order), padded positions holding
// pad.
type im2colSrc struct {
	s         ConvShape
	x         []byte
	cg        int
	ho, wo    int
	pad, flip byte
}

func (c *im2colSrc) rows() int { return c.ho * c.wo }

// tile writes the tile k by k (channel, kh, kw), its MR rows inner: where
// the rows are MR consecutive outputs of one output row and inside the
// input, they read MR input bytes StrideW apart with no bounds tests.
func (c *im2colSrc) tile(k *Kernels, t int, dst []byte, rs []int32) {
	clear(dst)
	wide := k.WideA
	s := c.s
	P := c.ho * c.wo
	p0 := t * MR
	nr := min(MR, P-p0)
	var ihs, iws [MR]int // each row's input position for kh = kw = 0
	for r := 0; r < nr; r++ {
		oh, ow := (p0+r)/c.wo, (p0+r)%c.wo
		ihs[r], iws[r] = oh*s.StrideH-s.PadT, ow*s.StrideW-s.PadL
	}
	// one output row: the rows' inputs are StrideW apart
	run := nr == MR && ihs[0] == ihs[MR-1]
	es := 1
	if wide {
		es = 2
	}
	var sums [MR]int32
	i := 0
	for ch := 0; ch < c.cg; ch++ {
		plane := c.x[ch*s.H*s.W : (ch+1)*s.H*s.W]
		for kh := 0; kh < s.KH; kh++ {
			for kw := 0; kw < s.KW; kw++ {
				base := ((i>>2)*MR*4 + i&3) * es
				ih := ihs[0] + kh*s.DilH
				iw := iws[0] + kw*s.DilW
				if run && ih >= 0 && ih < s.H && iw >= 0 && iw+(MR-1)*s.StrideW < s.W {
					src := plane[ih*s.W+iw : ih*s.W+iw+(MR-1)*s.StrideW+1]
					for r := 0; r < MR; r++ {
						v := src[r*s.StrideW] ^ c.flip
						dst[base+r*4*es] = v
						sums[r] += int32(v)
					}
				} else {
					for r := 0; r < nr; r++ {
						ih, iw := ihs[r]+kh*s.DilH, iws[r]+kw*s.DilW
						v := c.pad
						if ih >= 0 && ih < s.H && iw >= 0 && iw < s.W {
							v = plane[ih*s.W+iw] ^ c.flip
						}
						dst[base+r*4*es] = v
						sums[r] += int32(v)
					}
				}
				i++
			}
		}
	}
	copy(rs, sums[:])
}
