package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	mk "github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// Act is a matrix of quantized activations: M x K codes, row-major.
type Act struct {
	Data   []byte // uint8 codes, or int8 codes' bits when Signed
	Signed bool
	Scale  float32
	Zero   int32
}

// Weight is a matrix of quantized weights: N x K codes, row-major (K x N
// when Transposed: matmul's right operand).
type Weight struct {
	Data       []byte // int8 codes' bits, or uint8 codes when Unsigned
	Unsigned   bool
	Transposed bool
	Scales     []float32 // one (per tensor) or N (per channel)
	Zeros      []int32   // one or N
	// ColSums, where not nil, are the sums of each channel's K codes (N
	// values, the codes as given): callers that keep a weight pass them so
	// that a call does not sum the weight again.
	ColSums []int32
	// ID, where not 0, names Data for the life of the process: the caller
	// promises that these codes never change and that no other codes are
	// ever passed with this ID (bng_qops_params' weight_id: a quantized
	// tensor's immutable array). Its kept panels are then found by ID
	// alone, with no comparison of the codes and no copy of them kept.
	ID uint64
}

// Output says how outputs are quantized.
type Output struct {
	Scale  float32
	Zero   int32
	Signed bool // int8 codes (-128..127), else uint8
	Relu   bool // outputs below the zero point are the zero point
}

