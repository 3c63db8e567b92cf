package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
	"strconv"
	"strings"
)

// scaler maps (output channel, scale block) to its scale, holds the bias,
// and folds block sums into the output with the call's kernel set (set by
// run before any kernel runs).
type scaler struct {
	ks     *gemm.Kernels // FoldF32, FoldI32
	scales []float32
	nb     int // scale blocks per output channel
	bl     int // elements of k per block (K when nb == 1)
	perRow bool
	bias   []float32
}

func newScaler(d *Dims, w Weights, bias []float32) (*scaler, error) {
	bs := w.BlockSize
	if bs > 0 && ternary.NumBlocks(d.WLen, bs) == 1 {
		bs = 0 // one block covers the tensor: one scale, whatever K
	}
	if bs < 0 || (bs > 0 && d.K%bs != 0) {
		return nil, errs.Value("weight: block_size=%d must be None (one scale) or divide K = C/groups*kH*kW = %d "+
			"(block_size=K is one scale per output channel); valid block sizes: %s", bs, d.K, divisors(d.K))
	}
	if _, err := checkPacked(d, w); err != nil {
		return nil, err
	}
	if want := ternary.NumBlocks(d.WLen, bs); len(w.Scales) != want {
		return nil, errs.Value("weight: scales must have %d entries for %d values in blocks of %d, got %d",
			want, d.WLen, bs, len(w.Scales))
	}
	s := &scaler{scales: w.Scales, nb: 1, bl: d.K, bias: bias}
	if len(bias) == 0 {
		s.bias = nil
	}
	if len(w.Scales) > 1 {
		s.perRow = true
		s.nb, s.bl = d.K/bs, bs
	}
	return s, nil
}

// divisors lists the divisors of k for an error message (elided when many).
func divisors(k int) string {
	var lo, hi []int
	for i := 1; i*i <= k; i++ {
		if k%i == 0 {
			lo = append(lo, i)
			if i*i != k {
				hi = append(hi, k/i)
			}
		}
	}
	for i := len(hi) - 1; i >= 0; i-- {
		lo = append(lo, hi[i])
	}
	parts := make([]string, 0, len(lo))
	for i, v := range lo {
		if len(lo) > 16 && i == 10 {
			parts = append(parts, "...")
		}
		if len(lo) <= 16 || i < 10 || i >= len(lo)-4 {
			parts = append(parts, strconv.Itoa(v))
		}
	}
	return strings.Join(parts, ", ")
}

// scale returns s(o, b).
func (s *scaler) scale(o, b int) float32 {
	if !s.perRow {
		return s.scales[0]
	}
	return s.scales[o*s.nb+b]
}

// Folds: add block b's tile row src (channel o) into the output row dst, as
// Conv2D documents. Block 0 assigns, the last block adds the bias.

func foldF32(s *scaler, dst []float32, src []float32, o, b int, _ float32) {
	bias, add := s.biasAt(o, b)
	s.ks.FoldF32(dst, src, s.scale(o, b), bias, b > 0, add)
}

// biasAt returns channel o's bias and whether block b adds it (the last
// block, when there is a bias).
func (s *scaler) biasAt(o, b int) (float32, bool) {
	if b == s.nb-1 && s.bias != nil {
		return s.bias[o], true
	}
	return 0, false
}

// fold1I32 is the int8 path's arithmetic for one element: y is the sum so
// far (ignored for b == 0); the result includes the bias after the last block.
func (s *scaler) fold1I32(y float32, acc int32, o, b int, a float32) float32 {
	return s.add1(y, gemm.Fold1I32(acc, a, s.scale(o, b)), o, b)
}

// fold1F32 is fold1I32 for a float32 sum v (a unused): t = v * scale.
func (s *scaler) fold1F32(y float32, v float32, o, b int, _ float32) float32 {
	return s.add1(y, float32(v*s.scale(o, b)), o, b)
}

// add1 is the folds' tail for one element: block b's term t added to the
// sum so far y (b > 0), then the bias after the last block.
func (s *scaler) add1(y, t float32, o, b int) float32 {
	if b > 0 {
		t = y + t
	}
	if bias, add := s.biasAt(o, b); add {
		t = t + bias
	}
	return t
}

// foldRunI32 folds block b's sums src of channels lo .. lo+len(dst)-1 into
// dst (a run of channels of one column): fold1I32 per element, as one
// FoldI32 over the run where one scale serves every channel, else one
// FoldI32Scales with the run's scales of block b, bs (blockScales; the
// bias then added after it, the same operation).
func (s *scaler) foldRunI32(dst []float32, src []int32, lo, b int, a float32, bs []float32) {
	src = src[:len(dst)]
	if !s.perRow {
		s.ks.FoldI32(dst, src, a, s.scales[0], 0, b > 0, false)
	} else {
		s.ks.FoldI32Scales(dst, src, a, bs, b > 0)
	}
	s.biasRun(dst, lo, b)
}

// foldRunF32 is foldRunI32 for float32 sums (fold1F32, FoldF32,
// FoldF32Scales).
func (s *scaler) foldRunF32(dst []float32, src []float32, lo, b int, _ float32, bs []float32) {
	src = src[:len(dst)]
	if !s.perRow {
		s.ks.FoldF32(dst, src, s.scales[0], 0, b > 0, false)
	} else {
		s.ks.FoldF32Scales(dst, src, bs, b > 0)
	}
	s.biasRun(dst, lo, b)
}

// blockScales returns the scales of channels lo .. lo+m-1 in blocks b0 ..
// b0+nb-1, block by block (block b0+b's at [b*m:][:m]), written into buf
// (with one scale a channel: the scales themselves, not to be written),
// or nil where one scale serves every channel: the m x nb slab of the
// row-major channel x block scales, transposed (gemm.Transpose). Gathering
// a block's column inside gemv's loop spilled its indices to the stack and
// took a third of a 4096 x 4096 layer's time in blocks of 256 on one
// sample.
func (s *scaler) blockScales(buf []float32, lo, m, b0, nb int) []float32 {
	if !s.perRow {
		return nil
	}
	if s.nb == 1 { // one scale a channel: the channels' scales as they lie
		return s.scales[lo : lo+m]
	}
	buf = buf[:nb*m]
	gemm.Transpose(buf, m, s.scales[lo*s.nb+b0:], s.nb, m, nb)
	return buf
}

// biasRun adds the bias of channels lo .. lo+len(dst)-1 to dst after the
// last block (add1's bias step).
func (s *scaler) biasRun(dst []float32, lo, b int) {
	if b == s.nb-1 && s.bias != nil {
		for i, v := range s.bias[lo : lo+len(dst)] {
			dst[i] = dst[i] + v
		}
	}
}

func foldI32(s *scaler, dst []float32, src []int32, o, b int, a float32) {
	bias, add := s.biasAt(o, b)
	s.ks.FoldI32(dst, src, a, s.scale(o, b), bias, b > 0, add)
}
