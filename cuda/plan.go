package cuda

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// Launch geometry shared with cuda/i2s.cu (BNG_* macros there).
const (
	ctaThreads  = 256  // threads per CTA
	ctaWarps    = 8    // warps per CTA
	tileMax     = 4096 // values per fused tile (shared memory)
	smallBlocks = 256  // blocks per fused tile when blocks are < 32 values
	chunkValues = 2048 // values per warp in the partials kernel
	wideChunks  = 64   // blocks of more chunks than this finish with a whole CTA
	warpStep    = 512  // values per warp step of the warp kernel (BNG_WSTEP)
	warpSteps   = 2    // warp steps loaded at once (BNG_WSTEPS)

	flagXAligned16     = 1
	flagWide           = 2
	flagPackedAligned4 = 4
)

// kargs mirrors struct bng_args in cuda/i2s.cu: 16 fields of 8 bytes.
type kargs struct {
	X, Packed, Scales, Out, Bad, Partial, Thr uint64
	N, BS, NB, Tile, WPB, CPB, NChunks        int64
	Magic, Flags                              uint64
}

// plan is how one quantization runs on the GPU. It depends only on the
// element count and block size (never on the GPU), so a result is the same
// on every GPU.
type plan struct {
	n, bs, nb int64 // bs == n when the tensor has one scale
	warp      bool  // one kernel, one warp per 512 values, no shared memory (bs 32..1024)
	fused     bool  // one kernel (tiles in shared memory), else partials+finish+encode
	tile      int64 // fused: values per tile; two-pass: values per chunk
	wpb       int64 // fused, bs >= 32: warps per block
	magic     uint64
	cpb       int64 // two-pass: chunks per block
	nchunks   int64
	wide      bool

	// Workspace layout (bytes): the first non-finite index (uint64) at 0,
	// then for the two-pass plan float64 partials and float32 thresholds.
	offPartial, offThr, work int64
}

// newPlan validates the sizes and returns the plan for n values in blocks
// of blockSize (0: one scale for the tensor).
func newPlan(n, blockSize int64) (plan, error) {
	if err := ternary.CheckSizes(int(n), int(blockSize)); err != nil {
		return plan{}, err
	}
	nb := int64(ternary.NumBlocks(int(n), int(blockSize)))
	bs := blockSize
	if nb == 1 {
		bs = n
	}
	p := plan{n: n, bs: bs, nb: nb, work: 8}
	if nb > 1 && warpBlock(bs) {
		p.warp, p.tile = true, warpStep
		return p, nil
	}
	limit := int64(tileMax)
	if bs < 32 {
		limit = min(tileMax, smallBlocks*bs)
	}
	switch {
	case n <= limit:
		p.fused, p.tile = true, limit // one tile holds the tensor
	case nb > 1:
		if unit := lcm(bs, ternary.GroupValues); unit <= limit {
			p.fused, p.tile = true, unit*(limit/unit)
		}
	}
	if p.fused {
		perTile := (min(p.tile, n) + bs - 1) / bs
		p.wpb = max(1, ctaWarps/perTile)
		if bs >= 2 {
			p.magic = (1<<32 + uint64(bs) - 1) / uint64(bs)
		}
		return p, nil
	}
	p.tile = chunkValues
	p.cpb = (bs + chunkValues - 1) / chunkValues
	p.nchunks = nb * p.cpb
	p.wide = p.cpb > wideChunks
	p.offPartial = 8
	p.offThr = align(p.offPartial+8*p.nchunks, 16)
	p.work = p.offThr + 4*nb
	return p, nil
}

// warpBlock reports whether blocks of bs values take the warp kernel: whole
// blocks in a warp step (or, for 1024, in the two steps of an iteration),
// aligned with its 128-value groups.
func warpBlock(bs int64) bool {
	switch bs {
	case 32, 64, 128, 256, 512, 1024:
		return true
	}
	return false
}

// workBytes is the size of the workspace the caller provides, rounded up to
// 256 bytes.
func (p plan) workBytes() int64 { return align(p.work, 256) }

// ntiles is the number of fused tiles.
func (p plan) ntiles() int64 { return (p.n + p.tile - 1) / p.tile }

func lcm(a, b int64) int64 {
	g, h := a, b
	for h != 0 {
		g, h = h, g%h
	}
	return a / g * b
}

func align(v, a int64) int64 { return (v + a - 1) / a * a }

// WorkspaceSize returns the bytes of device workspace QuantizeDevice needs
// for n values in blocks of blockSize (0: one scale).
func WorkspaceSize(n, blockSize int64) (int64, error) {
	p, err := newPlan(n, blockSize)
	if err != nil {
		return 0, err
	}
	return p.workBytes(), nil
}

// Kernel entry points of the embedded PTX, in the order of the function
// table of a loaded module.
type kernel int

const (
	kFusedAbsMean kernel = iota
	kFusedAbsMax
	kPartialsAbsMean
	kPartialsAbsMax
	kFinishAbsMean
	kFinishAbsMax
	kEncode
	kUnpack
	kDequantize
	kWarpAbsMean
	kWarpAbsMax
	kConvAbsMax
	kConvQuant
	kConvIGemm
	kLinearGemv
	kConvFGemm
	kConvCheckCodes
	kLinearGemvAny
	kConvIGemmMMA
	kLinearFGemv
	numKernels
)