// Info is what ran.
type Info struct {
	Kernel string // "path/family", e.g. "gemm/avx512vnni"
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// rowsFor is the number of rows an activation buffer of m rows needs.
func rowsFor(m int) int {
	if m < 4 {
		return m
	}
	return roundUp(m, 4)
}

// packAct returns x as unsigned rows of lda >= kp bytes (zero-padded; at
// least rowsFor(M) rows, those past M zero), its row sums, and the zero
// point in the unsigned domain. x's buffer is used as it is when it already
// has that layout (lda == K).
func packAct(x Act, M, K, kp, lda int) ([]byte, []int32, int32) {
	za := x.Zero
	var a []byte
	if !x.Signed && K == kp && lda == K && rowsFor(M) == M {
		a = x.Data[:M*K]
	} else {
		a = make([]byte, rowsFor(M)*lda)
		for m := 0; m < M; m++ {
			dst, src := a[m*lda:m*lda+K], x.Data[m*K:m*K+K]
			if x.Signed {
				for i, v := range src {
					dst[i] = v ^ 0x80
				}
			} else {
				copy(dst, src)
			}
		}
	}
	if x.Signed {
		za += 128
	}
	rs := make([]int32, M)
	for m := range rs {
		rs[m] = mk.SumU8(a[m*lda : m*lda+K])
	}
	return a, rs, za
}

// tailMinK is the least K whose weight the dot kernels read as given when K
// is not a multiple of KB (gemm.tile adds the last K%KB products in Go);
// below it the weight is copied into rows padded to KB.
const tailMinK = 4 * KB

// packWeight returns w's N channels as int8 rows of ldw values (kp, padded
// with zeros; or K: the given buffer, when K == kp or K >= tailMinK) and
// the column sums of the rows returned.
func packWeight(w Weight, N, K, kp int) ([]int8, int, []int32) {
	var rows []int8
	ldw := kp
	if !w.Unsigned && !w.Transposed && (K == kp || K >= tailMinK) {
		rows, ldw = asInt8(w.Data[:N*K]), K
	} else {
		rows = make([]int8, N*kp)
		var flip byte
		if w.Unsigned {
			flip = 0x80
		}
		for n := 0; n < N; n++ {
			dst := rows[n*kp : n*kp+K]
			if w.Transposed {
				for k := range dst {
					dst[k] = int8(w.Data[k*N+n] ^ flip)
				}
			} else {
				for k, v := range w.Data[n*K : n*K+K] {
					dst[k] = int8(v ^ flip)
				}
			}
		}
	}
	cs := w.ColSums
	if cs == nil || w.Unsigned || w.Transposed {
		cs = make([]int32, N)
		for n := range cs {
			cs[n] = mk.SumI8(rows[n*ldw : n*ldw+K])
		}
	}
	return rows, ldw, cs
}

// outRange returns the codes an output may take.
func outRange(o Output) (lo, hi int32) {
	lo, hi = 0, 255
	if o.Signed {
		lo, hi = -128, 127
	}
	if o.Relu {
		lo = max(lo, o.Zero)
	}
	return lo, hi
}

// checkParams checks the scales of the operands.
func checkParams(x Act, w Weight, o *Output, N int) error {
	if err := quant.CheckScale("x's scale", "", x.Scale); err != nil {
		return err
	}
	if o != nil {
		if err := quant.CheckScale("the output scale", "", o.Scale); err != nil {
			return err
		}
		dt := qtensor.U8
		if o.Signed {
			dt = qtensor.I8
		}
		if err := quant.CheckZeroPoint("the output zero point", "", o.Zero, dt); err != nil {
			return err
		}
	}
	if len(w.Scales) != 1 && len(w.Scales) != N {
		return errs.Value("weight: %d scales for %d output channels (want 1 or %d)", len(w.Scales), N, N)
	}
	if len(w.Zeros) != len(w.Scales) {
		return errs.Value("weight: %d zero points for %d scales", len(w.Zeros), len(w.Scales))
	}
	for _, s := range w.Scales {
		if !quant.ValidScale(s) { // thousands of scales a call: the message only for a bad one
			return quant.CheckScale("weight scales", "", s)
		}
	}
	return nil
}

// requant builds the epilogue of a product over K values.
func requant(N, K int, za int32, zw, cs []int32, sa float32, sw []float32, bias []float32, o *Output) *Requant {
	return requantInto(new(Requant), N, K, za, zw, cs, sa, sw, bias, o)
}

// requantInto is requant into r, reusing its slices where long enough.
func requantInto(r *Requant, N, K int, za int32, zw, cs []int32, sa float32, sw []float32, bias []float32, o *Output) *Requant {
	keep := r.BiasQ
	*r = Requant{ZW: zw, ColTerm: resize(r.ColTerm, N), Mult: r.Mult, Scale: r.Scale, BiasQ: r.BiasQ}
	r.ZWZero = colTerms(r.ColTerm, cs, zw, za, int32(K))
	so := float32(1)
	if o != nil {
		so = o.Scale
		r.ZO = o.Zero
		r.Lo, r.Hi = outRange(*o)
	}
	r.ChannelParams(N, sa, sw, so, bias)
	if o == nil {
		r.Bias = bias
		r.BiasQ = nil
	} else if bias == nil {
		r.BiasQ = resize(keep, N) // adding 0 changes no float32(raw): the kernels' Quant needs a bias
		clear(r.BiasQ)
	}
	return r
}

// colTerms sets ct[n] = za*(cs[n] - k*zw[n]) (the Requant's ColTerm) for n
// < len(ct) and reports whether every zw[n] is 0. A function of its own:
// inside requantInto the loop kept its values on the stack, and took 4 of
// the 8.6 us of a 4096-channel epilogue.
//
//go:noinline
func colTerms(ct, cs, zw []int32, za, k int32) bool {
	cs, zw = cs[:len(ct)], zw[:len(ct)] // no bounds checks in the loop
	var nz int32                        // the zero points ORed: no branch
	for n, z := range zw {
		ct[n] = za * (cs[n] - k*z)
		nz |= z
	}
	return nz == 0
}

func kernelName(path string, k *Kernels) string { return path + "/" + string(k.Family) }

// tileMinRows is the least rows that take the tile path: fewer rows run
// the dot kernels on the weight as given (a GEMV streams it once, with no
// packing and no panels kept). Measured (BenchmarkLinear, avx512vnni,
// AMD EPYC Zen 4, medians of 3 runs, 1 / 2 threads, ms): 64 x 4096 x 4096
// dots 7.11 / 4.31, tiles 7.36 / 4.78; 64 x 11008 x 4096 dots 17.3 /
// 10.1, tiles 21.6 / 11.3; 128 rows dots 13.7 / 7.8, tiles 15.3 / 8.4;
// at 256 rows the two within noise of each other (24-28 / 15-17).
const tileMinRows = 256

// product returns the gemm of x (M x K) and w's N channels (the epilogue
// left to set), the activations' zero point in the unsigned domain, the
// weight's column sums and the handle of its scratch (nil: none). keep: w's
// panels may be kept from call to call.
func product(k *Kernels, M, N, K int, x Act, w Weight, keep bool) (*gemm, int32, []int32, *[]byte) {
	if M < tileMinRows {
		kp := roundUp(K, KB)
		lda := kp
		if M >= 4 {
			// rows of 4-8 kernels apart by a multiple of 4 KiB would share
			// their L1 sets with each other and with the weight rows
			lda += KB
		}
		a, rs, za := packAct(x, M, K, kp, lda)
		rows, ldw, cs := packWeight(w, N, K, kp)
		return &gemm{M: M, N: N, K: K, kp: kp, A: a, lda: lda, W: rows, ldw: ldw, RowSum: rs}, za, cs, nil
	}
	za := x.Zero
	var flip byte
	if x.Signed {
		za += 128
		flip = 0x80
	}
	p := weightPanels(w, N, K, 1, keep && !w.Unsigned && !w.Transposed, 0, 0)
	tiles, rs, h := packActs(k, &rowSrc{data: x.Data, M: M, K: K, flip: flip}, p.kq)
	return &gemm{M: M, N: N, K: K, P: p, Tiles: tiles, RowSum: rs}, za, p.cs, h
}

// zeroPointsInto returns w's N zero points in the signed domain, in dst
// where its capacity allows.
//
// The branches stay out of the loops: with them inside, a 1 x 11008 x 128
// linear with per-channel scales took 72.9 us against 65.7, 1 x 4096 x 128
// 27.9 against 24.3 (Go benchmark, Zen 4, 1 thread, medians of 3).
func zeroPointsInto(dst []int32, w Weight, N int) []int32 {
	zw := resize(dst, N)
	var off int32
	if w.Unsigned {
		off = 128
	}
	if len(w.Zeros) == 1 {
		z := w.Zeros[0] - off
		for n := range zw {
			zw[n] = z
		}
		return zw
	}
	src := w.Zeros[:len(zw)]
	for n, z := range src {
		zw[n] = z - off
	}
	return zw
}

// Linear computes out (M x N codes, row-major) = the quantized x·wᵀ + bias
// (bias: nil or N floats) as fbgemm does (package comment). M may be 0.
func Linear(k *Kernels, M, N, K int, x Act, w Weight, bias []float32, o Output, out []byte) (Info, error) {
	return linear(k, M, N, K, x, w, bias, &o, out, nil)
}

// LinearFloat is Linear with float32 outputs: float32(raw)*float32(sa*sw(n))
// + bias(n) (fbgemm's ReQuantizeForFloat), the dynamic linear's epilogue.
func LinearFloat(k *Kernels, M, N, K int, x Act, w Weight, bias []float32, out []float32) (Info, error) {
	return linear(k, M, N, K, x, w, bias, nil, nil, out)
}

// linear is Linear (o not nil: codes into out) and LinearFloat (o nil:
// float32 into outF), its epilogue in a kept callMem.
func linear(k *Kernels, M, N, K int, x Act, w Weight, bias []float32, o *Output, out []byte, outF []float32) (Info, error) {
	if err := checkParams(x, w, o, N); err != nil {
		return Info{}, err
	}
	call, ch := getCall()
	defer calls.Put(ch)
	g, za, cs, h := product(k, M, N, K, x, w, !w.Transposed)
	call.zw = zeroPointsInto(call.zw, w, N)
	g.R = requantInto(&call.r, N, K, za, call.zw, cs, x.Scale, w.Scales, bias, o)
	g.Out, g.OutF, g.rs, g.cs = out, outF, N, 1
	g.run(k)
	if h != nil {
		scratch.Put(h)
	}
	return Info{Kernel: kernelName(g.path(), k)}, nil
}

// Matmul computes batch products out[b] = a[b]·bm[b] (a: M x K, bm: K x N,
// both per-tensor, both uint8 or both int8; out: M x N codes of the same
// type) with Linear's arithmetic (bm is the transposed weight, unsigned
// codes shifted to signed exactly).
func Matmul(k *Kernels, batch, M, N, K int, a Act, bm Weight, o Output, out []byte) (Info, error) {
	if err := checkParams(a, bm, &o, N); err != nil {
		return Info{}, err
	}
	var info Info
	for b := 0; b < batch; b++ {
		ab := a
		ab.Data = a.Data[b*M*K : (b+1)*M*K]
		wb := bm
		wb.Data = bm.Data[b*K*N : (b+1)*K*N]
		wb.Transposed = true
		var err error
		if info, err = Linear(k, M, N, K, ab, wb, nil, o, out[b*M*N:(b+1)*M*N]); err != nil {
			return info, err
		}
	}
	if batch == 0 {
		info.Kernel = kernelName("gemm", k)
	}
	return info, nil
}
