package cuda

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Launch geometry shared with cuda/conv.cu (BNG_C* macros there).
const (
	convTileO   = 64   // output channels per implicit GEMM tile (BNG_CBM)
	convTileP   = 64   // output positions per tile (BNG_CBN)
	convChunk   = 4096 // values per CTA step of the activation kernels (BNG_CCHUNK)
	gemvCols    = 8    // most columns of one GEMV launch (BNG_GEMV_COLS)
	gemvRowsCTA = 8    // output rows per GEMV CTA (one per warp)

	convPerRow  = 1 // BNG_CF_PER_ROW
	convBias    = 2 // BNG_CF_BIAS
	convWAlign4 = 4 // BNG_CF_W_ALIGN4
)

// convArgs mirrors struct bng_conv_args in cuda/conv.cu: 32 fields of 8
// bytes, the 8 pointers first.
type convArgs struct {
	X, Q, W, Scales, Bias, Out, Amax, Bad                          uint64
	N, C, H, Wd, O, Cg, Og, KH, KW, Ho, Wo, SH, SW, PT, PL, DH, DW int64
	K, NB, BL                                                      int64
	TilesO, TilesP, Cols, Flags                                    int64
}

// convPlan is how one W1.58A8 convolution runs on the GPU. Like plan, it
// depends only on the shapes, never on the GPU.
type convPlan struct {
	d      conv2d.Dims
	nb, bl int64 // scale blocks per output channel and their length in k
	perRow bool  // scales: one per (channel, block), else one
	gemv   bool  // a linear layer: a GEMV kernel, gemvCols columns per launch (float: at most gemvCols rows)
	gemvAl bool  // ... K and the block multiples of 128: bng_linear_gemv, else bng_linear_gemv_any
	float  bool  // float32 activations (act_bits=None): bng_conv_fgemm, no quantization

	// Workspace layout (bytes): the first non-finite index of x (uint64)
	// at 0, the first weight position holding code 3 (uint64) at
	// offBadCode, the per-sample max|x| (float32) at offAmax, int8 x at offQ.
	offAmax, offQ, work int64
}

// newConvPlan checks a weight's block size and scale count against the
// checked geometry d (the rules of gokern/ops/conv2d's scaler) and returns
// the plan: int8 activations (W1.58A8), or float32 ones with float.
func newConvPlan(d *conv2d.Dims, blockSize, nScales int64, float bool) (convPlan, error) {
	bs := blockSize
	if bs > 0 && ternary.NumBlocks(d.WLen, int(bs)) == 1 {
		bs = 0 // one block covers the tensor: one scale, whatever K
	}
	k := int64(d.K)
	if bs < 0 || (bs > 0 && k%bs != 0) {
		return convPlan{}, errs.Value("weight: block_size=%d must be None (one scale) or divide K = C/groups*kH*kW = %d "+
			"(block_size=K is one scale per output channel)", bs, k)
	}
	if want := int64(ternary.NumBlocks(d.WLen, int(bs))); nScales != want {
		return convPlan{}, errs.Value("weight: scales must have %d entries for %d values in blocks of %d, got %d",
			want, d.WLen, bs, nScales)
	}
	p := convPlan{d: *d, nb: 1, bl: k, float: float}
	if nScales > 1 {
		p.perRow, p.nb, p.bl = true, k/bs, bs
	}
	p.gemv = d.H == 1 && d.W == 1 && d.KH == 1 && d.KW == 1 && d.PadT == 0 && d.PadL == 0 &&
		d.Ho == 1 && d.Wo == 1 && d.Groups == 1 && (!float || d.N <= gemvCols)
	p.gemvAl = p.gemv && !float && k%ternary.GroupValues == 0 && p.bl%ternary.GroupValues == 0
	p.offAmax, p.offQ = 16, convOffQ(d)
	p.work = ConvWorkspaceSize(d)
	return p, nil
}

// mmaMinCC is the compute capability (major*10+minor) from which the
// convolutions take the tensor-core kernel (bng_conv_igemm_mma): sm_80.
const mmaMinCC = 80

// kernelName is the kernel Info reports; tc: the GPU takes the tensor-core
// kernel (compute capability mmaMinCC or newer).
func (p convPlan) kernelName(tc bool) string {
	switch {
	case p.float && p.gemv:
		return "cuda_gemv/fp32"
	case p.float:
		return "cuda_implicit_gemm/fp32"
	case p.gemvAl:
		return "cuda_gemv/dp4a"
	case p.gemv:
		return "cuda_gemv_unaligned/dp4a"
	case tc:
		return "cuda_implicit_gemm/mma_m8n8k16"
	}
	return "cuda_implicit_gemm/dp4a"
}

