package qlinear

import (
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// gemm is one integer product C[M,N] = A[M,:K]·W[N,:K]ᵀ and its epilogue.
// A holds rows of lda bytes (uint8; rows padded with zeros up to kp, a
// multiple of KB; at least roundUp(M, 4) rows when M >= 4, the rows past M
// zero); W rows of ldw int8 values, padded with zeros up to kp.
type gemm struct {
	M, N, K, kp int
	A           []byte
	lda         int
	W           []int8
	ldw         int
	RowSum      []int32 // per row of A: the sum of its K values
	R           *Requant
	// the output of (m, n) is at off + m*rs + n*cs: Out (codes) or OutF (float32)
	Out    []byte
	OutF   []float32
	off    int
	rs, cs int
	// accumulate: OutF += the float outputs (LinearGrouped's later groups)
	accumulate bool
	// the tile path (P != nil): the weight panels from panel Panel0 on,
	// the packed activation tiles Tiles (row sums in RowSum), or where
	// Tiles is nil, their source Src, packed task by task (runFused)
	P      *panels
	Panel0 int
	Tiles  []byte
	Src    actSrc
}

// Task blocks of the tile path: rows and channels of one task.
const (
	taskRows  = 8 * MR
	taskChans = 4 * NR
)

// runTiles computes g on the tile path, tasks spread over the threads.
func (g *gemm) runTiles(k *Kernels) {
	if g.M == 0 || g.N == 0 {
		return
	}
	if g.Tiles == nil {
		g.runFused(k)
		return
	}
	mt := (g.M + MR - 1) / MR
	np := (g.N + NR - 1) / NR
	mb := (mt*MR + taskRows - 1) / taskRows
	nb := (np*NR + taskChans - 1) / taskChans
	tb := tileBytes(k, g.P.kq)
	work := min(mt*MR, taskRows) * min(np*NR, taskChans) * max(g.K, 1)
	par.Run(par.ChunksWork(mb*nb, work), func(_, lo, hi int) {
		c, h := scratchInts.Sized(taskRows * taskChans)
		defer scratchInts.Put(h)
		for t := lo; t < hi; t++ {
			t0, p0 := (t/nb)*(taskRows/MR), (t%nb)*(taskChans/NR)
			g.task(k, c, g.Tiles[t0*tb:], g.RowSum[t0*MR:], t0, p0)
		}
	})
}

// runFused computes g on the tile path packing the activation tiles of
// each task from g.Src as it starts (L2-resident, never a buffer of the
// whole matrix): a task is a block of taskRows rows and every channel
// block, so that each tile is packed once.
func (g *gemm) runFused(k *Kernels) {
	mt := (g.M + MR - 1) / MR
	np := (g.N + NR - 1) / NR
	mb := (mt*MR + taskRows - 1) / taskRows
	nb := (np*NR + taskChans - 1) / taskChans
	tb := tileBytes(k, g.P.kq)
	work := min(mt*MR, taskRows) * np * NR * max(g.K, 1)
	par.Run(par.ChunksWork(mb, work), func(_, lo, hi int) {
		c, ch := scratchInts.Sized(taskRows*taskChans + taskRows)
		defer scratchInts.Put(ch)
		c, rs := c[:taskRows*taskChans], c[taskRows*taskChans:]
		tiles, h := scratch.Sized(taskRows / MR * tb)
		defer scratch.Put(h)
		for t := lo; t < hi; t++ {
			t0 := t * (taskRows / MR)
			for ti := t0; ti < min(mt, t0+taskRows/MR); ti++ {
				g.Src.tile(k, ti, tiles[(ti-t0)*tb:(ti-t0+1)*tb], rs[(ti-t0)*MR:(ti-t0+1)*MR])
			}
			for b := 0; b < nb; b++ {
				g.task(k, c, tiles, rs, t0, b*(taskChans/NR))
			}
		}
	})
}

// task computes the rows of tiles [t0, t0+taskRows/MR) x the channels of
// panels [p0, p0+taskChans/NR) (both cut at g's end) into c and writes
// their outputs; tiles and rs start at tile t0 and its row sums.
func (g *gemm) task(k *Kernels, c []int32, tiles []byte, rs []int32, t0, p0 int) {
	mt := (g.M + MR - 1) / MR
	np := (g.N + NR - 1) / NR
	kq := g.P.kq
	tb := tileBytes(k, kq)
	es := tb / max(kq*MR*4, 1)
	t1, p1 := min(mt, t0+taskRows/MR), min(np, p0+taskChans/NR)
	if kq == 0 {
		clear(c)
	}
	for q0 := 0; q0 < kq; q0 += kcQuads {
		q := min(kq-q0, kcQuads)
		for p := p0; p < p1; p++ {
			w := g.P.w[((g.Panel0+p)*kq+q0)*NR*4:]
			for ti := t0; ti < t1; ti++ {
				a := tiles[(ti-t0)*tb+q0*MR*4*es:]
				k.Tile(q, a, w, c[(ti-t0)*MR*taskChans+(p-p0)*NR:], taskChans, q0 > 0)
			}
		}
	}
	n0, n1 := p0*NR, min(g.N, p1*NR)
	m0, m1 := t0*MR, min(g.M, t1*MR)
	if g.rs == 1 && g.OutF == nil {
		g.epilogueCols(k, c, rs, m0, m1, n0, n1)
		return
	}
	g.epilogue(k, c, taskChans, rs, m0, m1, n0, n1-n0)
}

const (
	rowBlock  = 64 // rows of a task (a multiple of 4)
	chanBlock = 64 // channels of a task (a multiple of 8)
	// dotKBlocks is the most k blocks (4 KiB) of one pass of the 4-row dot
	// kernels over a task's channels (k in balanced passes): with k past it,
	// a task's activation rows no longer stay in L1 from one channel block
	// to the next. Measured (BenchmarkLinear, avx512vnni, Zen 4, 1 thread,
	// 3 rounds alternating, ms): 8 x 4096 x 11008 3.08-3.39 -> 2.50-2.54,
	// 64 x 4096 x 11008 16.0-16.4 -> 15.0-15.4; k <= 4096 is one pass, as
	// before. A 3 KiB cap, which makes k = 4096 two passes of 2 KiB, was
	// slower there: 8 x 4096 x 4096 0.78-0.82 -> 0.84-0.94.
	dotKBlocks = 64
)

// path names g's path for Info: "gemm" (the dot kernels) or "tiles".
func (g *gemm) path() string {
	if g.P != nil {
		return "tiles"
	}
	return "gemm"
}

// run computes g with kernels k, tasks spread over the threads.
func (g *gemm) run(k *Kernels) {
	if g.P != nil {
		g.runTiles(k)
		return
	}
	if g.M == 0 || g.N == 0 {
		return
	}
	mb := (g.M + rowBlock - 1) / rowBlock
	nb := (g.N + chanBlock - 1) / chanBlock
	work := min(g.M, rowBlock) * min(g.N, chanBlock) * max(g.K, 1)
	par.Run(par.ChunksWork(mb*nb, work), func(_, lo, hi int) {
		c, h := scratchInts.Sized(rowBlock*chanBlock + 16)
		defer scratchInts.Put(h)
		for t := lo; t < hi; t++ {
			m0, n0 := (t/nb)*rowBlock, (t%nb)*chanBlock
			g.tile(k, m0, min(g.M, m0+rowBlock), n0, min(g.N, n0+chanBlock), c)
		}
	})
}

// tile computes rows [m0, m1) x channels [n0, n1) into c (rowBlock x
// chanBlock, row-major, ld chanBlock, then 16 values for the kernels'
// results) and writes their outputs.
func (g *gemm) tile(k *Kernels, m0, m1, n0, n1 int, c []int32) {
	// the kernels' k blocks: every block of the padded rows, or where the
	// weight is read as given (ldw < kp), the whole blocks, the rest in Go
	kb := min(g.kp, g.ldw) / KB
	nc := n1 - n0
	var n int
	if g.M < 4 {
		t := (*[8]int32)(c[rowBlock*chanBlock:])
		clear(t[:]) // the products where kb is 0 (all in the tail below)
		n = n0
		for ; n+8 <= n1; n += 8 {
			for m := m0; m < m1; m++ {
				if kb > 0 {
					k.Dot1x8(kb, g.A[m*g.lda:], g.W[n*g.ldw:], g.ldw, t)
				}
				copy(c[(m-m0)*chanBlock+n-n0:], t[:])
			}
		}
	} else {
		// k in passes of at most dotKBlocks blocks (balanced), each over
		// every channel of the tile: the rows' activations of one pass stay
		// in L1 while the channels stream by
		t := (*[16]int32)(c[rowBlock*chanBlock:])
		nq := n0 + (n1-n0)&^3
		for m := m0; m < m1; m++ {
			clear(c[(m-m0)*chanBlock : (m-m0)*chanBlock+nq-n0])
		}
		passes := max(1, (kb+dotKBlocks-1)/dotKBlocks)
		step := (kb + passes - 1) / passes
		for k0 := 0; k0 < kb; k0 += step {
			kc := min(step, kb-k0)
			for n = n0; n < nq; n += 4 {
				for m := m0; m < m1; m += 4 { // rows past M are zero padding of A
					k.Dot4x4(kc, g.A[m*g.lda+k0*KB:], g.lda, g.W[n*g.ldw+k0*KB:], g.ldw, t)
					for i := 0; i < 4 && m+i < m1; i++ {
						cc := (*[4]int32)(c[(m+i-m0)*chanBlock+n-n0:])
						cc[0] += t[i*4]
						cc[1] += t[i*4+1]
						cc[2] += t[i*4+2]
						cc[3] += t[i*4+3]
					}
				}
			}
		}
		n = nq
	}
	if kb*KB < g.K { // the tail of the weight read as given (kb >= 1 there)
		for m := m0; m < m1; m++ {
			a := g.A[m*g.lda+kb*KB : m*g.lda+g.K]
			for j := n0; j < n; j++ {
				w := g.W[j*g.ldw+kb*KB : j*g.ldw+g.K]
				var s int32
				for i, v := range a {
					s += int32(v) * int32(w[i])
				}
				c[(m-m0)*chanBlock+j-n0] += s
			}
		}
	}
	g.scalar(m0, m1, n, n1, n0, c)
	g.epilogue(k, c, chanBlock, g.RowSum[m0:], m0, m1, n0, nc)
}

// epilogue writes the outputs of rows [m0, m1) (row sums rs[0:m1-m0]) x
// channels [n0, n0+nc) from their products c (rows ldc apart, overwritten).
func (g *gemm) epilogue(k *Kernels, c []int32, ldc int, rs []int32, m0, m1, n0, nc int) {
	if g.OutF == nil {
		k.Quant(c, ldc, rs[:m1-m0], n0, nc, g.R)
	}
	for m := m0; m < m1; m++ {
		row := c[(m-m0)*ldc : (m-m0)*ldc+nc]
		o := g.off + m*g.rs + n0*g.cs
		if g.OutF != nil {
			g.R.RowFloat(row, rs[m-m0], n0, g.OutF[o:], g.cs, g.accumulate)
			continue
		}
		out := g.Out[o:]
		if g.cs == 1 {
			out = out[:len(row)]
			for j, v := range row {
				out[j] = byte(v)
			}
			continue
		}
		for j, v := range row {
			out[j*g.cs] = byte(v)
		}
	}
}

// epilogueCols writes the code outputs of rows [m0, m1) x channels [n0,
// n1) from their products c (rows of taskChans, overwritten) where rows are
// consecutive in the output (a conv's NCHW planes): requantized row by row,
// then written channel by channel, each a run of consecutive bytes.
func (g *gemm) epilogueCols(k *Kernels, c, rs []int32, m0, m1, n0, n1 int) {
	nc := n1 - n0
	nr := m1 - m0
	k.Quant(c, taskChans, rs[:nr], n0, nc, g.R)
	// blocks of 16 rows x 16 channels: Cols16 (rows [0, mc) of the
	// channels [0, nc&^15))
	mc := 0
	if k.Cols16 != nil {
		mc = nr &^ 15
		for j := 0; j+16 <= nc; j += 16 {
			for i := 0; i < mc; i += 16 {
				k.Cols16(c[i*taskChans+j:], taskChans, g.Out[g.off+m0+i+(n0+j)*g.cs:], g.cs)
			}
		}
		if mc == nr && nc%16 == 0 {
			return
		}
	}
	// the rest, 8 channels at a time: each row's 8 products read at once,
	// 8 output runs written (reading c by columns would thrash L1: its rows
	// are 512 bytes apart)
	j := 0
	for ; j+8 <= nc; j += 8 {
		var outs [8][]byte
		for jj := range outs {
			o := g.off + m0 + (n0+j+jj)*g.cs
			outs[jj] = g.Out[o : o+nr]
		}
		i0 := 0
		if j+8 <= nc&^15 {
			i0 = mc // rows [0, mc) of these channels: Cols16's
		}
		for i := i0; i < nr; i++ {
			v := (*[8]int32)(c[i*taskChans+j : i*taskChans+j+8])
			outs[0][i], outs[1][i], outs[2][i], outs[3][i] = byte(v[0]), byte(v[1]), byte(v[2]), byte(v[3])
			outs[4][i], outs[5][i], outs[6][i], outs[7][i] = byte(v[4]), byte(v[5]), byte(v[6]), byte(v[7])
		}
	}
	for ; j < nc; j++ {
		o := g.off + m0 + (n0+j)*g.cs
		out := g.Out[o : o+nr]
		for i := range out {
			out[i] = byte(c[i*taskChans+j])
		}
	}
}

// scalar computes the channels [n, n1) that do not fill a kernel's tile.
func (g *gemm) scalar(m0, m1, n, n1, n0 int, c []int32) {
	for ; n < n1; n++ {
		w := g.W[n*g.ldw : n*g.ldw+g.K]
		for m := m0; m < m1; m++ {
			a := g.A[m*g.lda : m*g.lda+g.K]
			var s int32
			for i, v := range a {
				s += int32(v) * int32(w[i])
			}
			c[(m-m0)*chanBlock+n-n0] = s
		}
	}
}
