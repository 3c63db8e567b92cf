package gemm

import (
	"sync"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// GemvKernels is one family's int8 GEMV over I2_S rows: the op
// "linear_gemv" (GemvOp), which the GEMV-like pointwise convolutions and
// so linear layers run for int8 activations. It is an op of its own, apart
// from "conv_gemm", so that each dispatches by its own measurement: the
// AVX-512 VNNI kernel wins GEMV on CPUs where the VNNI micro-kernels do not
// win the convolutions.
type GemvKernels struct {
	Family cpu.Family
	// I8 sets, exactly, out[r*ncol+j] = sum_{i<k} w_r(i)*x[j*ldx+i] for
	// rows r < len(out)/ncol and columns j < ncol = len(xsum), straight
	// from I2_S codes: row r's k/128 whole I2_S groups start at w[r*ldw]
	// (k a positive multiple of GroupValues, at most 2^24; ldw >= k/4),
	// ldx >= k, len(x) >= (ncol-1)*ldx+k, and xsum[j] = the sum of column
	// j's k activations (SumI8): the kernels sum the codes w+1 times x and
	// subtract xsum once. It returns false where a row holds a code 3 (out
	// is then undefined).
	I8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool
	// I8Valid is I8 for codes known valid (every code 0, 1 or 2: see
	// CodesValid), which it does not check; a family without a faster
	// way runs I8.
	I8Valid func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32)
	// I8ValidBlocks, where a family has it (else Blocks runs I8Valid a
	// block at a time), is Blocks' arithmetic for codes known valid in one
	// call.
	I8ValidBlocks BlocksFunc
}

// gemvParts keeps partial sums from call to call (gemvChunked's, and
// blocksByCalls' blocks; conv2d's calls: 64 rows x 16 columns; a fresh 4 KB
// a call cost a 2560 x 6912 layer on 64 samples 5% of its time in
// allocation).
var gemvParts = &buf.List[int32]{MaxCap: 1 << 20, MaxCount: 16}

// BlocksFunc is I8 over nb >= 1 blocks of gpb >= 1 groups each (row r's k
// = nb*gpb*GroupValues values from w[r*ldw]), each block's sums apart and column by column: out[(b*ncol+j)*rows+r] =
// the sum over block b's values of w_r(i)*x[j*ldx+i], minus xsum[b*xsb+j]
// (column j's sum over the block), for rows = len(out)/(nb*ncol) (len(out)
// a multiple of nb*ncol). It
// returns false where a row holds a code 3. The block sums of weights with
// a scale per block, in the order their folds read them.
type BlocksFunc func(w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32) bool

// Blocks returns the family's BlocksFunc: I8ValidBlocks for codes known
// valid where the family has it, else I8 (or I8Valid) called a block at a
// time.
func (g *GemvKernels) Blocks(valid bool) BlocksFunc {
	if valid && g.I8ValidBlocks != nil {
		return g.I8ValidBlocks
	}
	i8 := g.I8
	if valid {
		i8 = validAsChecked(g.I8Valid)
	}
	return func(w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32) bool {
		return blocksByCalls(i8, w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out, 0)
	}
}

// blocksRows checks a BlocksFunc's arguments (a panic: the callers' bug)
// and returns its rows.
func blocksRows(w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32) int {
	if gpb < 1 || nb < 1 || ncol < 1 || len(xsum) < (nb-1)*xsb+ncol || len(out)%(nb*ncol) != 0 {
		panic("gemm: bad blocks for a GEMV")
	}
	rows := len(out) / (nb * ncol)
	checkGemv(len(w), ldw, len(x), nb*gpb*GroupValues, ldx, ncol, rows*ncol)
	return rows
}

