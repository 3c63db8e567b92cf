package conv2d

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// gemvMaxP is the most output positions per sample for which a pointwise
// convolution runs as GEMV kernels straight on the I2_S weight rather than
// through the A panels and the micro-kernels, whose micro-panels hold one
// sample's positions (16 columns or more: at a few positions they are
// mostly padding). The GEMV kernels read each weight row from memory once
// per block of gemvBlockCols columns (samples times positions) and pack no
// panels. The limit is where the panels start to win (BenchmarkConv).
const (
	gemvMaxP      = 8
	gemvBlockCols = 16
	gemvRows      = 64 // rows per kernel call (par.Stopped is checked between calls)
	// gemvMaxBlocks is the most scale blocks of one blocks call (their sums
	// kept for the folds: 256 KB a task at 64 rows x 16 columns; a K of
	// 2^24 in blocks of 128 would have wanted 512 MB)
	gemvMaxBlocks = 64
)

// useGEMV reports whether the pointwise shape d runs as gemv: one group and
// few positions. Scale blocks of whole I2_S groups (and K a whole number of
// groups) read the weight as it is; other block sizes (96, 100, ...) read
// gemvRows' layout, each block padded to whole groups.
func useGEMV(d *Dims) bool {
	return d.Groups == 1 && d.P <= gemvMaxP
}

// gemvAligned reports whether the GEMV kernels read d's I2_S weight as it
// is: every scale block (hence every row) whole I2_S groups.
func gemvAligned(d *Dims, sc *scaler) bool {
	return d.K%gemm.GroupValues == 0 && sc.bl%gemm.GroupValues == 0
}

// gemvWeight is the weight as the GEMV kernels read it: O rows of kp
// values, ldw = kp/4 bytes apart, scale block b at values b*blp ..
// b*blp+bl of a row (zero weights after it, up to whole groups).
type gemvWeight struct {
	packed  []byte
	kp, blp int
}

// gemvLayout returns w (I2_S) for the GEMV kernels: as it is where
// gemvAligned, else each row's scale blocks padded with zero weights to
// whole I2_S groups, kept in the weight cache. ok is false where the
// weight holds the invalid code 3 (the caller then runs the panels, which
// report it).
func gemvLayout(d *Dims, w Weights, sc *scaler) (gw gemvWeight, ok bool, err error) {
	if gemvAligned(d, sc) {
		return gemvWeight{w.Packed, d.K, sc.bl}, true, nil
	}
	blp := roundUp(sc.bl, gemm.GroupValues)
	kp := sc.nb * blp
	if _, ok := mul(ternary.MaxElements, d.O, kp); !ok {
		return gw, false, nil
	}
	l, err := cachedLayout(d, w, layoutGEMV, sc.bl, func(w Weights) (*weightLayout, int, error) {
		vals := make([]int8, d.WLen)
		if ternary.Unpack(w.Packed, vals) != nil {
			return &weightLayout{}, 0, nil // code 3: no layout
		}
		pad := make([]int8, d.O*kp)
		for o := range d.O {
			for b := range sc.nb {
				copy(pad[o*kp+b*blp:][:sc.bl], vals[o*d.K+b*sc.bl:][:sc.bl])
			}
		}
		codes := make([]byte, ternary.PackedLen(len(pad)))
		if err := ternary.Pack(pad, codes); err != nil {
			return nil, 0, err
		}
		return &weightLayout{i2s: codes}, len(codes), nil
	})
	if err != nil || l.i2s == nil {
		return gw, false, err
	}
	return gemvWeight{l.i2s, kp, blp}, true, nil
}

// gemvScratch keeps gemv's buffers (the columns, their sums, the kernels'
// results) from call to call.
var gemvScratch = &buf.List[byte]{MaxCap: 1 << 26, MaxCount: 64}

// scratch returns n stale elements of type E from gemvScratch and the
// handle to put back (Go's allocator aligns the bytes for any E).
func scratch[E any](n int) ([]E, *[]byte) {
	var zero E
	b, h := gemvScratch.Sized(max(n, 1) * int(unsafe.Sizeof(zero)))
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(b))), n), h
}

// gemvKernel is the shape of gemm.GemvKernels.I8 (GemvF32 adapted: no xsum).
type gemvKernel[T elem, A accum] func(w []byte, ldw int, x []T, k, ldx int, xsum, out []A) bool

// gemvBlocks is the shape of gemm.BlocksFunc (int8 only: the float32
// path has none).
type gemvBlocks[T elem, A accum] func(w []byte, ldw int, x []T, ldx, gpb, nb int, xsum []A, xsb, ncol int, out []A) bool

