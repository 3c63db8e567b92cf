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
	kp := roundUp(K, KB)
	P := ho * wo
	// the weights of every group at once: O rows of kp (one packing), their
	// zero points and column sums
	rows, ldw, zw, cs := packWeight(w, s.O, K, kp)
	za := x.Zero
	var flip byte
	if x.Signed {
		za += 128
		flip = 0x80
	}
	r := requant(s.O, K, za, zw, cs, x.Scale, w.Scales, bias, &o)
	a := make([]byte, rowsFor(P)*kp)
	rs := make([]int32, P)
	for n := 0; n < s.N; n++ {
		for g := 0; g < s.Groups; g++ {
			im2col(s, x.Data[(n*s.C+g*cg)*s.H*s.W:], cg, ho, wo, kp, byte(za), flip, a, rs)
			// channels of group g: the rows of the packed weight from g*og;
			// the epilogue's per-channel slices start there too
			rg := &Requant{ColTerm: r.ColTerm[g*og:], ZW: r.ZW[g*og:], Mult: r.Mult[g*og:], ZO: r.ZO, Lo: r.Lo, Hi: r.Hi}
			if r.BiasQ != nil {
				rg.BiasQ = r.BiasQ[g*og:]
			}
			gm := &gemm{M: P, N: og, K: K, kp: kp, A: a, lda: kp, W: rows[g*og*ldw:], ldw: ldw, RowSum: rs,
				R: rg, Out: out, off: (n*s.O + g*og) * P, rs: 1, cs: P}
			gm.run(k)
		}
	}
	return Info{Kernel: kernelName("im2col_gemm", k)}, nil
}

// im2col writes the cg channels of one image at x (C-contiguous H x W
// planes, codes xored with flip) as ho*wo rows of kp bytes of a (k in
// (channel, kh, kw) order, then zeros), padded positions holding pad, and
// each row's sum into rs.
func im2col(s ConvShape, x []byte, cg, ho, wo, kp int, pad, flip byte, a []byte, rs []int32) {
	K := cg * s.KH * s.KW
	for oh := 0; oh < ho; oh++ {
		for ow := 0; ow < wo; ow++ {
			p := oh*wo + ow
			row := a[p*kp : p*kp+K]
			i := 0
			var sum int32
			for c := 0; c < cg; c++ {
				plane := x[c*s.H*s.W : (c+1)*s.H*s.W]
				for kh := 0; kh < s.KH; kh++ {
					ih := oh*s.StrideH - s.PadT + kh*s.DilH
					for kw := 0; kw < s.KW; kw++ {
						iw := ow*s.StrideW - s.PadL + kw*s.DilW
						v := pad
						if ih >= 0 && ih < s.H && iw >= 0 && iw < s.W {
							v = plane[ih*s.W+iw] ^ flip
						}
						row[i] = v
						sum += int32(v)
						i++
					}
				}
			}
			rs[p] = sum
		}
	}
}
