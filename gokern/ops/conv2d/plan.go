package conv2d

import (
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
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
	Im2col    Algo = 2 // GEMM: tiled im2col packed on the fly + micro-kernels, or the int8 implicit GEMM (implicit.go)
	Direct    Algo = 3 // general direct kernel, no column buffer
	Depthwise Algo = 4 // direct kernel for groups == C
	Pointwise Algo = 5 // 1x1, stride 1, no padding: GEMM straight on the input, or GEMV (gemv.go)
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

// special returns the kernel of d's special shapes (Depthwise, Pointwise),
// or general where d is neither.
func special(d *Dims, general Algo) Algo {
	switch {
	case d.Depthwise():
		return Depthwise
	case d.Pointwise():
		return Pointwise
	}
	return general
}

// Plan resolves a requested algorithm for d into the kernel that runs it.
func Plan(req Algo, d *Dims) (Algo, error) {
	switch req {
	case Auto:
		return special(d, Im2col), nil
	case Naive, Im2col, LUT:
		return req, nil
	case Direct:
		return special(d, Direct), nil
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

// Options are the flags of a call.
type Options struct {
	ActBits     int  // 0: float32 activations; 8: int8 activations
	Algo        Algo // requested algorithm
	CheckFinite bool // reject NaN/Inf in x, bias and the weight's scales
}

// Info says how a call ran: the algorithm (the planner's resolution of the
// request) and the kernel path that computed it, "path/family": path one of
// naive, im2col_gemm, implicit_gemm, gemm1x1, gemv, direct, depthwise, lut
// (the 2-column Go tables), lut16 (the wide tables); family that of the
// code that ran the path's inner loops (generic for the Go loops). Kernel is
// empty when no kernel ran (N = 0).
type Info struct {
	Algo   Algo
	Kernel string
}

// kernels is one selection of every kernel op a convolution uses: a call
// takes one and uses it throughout.
type kernels struct {
	gemm *gemm.Kernels      // op "conv_gemm": micro-kernels, folds, quantizers, GEMV
	lut  *gemm.LUT16Kernels // op "conv_lut": the wide LUT kernels (generic: lut.go's instead)
	gemv *gemm.GemvKernels  // op "linear_gemv": the int8 GEMV (gemv.go)
	i8   *gemm.ConvI8       // op "conv_i8": the int8 implicit GEMM (implicit.go)
	scan *ternary.Quantizer // op "quantize_i2s": MaxAbs, the activation scales and finiteness scan
	// op "conv_directf": the implicit float32 kernel (directf.go)
	directf *gemm.DirectF32Kernels
	dw      *gemm.DepthwiseKernels // op "conv_dw": the depthwise kernel's rows (depthwise.go)
}

// selected returns the kernels the process selected at start-up.
func selected() kernels {
	return kernels{gemm.KernelOp.Get(), gemm.LUT16Op.Get(), gemm.GemvOp.Get(), gemm.ConvI8Op.Get(), ternary.QuantizeOp.Get(), gemm.DirectF32Op.Get(), gemm.DepthwiseOp.Get()}
}

// selectKernels returns the kernels a BITNET_GO_DISABLE setting selects
// (for tests: every family on an instance).
func selectKernels(s cpu.Selection) kernels {
	g, _ := gemm.KernelOp.Select(s)
	l, _ := gemm.LUT16Op.Select(s)
	v, _ := gemm.GemvOp.Select(s)
	q, _ := ternary.QuantizeOp.Select(s)
	i8, _ := gemm.ConvI8Op.Select(s)
	f, _ := gemm.DirectF32Op.Select(s)
	dw, _ := gemm.DepthwiseOp.Select(s)
	return kernels{g, l, v, i8, q, f, dw}
}

// Conv2D is Conv2DInfo returning the algorithm that ran.
func Conv2D(d Dims, x []float32, w Weights, bias []float32, out []float32, opt Options) (Algo, error) {
	info, err := Conv2DInfo(d, x, w, bias, out, opt)
	return info.Algo, err
}

// Conv2DInfo computes out = conv2d(x, w, bias) for the checked geometry d
// with the kernels the process selected and returns how it ran (Info). x is (N, C, H, W) and out (N, O, Ho, Wo),
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
func Conv2DInfo(d Dims, x []float32, w Weights, bias []float32, out []float32, opt Options) (Info, error) {
	return conv2d(&d, x, w, bias, out, opt, selected())
}

// conv2d is Conv2DInfo on the kernels ks.
func conv2d(d *Dims, x []float32, w Weights, bias []float32, out []float32, opt Options, ks kernels) (Info, error) {
	if err := d.checkBuffers(x, out, bias); err != nil {
		return Info{}, err
	}
	src := w // a TL/TQ weight's ID names its own bytes: asI2S replaces it with the conversion's
	var err error
	lut := wantLUT(d, opt, w.QType, ks.lut)
	tl := w.QType == ternary.TL1 || w.QType == ternary.TL2
	if lut && tl {
		err = checkTL(d, w) // the LUT kernels read TL rows as they are
	} else {
		w, err = asI2S(d, w)
	}
	if err != nil {
		return Info{}, err
	}
	sc, err := newScaler(d, w, bias)
	if err != nil {
		return Info{}, err
	}
	if opt.ActBits != 0 && opt.ActBits != 8 {
		return Info{}, errs.Value("act_bits must be 0 (float32) or 8, got %d", opt.ActBits)
	}
	kind, err := Plan(opt.Algo, d)
	if err != nil {
		return Info{}, err
	}
	if lut {
		kind = LUT
	}
	algo := kind // reported: the implicit float32 kernel as Im2col or Pointwise, as the int8 implicit GEMM is
	if opt.Algo == Auto && opt.ActBits == 0 && (kind == Im2col || kind == Pointwise && !useGEMV(d)) &&
		useImplicitF32(d, ks.directf) {
		kind = implicitF32
	}
	if kind == LUT && opt.ActBits != 8 {
		return Info{}, errs.Value("algorithm 'lut' needs int8 activations (act_bits=8); with act_bits=None use another algorithm")
	}
	// The int8 path takes its activation scales first: their max|x| pass
	// finds x's first NaN/Inf too, so checking x costs nothing more there.
	// Where the implicit GEMM will run (run's choice: not a GEMV), the
	// same pass writes its layout (actScales).
	var acts *activations
	if opt.ActBits == 8 && d.N > 0 {
		var lay *implicitLayoutOf
		if implicitKind(kind, d, sc, ks) && !(kind == Pointwise && useGEMV(d)) {
			lay = &implicitLayoutOf{newImplicitGeom(d), implicitOf(ks.i8), opt.CheckFinite}
		}
		acts = actScales(d, x, ks.scan, lay)
		defer acts.release()
	}
	xmax := unknownMax
	if opt.CheckFinite {
		var err error
		if xmax, err = checkFinite(d, x, acts, w.Scales, bias, ks.scan); err != nil {
			return Info{}, err
		}
	}
	if d.N == 0 {
		return Info{Algo: algo}, nil
	}
	if kind == LUT && tl {
		w = src // TL rows as they are
	}
	name, err := run(kind, d, x, acts, w, sc, out, ks, xmax)
	return Info{Algo: algo, Kernel: name}, err
}

// implicitKind reports whether an int8 convolution planned as kind runs as
// the implicit GEMM unless it runs as a GEMV: the one rule conv2d (which
// writes the implicit layout with the scales) and run follow.
func implicitKind(kind Algo, d *Dims, sc *scaler, ks kernels) bool {
	return (kind == Im2col || kind == Pointwise) && useImplicit(d, sc, ks.i8)
}

// run executes one kernel on the kernel selection ks and returns its name
// (see Info), with the activation scales acts (int8 path; run quantizes x
// with them unless the implicit GEMM does) or on x (acts nil: float32
// path); tests call it to run a kernel the planner would not pick (the
// general direct kernel on a depthwise shape, for instance). xmax is max|x|
// when the float32 path's x was checked to hold no NaN or Inf (checkFinite's
// scan), else unknownMax: the paths that need to know scan x then. w is
// I2_S, or TL1 / TL2 for LUT.
func run(kind Algo, d *Dims, x []float32, acts *activations, w Weights, sc *scaler, out []float32, ks kernels,
	xmax float32) (string, error) {
	g := ks.gemm
	sc.ks = g
	if kind == implicitF32 && acts == nil {
		if useWinograd(d, ks.directf) && winoFinite(x, xmax, sc, ks.scan) {
			return kernelName("implicit_f32_winograd", ks.directf.Family), winogradConvF32(d, w, x, sc, out, ks.directf)
		}
		if useBlockedF32(d, ks.directf) {
			return kernelName("implicit_f32_blocked", ks.directf.Family), blockedConvF32(d, w, x, sc, out, ks.directf)
		}
		return kernelName("implicit_f32", ks.directf.Family), directConvF32(d, w, x, sc, out, ks.directf)
	}
	act8 := acts != nil
	asGEMV := kind == Pointwise && useGEMV(d)
	var gw gemvWeight
	if asGEMV {
		var err error
		if gw, asGEMV, err = gemvLayout(d, w, sc); err != nil {
			return "", err
		}
	}
	implicit := act8 && !asGEMV && implicitKind(kind, d, sc, ks)
	if act8 && !implicit {
		acts.quantize(d, x, g.QuantI8)
	}
	if kind == LUT {
		return runLUT(d, w, acts, sc, out, ks.lut)
	}
	if kind == Naive {
		return kernelName("naive", cpu.Generic), naive(d, x, acts, w, sc, out)
	}
	if asGEMV {
		if act8 {
			kern, valid := ks.gemv.I8, gemm.CodesValid(w.ID)
			if valid {
				kern = validOnly(ks.gemv.I8Valid)
			}
			blocks := gemvBlocks[int8, int32](ks.gemv.Blocks(valid))
			err := gemv(d, gw, acts.q, acts, sc, out, kern, blocks, nil, gemm.SumI8, (*scaler).fold1I32, (*scaler).foldRunI32)
			if err == nil && !valid {
				gemm.MarkCodesValid(w.ID) // every code read (an interrupted call panics in par.Run)
			}
			return kernelName("gemv", ks.gemv.Family), err
		}
		return kernelName("gemv", g.Base), gemv(d, gw, x, nil, sc, out, gemvF32(g), nil, gemm.GemvOrder, nil, (*scaler).fold1F32, (*scaler).foldRunF32)
	}
	if implicit {
		wl, err := implicitWeights(d, w, newImplicitGeom(d), g)
		if err != nil {
			return "", err
		}
		implicitConv(d, wl, x, acts, sc, out, implicitOf(ks.i8))
		return kernelName("implicit_gemm", ks.i8.Family), nil
	}
	a, err := panels(d, w, g)
	if err != nil {
		return "", err
	}
	switch kind {
	case Im2col, Pointwise:
		path := "im2col_gemm"
		if kind == Pointwise {
			path = "gemm1x1"
		}
		if act8 {
			gemmConv(d, a, acts.q, acts, sc, out, kind == Pointwise, g.NRI8, microFn[int8, int32](g.I8), g.PrepareI8, foldI32)
			return kernelName(path, g.I8Family), nil
		}
		gemmConv(d, a, x, nil, sc, out, kind == Pointwise, g.NRF32, microFn[float32, float32](g.F32), nil, foldF32)
		return kernelName(path, g.Family), nil
	case Direct, Depthwise:
		// The direct kernels skip zero weights, which add nothing to
		// finite sums but must turn NaN and Inf into NaN (0*x): they skip
		// them when x is known finite (int8 values always are).
		skip := act8 || xmax >= 0 || firstNonFinite(x, ks.scan) < 0
		switch {
		case kind == Direct && act8:
			direct(d, a, acts.q, acts, sc, out, foldI32, skip)
		case kind == Direct:
			direct(d, a, x, nil, sc, out, foldF32, skip)
		case act8 && kind == Depthwise && useLanesI8(d, sc, ks.dw):
			depthwiseLanes(d, a, acts.q, acts, sc, out, ks.dw, ks.dw.InterleaveI8)
			return kernelName("depthwise_lanes", ks.dw.Family), nil
		case act8 && ks.dw != nil && ks.dw.Family != cpu.Generic:
			_, taps := dwKernels(ks.dw)
			depthwisePadded(d, a, acts.q, acts, sc, out, foldI32, skip, taps, false)
		case act8:
			depthwise(d, a, acts.q, acts, sc, out, foldI32, skip)
		case kind == Depthwise && useLanes(d, ks.dw):
			depthwiseLanes(d, a, x, nil, sc, out, ks.dw, ks.dw.Interleave)
			return kernelName("depthwise_lanes", ks.dw.Family), nil
		case ks.dw != nil && ks.dw.Family != cpu.Generic:
			taps, _ := dwKernels(ks.dw)
			depthwisePadded(d, a, x, nil, sc, out, foldF32, skip, taps, true)
		default:
			depthwise(d, a, x, nil, sc, out, foldF32, skip)
		}
		if kind == Depthwise && ks.dw != nil {
			return kernelName(kind.String(), ks.dw.Family), nil
		}
		return kernelName(kind.String(), cpu.Generic), nil
	}
	return "", errs.Runtime("conv: no kernel for algorithm %d", int32(kind))
}

// kernelName is the name Info reports for a kernel path run by family f.
func kernelName(path string, f cpu.Family) string { return path + "/" + string(f) }
