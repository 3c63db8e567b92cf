package quant

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

// Dequantize writes the values of the quantized tensor src into out with
// the process's kernels; see DequantizeKernels.Dequantize.
func Dequantize(src []byte, s *Spec, out []float32) error {
	return DequantizeOp.Get().Dequantize(src, s, out)
}

// Dequantize writes out[i] = scale * float32(q[i] - zp) (the product
// rounded once to float32) for the codes q of src (int8/uint8/int4/uint4),
// and out[i] = ±scale for binary. Scales are not checked (any float32 is
// dequantized as the formula gives); zero points, when given, must lie in
// the dtype's range.
func (k *DequantizeKernels) Dequantize(src []byte, s *Spec, out []float32) error {
	n := len(out)
	if !Handles(s.DType) {
		return errs.Type("dtype must be int8, uint8, int4, uint4 or binary, got %s", s.DType)
	}
	if err := s.check(n, len(src)); err != nil {
		return err
	}
	if s.DType == qtensor.Binary && s.ZeroPoints != nil {
		return errs.Value("zero_points: binary tensors have no zero points")
	}
	if lo, hi, ok := Range(s.DType); ok {
		for i, z := range s.ZeroPoints {
			if z < lo || z > hi {
				return CheckZeroPoint(paramName("zero_point", i, len(s.ZeroPoints)), "", z, s.DType)
			}
		}
	}
	if n == 0 {
		return nil
	}
	g := &s.Groups
	zps := s.ZeroPoints
	if zps == nil {
		zps = make([]int32, g.Count)
	}
	unsigned := s.DType == qtensor.U8 || s.DType == qtensor.U4
	run, row := k.RunI8, k.RowI8
	if unsigned {
		run, row = k.RunU8, k.RowU8
	}
	var scP []float32
	var zpP []int32
	if g.rowWise() {
		scP, zpP = expand(g, s.Scales), expand(g, zps)
	}
	direct := s.DType == qtensor.I8 || s.DType == qtensor.U8
	par.Run(chunkBounds(n), func(_, lo, hi int) {
		var scratch []byte
		if !direct {
			scratch = make([]byte, batch)
		}
		for a := lo; a < hi; a += batch {
			b := min(a+batch, hi)
			var q []byte
			switch s.DType {
			case qtensor.I8, qtensor.U8:
				q = src[a:b]
			case qtensor.Binary:
				q = scratch[:b-a]
				k.UnpackBits(src[a/8:(b+7)/8], q)
			default:
				q = scratch[:b-a]
				k.Unpack4(src[a/2:(b+1)/2], s.DType == qtensor.I4, q)
			}
			for p := a; p < b; {
				var e int
				if scP != nil {
					off := p % len(scP)
					e = min(b, p+len(scP)-off)
					row(q[p-a:e-a], scP[off:off+e-p], zpP[off:off+e-p], out[p:e])
				} else {
					gi := g.Of(p)
					e = g.runEnd(p, b)
					run(q[p-a:e-a], s.Scales[gi], zps[gi], out[p:e])
				}
				p = e
			}
		}
	})
	return nil
}
