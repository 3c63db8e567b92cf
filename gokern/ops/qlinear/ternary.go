package qlinear

import (
	"encoding/binary"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	mk "github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Ternary is a ternary weight in I2_S codes: N rows of K values (K a
// positive multiple of mk.GroupValues), row r's K/128 groups at
// Packed[r*K/4:], each value a weight of -1, 0 or 1 (zero point 0).
type Ternary struct {
	Packed []byte
	Scales []float32 // one (per tensor) or N (per row)
	// ColSums, where not nil, are the sums of each row's K values (N
	// values): callers that keep a weight pass them.
	ColSums []int32
	// ID, where not 0, names Packed for the life of the process (Weight.ID):
	// once a call has read the codes whole and found no code 3, later calls
	// run the GEMV without the check (gemm.CodesValid).
	ID uint64
}

// Columns per linear_gemv call and rows per call (par.Stopped is checked
// between calls), as the pointwise convolutions' GEMV (conv2d/gemv.go).
const (
	ternBlockCols = 16
	ternRows      = 64
)

// TernaryColSums returns the sums of the N rows of K values of I2_S codes
// packed (code c is the value c-1), or an error for a code 3.
func TernaryColSums(packed []byte, N, K int) ([]int32, error) {
	cs := make([]int32, N)
	for r := range cs {
		row := packed[r*K/4 : (r+1)*K/4]
		if p := mk.Code3(row); p >= 0 {
			return nil, errs.Value("weight: invalid I2_S code 3 at element %d", r*K+p)
		}
		var s int32
		for _, b := range row {
			s += int32(b>>6) + int32(b>>4&3) + int32(b>>2&3) + int32(b&3)
		}
		cs[r] = s - int32(K)
	}
	return cs, nil
}

// LinearTernary is Linear for a ternary weight read straight from its
// I2_S codes by the op "linear_gemv" (mk.GemvOp): the int8 activations
// x = qa-128 (uint8, exact) or qa (int8) give S = sum x*w exactly, then
// acc - za*colsum(w) = S + (128-za)*colsum(w) (uint8) or S - za*colsum(w)
// (int8), requantized by Linear's epilogue: outputs identical to Linear's
// on the weight's values. Columns (rows of x) go ternBlockCols at a time,
// output channels are split over par's threads.
func LinearTernary(k *Kernels, M, N, K int, x Act, w Ternary, bias []float32, o Output, out []byte) (Info, error) {
	return linearTernary(k, mk.GemvOp.Get(), M, N, K, x, w, bias, o, out)
}

// linearTernary is LinearTernary with the GEMV kernels gk.
func linearTernary(k *Kernels, gk *mk.GemvKernels, M, N, K int, x Act, w Ternary, bias []float32, o Output, out []byte) (Info, error) {
	call, ch := getCall()
	defer calls.Put(ch)
	zeros := call.zeros // only ever read (the Requant's ZW): zero from make on
	if n := max(N, len(w.Scales)); len(zeros) < n {
		zeros = make([]int32, n)
		call.zeros = zeros
	}
	wq := Weight{Scales: w.Scales, Zeros: zeros[:len(w.Scales)]}
	if err := checkParams(x, wq, &o, N); err != nil {
		return Info{}, err
	}
	if K <= 0 || K%mk.GroupValues != 0 {
		return Info{}, errs.Value("ternary weight: in_features must be a positive multiple of %d, got %d", mk.GroupValues, K)
	}
	if len(w.Packed) < N*K/4 {
		return Info{}, errs.Value("ternary weight: want %d bytes of I2_S codes, got %d", N*K/4, len(w.Packed))
	}
	cs := w.ColSums
	if cs == nil {
		var err error
		if cs, err = TernaryColSums(w.Packed, N, K); err != nil {
			return Info{}, err
		}
	} else if len(cs) != N {
		return Info{}, errs.Value("colsums: want %d values, got %d", N, len(cs))
	}
	info := Info{Kernel: "linear_gemv/" + string(gk.Family)}
	if M == 0 || N == 0 {
		return info, nil
	}
	za := x.Zero // S - za*cs: the Requant's ColTerm with zw = 0
	var flip byte
	if !x.Signed {
		za -= 128
		flip = 0x80
	}
	r := requantInto(&call.r, N, K, za, zeros[:N], cs, x.Scale, w.Scales, bias, &o)
	// Columns ldx = K plus one cache line apart: at a multiple of 4 KB they
	// would all fall into one L1 set.
	ldx := K + 64
	xb, xh := scratchBytes.Sized((M-1)*ldx + K)
	defer scratchBytes.Put(xh)
	xs := asInt8(xb)
	xsum, sh := scratchInts.Sized(M)
	defer scratchInts.Put(sh)
	for m := range M {
		xsum[m] = flipSum(xb[m*ldx:m*ldx+K], x.Data[m*K:m*K+K], flip)
	}
	valid := mk.CodesValid(w.ID)
	chunks := par.ChunksWork(N, K*M)
	bad := make([]bool, len(chunks)-1)
	par.Run(chunks, func(ci, lo, hi int) {
		nb := min(M, ternBlockCols)
		res, rh := scratchInts.Sized(ternRows * (nb + 1))
		defer scratchInts.Put(rh)
		res, col := res[:ternRows*nb], res[ternRows*nb:]
		var zero [1]int32 // the row sum: za*colsum is in the Requant's ColTerm
		for r0 := lo; r0 < hi; r0 += ternRows {
			r1 := min(hi, r0+ternRows)
			for j0 := 0; j0 < M; j0 += ternBlockCols {
				if par.Stopped() {
					return
				}
				nc := min(ternBlockCols, M-j0)
				res := res[:(r1-r0)*nc]
				wr, xr, xsr := w.Packed[r0*K/4:], xs[j0*ldx:], xsum[j0:j0+nc]
				if valid {
					gk.I8Valid(wr, K/4, xr, K, ldx, xsr, res)
				} else if !gk.I8(wr, K/4, xr, K, ldx, xsr, res) {
					bad[ci] = true
					return
				}
				for jj := range nc {
					c := res // one column: its channels are adjacent
					if nc > 1 {
						c = col[:r1-r0]
						for i := range c {
							c[i] = res[i*nc+jj]
						}
					}
					k.Quant(c, len(c), zero[:], r0, len(c), r)
					dst := out[(j0+jj)*N+r0 : (j0+jj)*N+r1]
					for i, v := range c {
						dst[i] = byte(v)
					}
				}
			}
		}
	})
	for _, b := range bad {
		if b {
			_, err := TernaryColSums(w.Packed, N, K) // names the first code 3
			if err == nil {
				err = errs.Value("weight: invalid I2_S code 3")
			}
			return info, err
		}
	}
	if !valid {
		mk.MarkCodesValid(w.ID) // every code read (an interrupted call panics in par.Run)
	}
	return info, nil
}

// flipSum sets dst[i] = src[i] ^ flip (len(dst) == len(src)), eight bytes
// a step, and returns the sum of dst's bytes read as int8 (gemm.SumI8).
func flipSum(dst, src []byte, flip byte) int32 {
	f := uint64(flip) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^f)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ flip
	}
	return mk.SumI8(unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)))
}
