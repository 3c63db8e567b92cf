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
	// the packed activation tiles Tiles (row sums in RowSum)
	P      *panels
	Panel0 int
	Tiles  []byte
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
	mt := (g.M + MR - 1) / MR
	np := (g.N + NR - 1) / NR
	mb := (mt*MR + taskRows - 1) / taskRows
	nb := (np*NR + taskChans - 1) / taskChans
	kq := g.P.kq
	tb := tileBytes(k, kq)
	es := tb / (kq * MR * 4)
	work := min(mt*MR, taskRows) * min(np*NR, taskChans) * max(g.K, 1)
	par.Run(par.ChunksWork(mb*nb, work), func(_, lo, hi int) {
		c := make([]int32, taskRows*taskChans)
		for t := lo; t < hi; t++ {
			t0, p0 := (t/nb)*(taskRows/MR), (t%nb)*(taskChans/NR)
			t1, p1 := min(mt, t0+taskRows/MR), min(np, p0+taskChans/NR)
			if kq == 0 {
				clear(c)
			}
			for q0 := 0; q0 < kq; q0 += kcQuads {
				q := min(kq-q0, kcQuads)
				for p := p0; p < p1; p++ {
					w := g.P.w[((g.Panel0+p)*kq+q0)*NR*4:]
					for ti := t0; ti < t1; ti++ {
						a := g.Tiles[ti*tb+q0*MR*4*es:]
						k.Tile(q, a, w, c[(ti-t0)*MR*taskChans+(p-p0)*NR:], taskChans, q0 > 0)
					}
				}
			}
			n0, n1 := p0*NR, min(g.N, p1*NR)
			for m := t0 * MR; m < min(g.M, t1*MR); m++ {
				g.epilogue(k, c[(m-t0*MR)*taskChans:(m-t0*MR)*taskChans+n1-n0], m, n0)
			}
		}
	})
}

const (
	rowBlock  = 64 // rows of a task (a multiple of 4)
	chanBlock = 64 // channels of a task (a multiple of 8)
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
		var c [rowBlock * chanBlock]int32
		for t := lo; t < hi; t++ {
			m0, n0 := (t/nb)*rowBlock, (t%nb)*chanBlock
			g.tile(k, m0, min(g.M, m0+rowBlock), n0, min(g.N, n0+chanBlock), c[:])
		}
	})
}

// tile computes rows [m0, m1) x channels [n0, n1) into c (rowBlock x
// chanBlock, row-major, ld chanBlock) and writes their outputs.
func (g *gemm) tile(k *Kernels, m0, m1, n0, n1 int, c []int32) {
	kb := g.kp / KB
	nc := n1 - n0
	if g.M < 4 {
		var t [8]int32
		n := n0
		for ; n+8 <= n1; n += 8 {
			for m := m0; m < m1; m++ {
				if kb > 0 {
					k.Dot1x8(kb, g.A[m*g.lda:], g.W[n*g.ldw:], g.ldw, &t)
				}
				copy(c[(m-m0)*chanBlock+n-n0:], t[:])
			}
		}
		g.scalar(m0, m1, n, n1, n0, c)
	} else {
		var t [16]int32
		n := n0
		for ; n+4 <= n1; n += 4 {
			for m := m0; m < m1; m += 4 { // rows past M are zero padding of A
				if kb > 0 {
					k.Dot4x4(kb, g.A[m*g.lda:], g.lda, g.W[n*g.ldw:], g.ldw, &t)
				}
				for i := 0; i < 4 && m+i < m1; i++ {
					copy(c[(m+i-m0)*chanBlock+n-n0:], t[i*4:i*4+4])
				}
			}
		}
		g.scalar(m0, m1, n, n1, n0, c)
	}
	for m := m0; m < m1; m++ {
		g.epilogue(k, c[(m-m0)*chanBlock:(m-m0)*chanBlock+nc], m, n0)
	}
}

// epilogue writes the outputs of row m, channels n0.. from their products
// row (overwritten).
func (g *gemm) epilogue(k *Kernels, row []int32, m, n0 int) {
	o := g.off + m*g.rs + n0*g.cs
	if g.OutF != nil {
		g.R.RowFloat(row, g.RowSum[m], n0, g.OutF[o:], g.cs, g.accumulate)
		return
	}
	k.Quant(row, g.RowSum[m], n0, g.R)
	out := g.Out[o:]
	if g.cs == 1 {
		out = out[:len(row)]
		for j, v := range row {
			out[j] = byte(v)
		}
		return
	}
	for j, v := range row {
		out[j*g.cs] = byte(v)
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