// convBufs are the device addresses of one convolution's operands.
type convBufs struct {
	x, w, scales, bias, out, work uint64
}

// ptrs returns the addresses to check against the context (bias when set).
func (b convBufs) ptrs() []uint64 {
	p := []uint64{b.x, b.w, b.scales, b.out, b.work}
	if b.bias != 0 {
		p = append(p, b.bias)
	}
	return p
}

// convOps returns the stream operations of a convolution: the activation
// scales (and x's first non-finite index when check), then, in a second
// list, the quantization and the products (the caller reads the index back
// between the two when check is set). tc takes the tensor-core implicit
// GEMM (GEMVs and the float kernel have no such variant). With float activations the scan runs
// only when check is set, and the products read x itself.
func convOps(p convPlan, check bool, b convBufs, gridCap int64, tc bool) (scan, run []op) {
	d := &p.d
	a := convArgs{
		X: b.x, Q: b.work + uint64(p.offQ), W: b.w, Scales: b.scales, Bias: b.bias, Out: b.out,
		Amax: b.work + uint64(p.offAmax),
		N:    int64(d.N), C: int64(d.C), H: int64(d.H), Wd: int64(d.W), O: int64(d.O), Cg: int64(d.Cg), Og: int64(d.Og),
		KH: int64(d.KH), KW: int64(d.KW), Ho: int64(d.Ho), Wo: int64(d.Wo), SH: int64(d.StrideH), SW: int64(d.StrideW),
		PT: int64(d.PadT), PL: int64(d.PadL), DH: int64(d.DilH), DW: int64(d.DilW),
		K: int64(d.K), NB: p.nb, BL: p.bl,
	}
	if p.perRow {
		a.Flags |= convPerRow
	}
	if b.bias != 0 {
		a.Flags |= convBias
	}
	if b.w%4 == 0 {
		a.Flags |= convWAlign4
	}
	if check {
		a.Bad = b.work
		scan = append(scan, op{ptr: b.work, value: 0xffffffff, count: 4}) // both uint64 slots
	}
	mk := func(k kernel, units int64, args convArgs) op {
		return op{launch: true, k: k, grid: uint32(max(1, min(units, gridCap))), conv: &args}
	}
	per := int64(d.C * d.H * d.W)
	chunks := int64(d.N) * ((per + convChunk - 1) / convChunk)
	if !p.float || check {
		scan = append(scan, op{ptr: a.Amax, value: 0, count: int64(d.N)}, mk(kConvAbsMax, chunks, a))
	}
	if check {
		c := a
		c.Bad = b.work + offBadCode
		wBytes := int64(ternary.PackedLen(d.WLen))
		scan = append(scan, mk(kConvCheckCodes, (wBytes+ctaThreads-1)/ctaThreads, c))
	}
	q := a
	q.Bad = 0
	if p.float && p.gemv {
		q.Q, q.Amax, q.Cols = 0, 0, a.N
		return scan, append(run, mk(kLinearFGemv, (a.O+gemvRowsCTA-1)/gemvRowsCTA, q))
	}
	if p.float {
		q.Q, q.Amax = 0, 0
		q.TilesO = (a.Og + convTileO - 1) / convTileO
		q.TilesP = (a.Ho*a.Wo + convTileP - 1) / convTileP
		return scan, append(run, mk(kConvFGemm, a.N*int64(d.Groups)*q.TilesO*q.TilesP, q))
	}
	run = append(run, mk(kConvQuant, chunks, q))
	if p.gemv {
		for c0 := int64(0); c0 < int64(d.N); c0 += gemvCols {
			g := q
			g.Cols = min(gemvCols, int64(d.N)-c0)
			g.Q += uint64(c0 * a.K)
			g.Out += uint64(4 * c0 * a.O)
			g.Amax += uint64(4 * c0)
			k := kLinearGemvAny
			if p.gemvAl {
				k = kLinearGemv
			}
			run = append(run, mk(k, (a.O+gemvRowsCTA-1)/gemvRowsCTA, g))
		}
		return scan, run
	}
	g := q
	g.TilesO = (a.Og + convTileO - 1) / convTileO
	g.TilesP = (a.Ho*a.Wo + convTileP - 1) / convTileP
	k := kConvIGemm
	if tc {
		k = kConvIGemmMMA
	}
	return scan, append(run, mk(k, a.N*int64(d.Groups)*g.TilesO*g.TilesP, g))
}

// offBadCode is the workspace offset of the first invalid weight position.
const offBadCode = 8

// convOffQ is the workspace offset of the int8 activations.
func convOffQ(d *conv2d.Dims) int64 { return align(16+4*int64(max(d.N, 1)), 256) }