// blocksByCalls computes rows r0.. of a BlocksFunc's result with i8, a
// block at a time: each block's rows x ncol sums into a buffer, then into
// out column by column.
func blocksByCalls(i8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool,
	w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32, r0 int) bool {
	rows := blocksRows(w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out)
	m, bk := rows-r0, gpb*GroupValues
	part, h := gemvParts.Sized(m * ncol)
	defer gemvParts.Put(h)
	ok := true
	for b := range nb {
		ok = i8(w[r0*ldw+b*bk/4:], ldw, x[b*bk:], bk, ldx, xsum[b*xsb:][:ncol], part) && ok
		Transpose(out[b*ncol*rows+r0:], rows, part, ncol, m, ncol)
	}
	return ok
}

// Transpose writes the rows x nc matrix m (row i at m[i*ldm:][:nc]: the
// GEMV kernels' order, ldm = nc, or a slab of a wider matrix) into t column
// by column, column j at t[j*ldt:][:rows] (ldt >= rows), four columns at a
// time, each row's four values read at once. Not inlined: inside conv2d's
// gemv loop the index arithmetic spilled to the stack. Gathering each
// column with a stride of nc took 5% of a 4096 x 4096 layer on 64 samples;
// writing with a stride of rows, inlined, 17% of one with 16 scale blocks
// a row on 8 samples (this way: 4%).
//
//go:noinline
func Transpose[A any](t []A, ldt int, m []A, ldm, rows, nc int) {
	if rows < 1 || nc < 1 {
		return
	}
	t, m = t[:(nc-1)*ldt+rows], m[:(rows-1)*ldm+nc]
	j := 0
	for ; j+4 <= nc; j += 4 {
		c0 := t[j*ldt:][:rows]
		c1, c2, c3 := t[(j+1)*ldt:][:len(c0)], t[(j+2)*ldt:][:len(c0)], t[(j+3)*ldt:][:len(c0)]
		for i := range c0 {
			r := m[i*ldm+j:][:4]
			c0[i], c1[i], c2[i], c3[i] = r[0], r[1], r[2], r[3]
		}
	}
	for ; j < nc; j++ {
		c := t[j*ldt:][:rows]
		for i := range c {
			c[i] = m[i*ldm+j]
		}
	}
}

// GemvOp is the registry's op "linear_gemv"; gemvI8Generic is its oracle.
var GemvOp = cpu.NewOp("linear_gemv", &GemvKernels{Family: cpu.Generic, I8: gemvI8Generic, I8Valid: checkedOnly(gemvI8Generic)})

// validAsChecked is I8Valid in I8's shape (returning true).
func validAsChecked(i8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32)) func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
	return func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		i8(w, ldw, x, k, ldx, xsum, out)
		return true
	}
}

// checkedOnly is an I8Valid that runs the checking I8.
func checkedOnly(i8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool) func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) {
	return func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) { i8(w, ldw, x, k, ldx, xsum, out) }
}

// The weights whose I2_S codes a GEMV has read whole and found valid, by
// the caller's number for them (qlinear.Weight.ID, conv2d.Weights.ID: a
// number that names one array's codes, never changed, for the life of the
// process). Later calls with the number run I8Valid. At most maxValidIDs
// are remembered (then the set starts over: a weight forgotten is checked
// again once).
var validIDs struct {
	sync.Mutex
	m map[uint64]struct{}
}

const maxValidIDs = 1 << 16

// CodesValid reports whether the codes numbered id (not 0) were found
// valid (MarkCodesValid).
func CodesValid(id uint64) bool {
	if id == 0 {
		return false
	}
	validIDs.Lock()
	defer validIDs.Unlock()
	_, ok := validIDs.m[id]
	return ok
}

// MarkCodesValid records that the codes numbered id were all read by a
// checking kernel and held no code 3 (id 0: nothing recorded).
func MarkCodesValid(id uint64) {
	if id == 0 {
		return
	}
	validIDs.Lock()
	defer validIDs.Unlock()
	if validIDs.m == nil || len(validIDs.m) >= maxValidIDs {
		validIDs.m = make(map[uint64]struct{})
	}
	validIDs.m[id] = struct{}{}
}

// GemvFamilies lists the GEMV kernels compiled in and usable here, generic
// first, for tests that run every family against the oracle.
func GemvFamilies() []*GemvKernels { return GemvOp.Impls() }