// validOnly adapts a GemvKernels.I8Valid (no check: codes known valid) to
// gemvKernel.
func validOnly(i8 func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32)) gemvKernel[int8, int32] {
	return func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		i8(w, ldw, x, k, ldx, xsum, out)
		return true
	}
}

// gemvF32 adapts ks.GemvF32 to gemvKernel.
func gemvF32(ks *gemm.Kernels) gemvKernel[float32, float32] {
	return func(w []byte, ldw int, x []float32, k, ldx int, xsum, out []float32) bool {
		return ks.GemvF32(w, ldw, x, k, ldx, len(xsum), out)
	}
}

// gemv computes a pointwise convolution (useGEMV) with one Gemv call per
// (block of columns, thread's run of output channels, scale block) (with
// P 1 and blocks given (int8), for several scale blocks or for two
// columns or more: one blocks call per block of columns and run of
// channels, for all its scale blocks, the sums column by column), folded
// into out by fold1 (the scaler's one-element arithmetic, as the GEMM
// algorithms' folds), or, where P is 1 (a linear layer: a column's
// channels are adjacent in out), by foldRun over each column's run of
// channels (scaler.foldRunI32, foldRunF32): the same operations in the
// same order. Columns are the samples' positions, copied once into
// a (columns, K) matrix (a transposition where P > 1), with order (float32:
// gemm.GemvOrder; nil: none) rearranging each as the kernel reads it. Rows
// are split over par's threads. sum (int8 only, else nil) gives the
// columns' activation sums per block. A code 3 gives PackA's error, for
// the first one in the tensor.
func gemv[T elem, A accum](d *Dims, gw gemvWeight, src []T, acts *activations, sc *scaler, out []float32,
	kern gemvKernel[T, A], blocks gemvBlocks[T, A], order func(dst, x []T), sum func([]T) A,
	fold1 func(s *scaler, y float32, acc A, o, b int, a float32) float32,
	foldRun func(s *scaler, dst []float32, src []A, lo, b int, a float32, bs []float32)) error {
	k, cols := d.K, d.N*d.P
	kp, blp, packed := gw.kp, gw.blp, gw.packed
	// Columns are copied ldx = kp plus one cache line apart: at kp*size a
	// multiple of 4 KB they would all fall into one L1 set.
	var zero T
	ldx := kp + 64/int(unsafe.Sizeof(zero))
	xt, xh := scratch[T]((cols-1)*ldx + kp)
	defer gemvScratch.Put(xh)
	var col, padded []T
	if kp != k {
		padded = make([]T, kp)
	}
	if d.P > 1 {
		col = make([]T, k)
	}
	for j := range cols { // outside par.Run: par.Check per column
		par.Check()
		n, p := j/d.P, j%d.P
		x := src[n*k*d.P:][:k*d.P]
		if d.P > 1 {
			for c := range col {
				col[c] = x[c*d.P+p]
			}
			x = col
		}
		if padded != nil { // each scale block at b*blp, zeros after it
			for b := range sc.nb {
				copy(padded[b*blp:][:sc.bl], x[b*sc.bl:][:sc.bl])
			}
			x = padded
		}
		if order != nil {
			order(xt[j*ldx:][:kp], x)
		} else {
			copy(xt[j*ldx:][:kp], x)
		}
	}
	xsum, sh := scratch[A](sc.nb * cols) // written where sum is set; unread otherwise
	defer gemvScratch.Put(sh)
	if sum != nil {
		for b := range sc.nb {
			par.Check()
			for j := range cols {
				xsum[b*cols+j] = sum(xt[j*ldx+b*blp:][:blp])
			}
		}
	}
	runs := d.P == 1
	chunks := par.ChunksWork(d.O, kp*cols)
	bad := make([]int, len(chunks)-1)
	// Blocks calls (int8) for scale blocks, and for one scale a row on two
	// columns or more: their sums come column by column, as the folds read
	// them (avx512vnni's tiles store them so; 4096 x 11008 and 2560 x 6912
	// on 8 and 64 samples 4-7% faster than its I8Valid and a
	// transposition, Zen 4).
	blocked := blocks != nil && runs && (sc.nb > 1 || cols > 1)
	par.Run(chunks, func(ci, lo, hi int) {
		bad[ci] = -1
		markBad := func() { // a kernel saw a code 3: find the first row with one
			for o := lo; o < hi && bad[ci] < 0; o++ {
				if gemm.Code3(packed[o*kp/4:(o+1)*kp/4]) >= 0 {
					bad[ci] = o
				}
			}
		}
		nres := (hi - lo) * min(cols, gemvBlockCols)
		if blocked { // the blocks of one call's rows
			nres = gemvRows * min(cols, gemvBlockCols) * min(sc.nb, gemvMaxBlocks)
		}
		res, rh := scratch[A](nres)
		defer gemvScratch.Put(rh)
		var col []A
		var scb []float32 // the scales of a call's rows, block by block (foldRun; one block: the scales as they lie)
		if runs && sc.nb > 1 {
			var sh *[]byte
			scb, sh = scratch[float32](gemvRows * min(sc.nb, gemvMaxBlocks))
			defer gemvScratch.Put(sh)
		}
		if runs && cols > 1 && !blocked { // the transposition's (block sums come column by column)
			var ch *[]byte
			col, ch = scratch[A](gemvRows * gemvBlockCols)
			defer gemvScratch.Put(ch)
		}
		// foldRuns folds block b's sums src (rows r0 .. r1-1 x columns j0
		// .. j0+nc-1, column by column), just computed (in L1 or L2), with
		// the rows' scales bs of block b (nil: one scale).
		foldRuns := func(src []A, r0, r1, j0, nc, b int, bs []float32) {
			m := r1 - r0
			for jj := range nc {
				n := j0 + jj
				var a float32
				if acts != nil {
					a = acts.a[n]
				}
				foldRun(sc, out[n*d.O+r0:n*d.O+r1], src[jj*m:][:m], r0, b, a, bs)
			}
		}
		for j0 := 0; j0 < cols; j0 += gemvBlockCols {
			nc := min(gemvBlockCols, cols-j0)
			if blocked { // one call a run of rows for its blocks (up to gemvMaxBlocks), then their folds in order
				for r0 := lo; r0 < hi; r0 += gemvRows {
					if par.Stopped() {
						return
					}
					r1 := min(hi, r0+gemvRows)
					m := r1 - r0
					for b0 := 0; b0 < sc.nb; b0 += gemvMaxBlocks {
						nb := min(gemvMaxBlocks, sc.nb-b0)
						rb := res[:nb*m*nc]
						if !blocks(packed[r0*kp/4+b0*blp/4:], kp/4, xt[j0*ldx+b0*blp:], ldx, blp/gemm.GroupValues, nb,
							xsum[b0*cols+j0:], cols, nc, rb) {
							markBad()
							return
						}
						bs := sc.blockScales(scb, r0, m, b0, nb)
						for b := range nb { // column by column already
							var bsb []float32
							if bs != nil {
								bsb = bs[b*m:][:m]
							}
							foldRuns(rb[b*m*nc:][:m*nc], r0, r1, j0, nc, b0+b, bsb)
						}
					}
				}
				continue
			}
			for b := range sc.nb {
				// gemvRows rows per kernel call: a step between checks
				// of par.Stopped.
				for r0 := lo; r0 < hi; r0 += gemvRows {
					if par.Stopped() {
						return
					}
					r1 := min(hi, r0+gemvRows)
					w0 := r0*kp + b*blp
					if !kern(packed[w0/4:], kp/4, xt[j0*ldx+b*blp:], blp, ldx, xsum[b*cols+j0:][:nc], res[(r0-lo)*nc:(r1-lo)*nc]) {
						markBad()
						return
					}
					if runs {
						src := res[(r0-lo)*nc : (r1-lo)*nc]
						if nc > 1 {
							gemm.Transpose(col, r1-r0, src, nc, r1-r0, nc)
							src = col
						}
						foldRuns(src, r0, r1, j0, nc, b, sc.blockScales(scb, r0, r1-r0, b, 1))
					}
				}
				if runs {
					continue
				}
				for o := lo; o < hi; o++ {
					r := res[(o-lo)*nc:][:nc]
					for jj, v := range r {
						n, p := (j0+jj)/d.P, (j0+jj)%d.P
						var a float32
						if acts != nil {
							a = acts.a[n]
						}
						at := (n*d.O+o)*d.P + p
						out[at] = fold1(sc, out[at], v, o, b, a)
					}
				}
			}
		}
	})
	for _, o := range bad {
		if o >= 0 {
			p := gemm.Code3(packed[o*kp/4 : (o+1)*kp/4]) // kp == k: padded weights hold no code 3
			return errs.Value("weight: invalid I2_S code 3 at element %d", o*k+p)
		}
	}
	return nil
}
