package conv

import (
	"strconv"
	"strings"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Algo names an algorithm, as requested and as run (C ABI numbers).
type Algo int32

// The algorithms. A request for Direct runs Depthwise when groups == C,
// Pointwise for 1x1 / stride 1 / no padding, and the general direct kernel
// otherwise; Auto lets the planner choose (see Plan; with int8 activations
// Conv2D then runs LUT where preferLUT says it is faster). LUT needs int8
// activations.
const (
	Auto      Algo = 0 // request only: the planner picks
	Naive     Algo = 1 // seven plain loops, the oracle
	Im2col    Algo = 2 // tiled im2col packed on the fly + GEMM micro-kernels (int8 on AVX2: implicit GEMM, implicit.go)
	Direct    Algo = 3 // general direct kernel, no column buffer
	Depthwise Algo = 4 // direct kernel for groups == C
	Pointwise Algo = 5 // 1x1, stride 1, no padding: GEMM straight on the input
	LUT       Algo = 6 // lookup-table kernels (int8 activations only), see lut.go
)

// String returns the algorithm's Python name.
func (a Algo) String() string {
	switch a {
	case Auto:
		return "auto"
	case Naive:
		return "naive"
	case Im2col:
		return "im2col"
	case Direct:
		return "direct"
	case Depthwise:
		return "depthwise"
	case Pointwise:
		return "gemm1x1"
	case LUT:
		return "lut"
	}
	return "unknown"
}

// Plan resolves a requested algorithm for d into the kernel that runs it.
func Plan(req Algo, d *Dims) (Algo, error) {
	switch req {
	case Auto:
		switch {
		case d.Depthwise():
			return Depthwise, nil
		case d.Pointwise():
			return Pointwise, nil
		}
		return Im2col, nil
	case Naive, Im2col, LUT:
		return req, nil
	case Direct:
		switch {
		case d.Depthwise():
			return Depthwise, nil
		case d.Pointwise():
			return Pointwise, nil
		}
		return Direct, nil
	case Depthwise:
		if !d.Depthwise() {
			return 0, errs.Value("algorithm 'depthwise' needs groups == C (one input channel per group), got C=%d, groups=%d",
				d.C, d.Groups)
		}
		return req, nil
	case Pointwise:
		if !d.Pointwise() {
			return 0, errs.Value("algorithm 'gemm1x1' needs a 1x1 kernel, stride 1 and no padding")
		}
		return req, nil
	}
	return 0, errs.Value("algorithm must be 0 (auto), 1 (naive), 2 (im2col), 3 (direct), 4 (depthwise), 5 (gemm1x1) or 6 (lut), got %d", int32(req))
}

// Weights is a ternary weight as the C ABI passes it: the packed codes of the
// flattened (O, C/groups, kH, kW) tensor and one float32 scale per BlockSize
// consecutive elements (BlockSize 0, or at least the tensor's size: one
// scale for the tensor).
type Weights struct {
	Packed    []byte
	Scales    []float32
	BlockSize int
	QType     ternary.QType // I2S, TL1 or TL2 (TL rows are the O output channels)
	converted bool          // Packed converted to I2_S for this call (asI2S): not cached
}

// asI2S returns w with its codes in I2_S, the layout the kernels' panel
// packing reads: TL1 and TL2 weights are converted once per call (the same
// values, so every result is bit-identical to the I2_S weight's).
func asI2S(d *Dims, w Weights) (Weights, error) {
	switch w.QType {
	case ternary.I2S:
		return w, nil
	case ternary.TL1, ternary.TL2:
	default:
		return w, errs.Value("weight: qtype must be 0 (i2_s), 1 (tl1) or 2 (tl2), got %d", int32(w.QType))
	}
	want, err := ternary.PackedLenQ(w.QType, d.WLen, d.O)
	if err != nil {
		return w, err
	}
	if len(w.Packed) != want {
		return w, errs.Value("weight: packed must have %d bytes for %d values in %s, got %d", want, d.WLen, w.QType, len(w.Packed))
	}
	vals := make([]int8, d.WLen)
	if err := ternary.UnpackQ(w.QType, w.Packed, d.O, vals); err != nil {
		return w, errs.Value("weight: %v", err)
	}
	i2s := make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(vals, i2s); err != nil {
		return w, err
	}
	w.Packed, w.QType, w.converted = i2s, ternary.I2S, true
	return w, nil
}

// Options are the flags of a call.
type Options struct {
	ActBits     int  // 0: float32 activations; 8: int8 activations
	Algo        Algo // requested algorithm
	CheckFinite bool // reject NaN/Inf in x, bias and the weight's scales
}

// Conv2D computes out = conv2d(x, w, bias) for the checked geometry d and
// returns the algorithm that ran. x is (N, C, H, W) and out (N, O, Ho, Wo),
// both float32 and C-contiguous; bias has O entries or none.
//
// Float path (ActBits 0): out[n,o,p] = sum_b s(o,b) * (sum over k in block b
// of w[o,k]*x[n,k,p]) + bias[o], the inner sums in float32 in an order that
// depends on the algorithm (results agree to float32 rounding).
//
// Int8 path (ActBits 8): each sample's activations are quantized with
// a_n = 127 / max(max|x_n|, 1e-5) (float32; NaN left out of the maximum),
// q = clamp(round_half_even(x*a_n), -128, 127) (x*a_n in float32; NaN -> 0);
// acc_b = sum over k in block b of w*q, exact in int32; then, every operation
// in float32 in this order:
//
//	t_b = (float32(acc_b) / a_n) * s(o,b)
//	out = ((t_0 + t_1) + ... + t_{B-1}) + bias[o]
//
// so every algorithm gives the same bits. B is the number of scale blocks per
// output channel (K / BlockSize, or 1 for one scale per tensor).
func Conv2D(d Dims, x []float32, w Weights, bias []float32, out []float32, opt Options) (Algo, error) {
	if len(x) != d.XLen {
		return 0, errs.Value("x must have %d elements for shape (%d, %d, %d, %d), got %d", d.XLen, d.N, d.C, d.H, d.W, len(x))
	}
	if len(out) != d.OutLen {
		return 0, errs.Value("out must have %d elements for shape (%d, %d, %d, %d), got %d", d.OutLen, d.N, d.O, d.Ho, d.Wo, len(out))
	}
	if len(bias) != 0 && len(bias) != d.O {
		return 0, errs.Value("bias must have O=%d elements (or none), got %d", d.O, len(bias))
	}
	src := w
	var err error
	if wantLUT(&d, opt, w.QType) && w.QType != ternary.I2S {
		err = checkTL(&d, w) // the LUT kernels read TL rows as they are
	} else {
		w, err = asI2S(&d, w)
	}
	if err != nil {
		return 0, err
	}
	sc, err := newScaler(&d, w, bias)
	if err != nil {
		return 0, err
	}
	if opt.ActBits != 0 && opt.ActBits != 8 {
		return 0, errs.Value("act_bits must be 0 (float32) or 8, got %d", opt.ActBits)
	}
	kind, err := Plan(opt.Algo, &d)
	if err != nil {
		return 0, err
	}
	if wantLUT(&d, opt, src.QType) {
		kind = LUT
	}
	if kind == LUT && opt.ActBits != 8 {
		return 0, errs.Value("algorithm 'lut' needs int8 activations (act_bits=8); with act_bits=None use another algorithm")
	}
	// The int8 path takes its activation scales first: their max|x| pass
	// finds x's first NaN/Inf too, so checking x costs nothing more there.
	var acts *activations
	if opt.ActBits == 8 && d.N > 0 {
		acts = actScales(&d, x)
		defer acts.release()
	}
	if opt.CheckFinite {
		if err := checkFinite(&d, x, acts, w.Scales, bias); err != nil {
			return 0, err
		}
	}
	if d.N == 0 {
		return kind, nil
	}
	if kind == LUT {
		acts.quantize(&d, x)
		return kind, runLUT(&d, src, acts, sc, out)
	}
	return kind, run(kind, &d, x, acts, w, sc, out, gemm.Current(), opt.CheckFinite)
}

// run executes one kernel, with the activation scales acts (int8 path; run
// quantizes x with them unless the implicit GEMM does) or on x (acts nil:
// float32 path); tests call it to run a kernel the planner would not pick
// (the general direct kernel on a depthwise shape, for instance). finite
// says that x was checked to hold no NaN or Inf.
func run(kind Algo, d *Dims, x []float32, acts *activations, w Weights, sc *scaler, out []float32, ks *gemm.Kernels,
	finite bool) error {
	act8 := acts != nil
	asGEMV := kind == Pointwise && useGEMV(d, sc)
	implicit := act8 && (kind == Im2col || kind == Pointwise) && !asGEMV && useImplicit(d, sc, ks)
	if act8 && !implicit {
		acts.quantize(d, x)
	}
	if kind == LUT {
		return runLUT(d, w, acts, sc, out)
	}
	if kind == Naive {
		return naive(d, x, acts, w, sc, out)
	}
	if asGEMV {
		if act8 {
			return gemv(d, w.Packed, acts.q, acts, sc, out, ks.GemvI8, nil, gemm.SumI8, (*scaler).fold1I32)
		}
		return gemv(d, w.Packed, x, nil, sc, out, gemvF32(ks), gemm.GemvOrder, nil, (*scaler).fold1F32)
	}
	if implicit {
		wl, err := implicitWeights(d, w, newImplicitGeom(d))
		if err != nil {
			return err
		}
		implicitConv(d, wl, x, acts.a, sc, out, implicitOf(ks))
		return nil
	}
	a, err := panels(d, w)
	if err != nil {
		return err
	}
	switch kind {
	case Im2col, Pointwise:
		if act8 {
			gemmConv(d, a, acts.q, acts, sc, out, kind == Pointwise, ks.NRI8, microFn[int8, int32](ks.I8), ks.PrepareI8, foldI32)
		} else {
			gemmConv(d, a, x, nil, sc, out, kind == Pointwise, ks.NRF32, microFn[float32, float32](ks.F32), nil, foldF32)
		}
	case Direct, Depthwise:
		// The direct kernels skip zero weights, which add nothing to
		// finite sums but must turn NaN and Inf into NaN (0*x): they skip
		// them when x is known finite (int8 values always are).
		skip := act8 || finite || firstNonFinite(x) < 0
		switch {
		case kind == Direct && act8:
			direct(d, a, acts.q, acts, sc, out, foldI32, skip)
		case kind == Direct:
			direct(d, a, x, nil, sc, out, foldF32, skip)
		case act8:
			depthwise(d, a, acts.q, acts, sc, out, foldI32, skip)
		default:
			depthwise(d, a, x, nil, sc, out, foldF32, skip)
		}
	default:
		return errs.Runtime("conv: no kernel for algorithm %d", int32(kind))
	}
	return nil
}

// scaler maps (output channel, scale block) to its scale and holds the bias.
type scaler struct {
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
	if want, err := ternary.PackedLenQ(w.QType, d.WLen, d.O); err != nil || len(w.Packed) != want {
		return nil, errs.Value("weight: packed must have %d bytes for %d values in %s, got %d", want, d.WLen, w.QType, len(w.Packed))
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
	gemm.Current().FoldF32(dst, src, s.scale(o, b), bias, b > 0, add)
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
	return s.add1(y, float32(float32(float32(acc)/a)*s.scale(o, b)), o, b)
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

func foldI32(s *scaler, dst []float32, src []int32, o, b int, a float32) {
	bias, add := s.biasAt(o, b)
	gemm.Current().FoldI32(dst, src, a, s.scale(o, b), bias, b > 0, add)
}

// activations are the int8 path's quantized input and per-sample scales.
type activations struct {
	q   []int8
	a   []float32 // a_n = 127 / max(max|x_n|, 1e-5)
	bad int       // index of x's first NaN or ±Inf, -1 when none
	buf *[]byte   // q's actScratch buffer, for release
}

// release returns the quantized activations' buffer (if any) for reuse:
// the convolution is done with them.
func (a *activations) release() {
	if a.buf != nil {
		actScratch.Put(a.buf)
	}
	a.q, a.buf = nil, nil
}

// actEps is the floor of a sample's max|x| (as float32).
const actEps = float32(1e-5)

// actScales takes the int8 path's per-sample scales a_n (see Conv2D) in one
// parallel pass over pieces of at most actPiece values of one sample, which
// also finds x's first non-finite element; q stays nil until quantize (the
// implicit GEMM quantizes straight into its own layout instead).
func actScales(d *Dims, x []float32) *activations {
	acts := &activations{a: make([]float32, d.N), bad: -1}
	chunks, pieces, span := actPieces(d)
	maxes := make([]float32, d.N*pieces)
	bads := make([]int, d.N*pieces)
	par.Run(chunks, func(_, lo, hi int) {
		for i := lo; i < hi && !par.Stopped(); i++ {
			a, b := span(i)
			m, bad := ternary.MaxAbs(x[a:b])
			maxes[i], bads[i] = m, bad
			if bad >= 0 {
				bads[i] += a
			}
		}
	})
	for _, b := range bads {
		if b >= 0 {
			acts.bad = b
			break
		}
	}
	for n := range d.N {
		var m float32
		for _, v := range maxes[n*pieces : (n+1)*pieces] {
			if v > m {
				m = v
			}
		}
		acts.a[n] = float32(127) / max(m, actEps)
	}
	return acts
}

// actPieces returns the activation passes' split over threads (par.Chunks
// of pieces), the pieces per sample and the span of piece i (sample
// i/pieces) in x.
func actPieces(d *Dims) ([]int, int, func(i int) (lo, hi int)) {
	per := d.C * d.H * d.W
	pieces := ceilDivPos(per, actPiece)
	return par.ChunksWork(d.N*pieces, min(per, actPiece)), pieces, func(i int) (lo, hi int) {
		n, j := i/pieces, i%pieces
		return n*per + j*actPiece, n*per + min(per, (j+1)*actPiece)
	}
}

// quantize writes q, x quantized with the scales a (NCHW int8, into an
// actScratch buffer that release returns), in one parallel pass.
func (acts *activations) quantize(d *Dims, x []float32) {
	if acts.q != nil {
		return
	}
	quant := gemm.Current().QuantI8
	qb, h := actScratch.Sized(len(x))
	acts.q, acts.buf = asInt8(qb), h
	chunks, pieces, span := actPieces(d)
	par.Run(chunks, func(_, lo, hi int) {
		for i := lo; i < hi && !par.Stopped(); i++ {
			a, b := span(i)
			quant(acts.q[a:b], x[a:b], acts.a[i/pieces])
		}
	})
}

// quantizeActs is actScales and quantize.
func quantizeActs(d *Dims, x []float32) *activations {
	acts := actScales(d, x)
	acts.quantize(d, x)
	return acts
}

// actPiece is the most values of one quantizeActs piece, finitePiece of
// one step of firstNonFinite.
const (
	actPiece    = 1 << 15
	finitePiece = 1 << 16
)

// quant8 is clamp(round_half_even(v*a), -128, 127), with NaN -> 0 (see
// gemm.Quant8; the kernel sets' QuantI8 apply it to slices).
func quant8(v, a float32) int8 { return gemm.Quant8(v, a) }

// checkFinite reports the first NaN or Inf of x, bias or the weight scales;
// x's is acts.bad when x has been quantized (acts not nil).
func checkFinite(d *Dims, x []float32, acts *activations, scales, bias []float32) error {
	i := -1
	if acts != nil {
		i = acts.bad
	} else {
		i = firstNonFinite(x)
	}
	if i >= 0 {
		w, h := i%d.W, i/d.W%d.H
		c, n := i/(d.W*d.H)%d.C, i/(d.W*d.H*d.C)
		return errs.Value("x contains NaN or Inf (first at index (%d, %d, %d, %d), value %v); "+
			"pass check_finite=False to skip this check", n, c, h, w, x[i])
	}
	if i := firstNonFinite(bias); i >= 0 {
		return errs.Value("bias contains NaN or Inf (first at index %d, value %v)", i, bias[i])
	}
	if i := firstNonFinite(scales); i >= 0 {
		return errs.Value("weight: scales contain NaN or Inf (first at index %d, value %v)", i, scales[i])
	}
	return nil
}

// firstNonFinite returns the index of the first NaN or ±Inf, or -1; the scan
// is parallel (ternary.MaxAbs: SIMD where a family is in use), by pieces
// of finitePiece values (checking par.Stopped between them), and the
// earliest chunk's hit wins.
func firstNonFinite(x []float32) int {
	chunks := par.Chunks(len(x), finitePiece)
	hits := make([]int, len(chunks)-1)
	par.Run(chunks, func(c, lo, hi int) {
		hits[c] = -1
		for p := lo; p < hi && !par.Stopped(); p += finitePiece {
			if _, i := ternary.MaxAbs(x[p:min(hi, p+finitePiece)]); i >= 0 {
				hits[c] = p + i
				return
			}
		}
	})
	for _, h := range hits {
		if h >= 0 {
			return h
		}
	}
	return -1
}