var kernelNames = [numKernels]string{
	"bng_i2s_fused_absmean",
	"bng_i2s_fused_absmax",
	"bng_i2s_partials_absmean",
	"bng_i2s_partials_absmax",
	"bng_i2s_finish_absmean",
	"bng_i2s_finish_absmax",
	"bng_i2s_encode",
	"bng_i2s_unpack",
	"bng_i2s_dequantize",
	"bng_i2s_warp_absmean",
	"bng_i2s_warp_absmax",
	"bng_conv_absmax",
	"bng_conv_quant",
	"bng_conv_igemm",
	"bng_linear_gemv",
	"bng_conv_fgemm",
	"bng_conv_check_codes",
	"bng_linear_gemv_any",
	"bng_conv_igemm_mma",
	"bng_linear_fgemv",
}

// Entries returns the kernel names the library launches (all must be
// .entry points of the embedded PTX).
func Entries() []string { return append([]string(nil), kernelNames[:]...) }

// op is one step of a stream's work: a kernel launch or a 32-bit memset.
type op struct {
	launch bool
	k      kernel
	grid   uint32
	args   kargs
	conv   *convArgs // the arguments of a conv.cu kernel (instead of args)
	// memset
	ptr   uint64
	value uint32
	count int64
}

// devBufs are the device addresses of one quantization's buffers.
type devBufs struct {
	x, packed, scales, work uint64
}

// quantizeOps returns the stream operations of a quantization. gridCap
// bounds every grid (the kernels loop, so it changes nothing but speed).
func quantizeOps(p plan, m ternary.Method, check bool, b devBufs, gridCap int64) []op {
	a := kargs{
		X: b.x, Packed: b.packed, Scales: b.scales,
		N: p.n, BS: p.bs, NB: p.nb, Tile: p.tile, WPB: p.wpb, CPB: p.cpb, NChunks: p.nchunks,
		Magic: p.magic,
	}
	if b.x%16 == 0 {
		a.Flags |= flagXAligned16
	}
	if b.packed%4 == 0 {
		a.Flags |= flagPackedAligned4
	}
	if p.wide {
		a.Flags |= flagWide
	}
	var ops []op
	if check {
		a.Bad = b.work
		ops = append(ops, op{ptr: b.work, value: 0xffffffff, count: 2})
	}
	mk := func(k kernel, units int64) op {
		return op{launch: true, k: k, grid: uint32(max(1, min(units, gridCap))), args: a}
	}
	abs := int(m) // AbsMean 0 / AbsMax 1 select the kernel of the pair
	if p.warp {
		steps := (p.n + warpStep - 1) / warpStep
		return append(ops, mk(kWarpAbsMean+kernel(abs), (steps+ctaWarps*warpSteps-1)/(ctaWarps*warpSteps)))
	}
	if p.fused {
		return append(ops, mk(kFusedAbsMean+kernel(abs), p.ntiles()))
	}
	a.Partial = b.work + uint64(p.offPartial)
	a.Thr = b.work + uint64(p.offThr)
	finish := (p.nb + ctaWarps - 1) / ctaWarps
	if p.wide {
		finish = p.nb
	}
	nbytes := int64(ternary.PackedLen(int(p.n)))
	return append(ops,
		mk(kPartialsAbsMean+kernel(abs), (p.nchunks+ctaWarps-1)/ctaWarps),
		mk(kFinishAbsMean+kernel(abs), finish),
		mk(kEncode, (nbytes+ctaThreads-1)/ctaThreads),
	)
}

// unpackOp and dequantizeOp are the launches of TernaryTensor.values() and
// dequantize() on the GPU.
func unpackOp(n int64, packed, out uint64, gridCap int64) op {
	nbytes := int64(ternary.PackedLen(int(n)))
	return op{launch: true, k: kUnpack, grid: uint32(max(1, min((nbytes+ctaThreads-1)/ctaThreads, gridCap))),
		args: kargs{Packed: packed, Out: out, N: n, BS: n, NB: 1}}
}

func dequantizeOp(n, blockSize int64, packed, scales, out uint64, gridCap int64) op {
	nb := int64(ternary.NumBlocks(int(n), int(blockSize)))
	bs := blockSize
	if nb == 1 {
		bs = n
	}
	o := unpackOp(n, packed, out, gridCap)
	o.k = kDequantize
	o.args.Scales, o.args.BS, o.args.NB = scales, bs, nb
	return o
}

// checkMethod validates a C ABI method number.
func checkMethod(m ternary.Method) error {
	if m != ternary.AbsMean && m != ternary.AbsMax {
		return errs.Value("method must be 0 (absmean) or 1 (absmax), got %d", m)
	}
	return nil
}

// PlanInfo describes how a quantization of n values in blocks of blockSize
// runs on the GPU (for benchmarks and tests).
type PlanInfo struct {
	Passes    int   `json:"passes"`    // 1: fused kernel, 2: x is read twice
	Tile      int64 `json:"tile"`      // fused tile or two-pass chunk, in values
	Blocks    int64 `json:"blocks"`    // number of scales
	Workspace int64 `json:"workspace"` // bytes of device workspace
}

// Describe returns the PlanInfo of n values in blocks of blockSize.
func Describe(n, blockSize int64) (PlanInfo, error) {
	p, err := newPlan(n, blockSize)
	if err != nil {
		return PlanInfo{}, err
	}
	info := PlanInfo{Passes: 2, Tile: p.tile, Blocks: p.nb, Workspace: p.workBytes()}
	if p.fused || p.warp {
		info.Passes = 1
	}
	return info, nil
}
