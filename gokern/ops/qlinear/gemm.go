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
}

const (
	rowBlock  = 64 // rows of a task (a multiple of 4)
	chanBlock = 64 // channels of a task (a multiple of 8)
)

// run computes g with kernels k, tasks spread over the threads.
func (g *gemm) run(k *Kernels) {
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
		row := c[(m-m0)*chanBlock : (m-m0)*chanBlock+nc]
		o := g.off + m*g.rs + n0*g.cs
		if g.OutF != nil {
			g.R.RowFloat(row, g.RowSum[m], n0, g.OutF[o:], g.cs, g.accumulate)
		} else {
			g.R.Row(row, g.RowSum[m], n0, g.Out[o:], g.cs)
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
