package qlinear

import (
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/buf"
	mk "github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// The packed layouts of the tile kernels (Kernels.Tile).
//
// Weights: per group of channels, panels of NR channels (the last one
// padded with zero channels), each panel kq = ceil(K/4) k quads of NR x 4
// codes: the code of channel c and k at [(k/4)*NR*4 + c*4 + k%4] of its
// panel (int8; zeros past K). Packed once per weight and kept in
// panelCache, with the column sums.
//
// Activations: tiles of MR rows (rows past M zero), each kq quads of MR x 4
// codes: row r, k at [(k/4)*MR*4 + r*4 + k%4] (uint8; int16 when the
// family's WideA is set, the index counting int16s), zeros past K.

// MR and NR are the rows and channels of a tile kernel's product.
const (
	MR = 8
	NR = 32
)

// kcQuads is the k quads of one K block: a panel's block (NR x 4 x kcQuads
// bytes, 32 KiB) is reused from L1/L2 across the row tiles of a task.
const kcQuads = 256

// panels is a weight packed for the tile kernels.
type panels struct {
	w   []int8  // groups x npg panels x kq quads x NR x 4
	cs  []int32 // per channel: the sum of its K codes (as int8)
	npg int     // panels per group
	kq  int     // k quads
}

// panelKey identifies a kept weight layout: the codes' address and length
// and the geometry (buf.Cache compares the codes themselves too), or with
// id not 0, the weight's ID (Weight.ID: buf.Cache.GetKept, no comparison).
type panelKey struct {
	addr                 uintptr
	n                    int
	N, K, G              int
	unsigned, transposed bool
	kh, kw               int // a conv's channel-quad layout (im2col.go), 0: k in order
	id                   uint64
}

// panelCache keeps the weight panels (and the copies of the codes they were
// packed from) up to buf.WeightCacheBytes (BITNET_GO_WEIGHT_CACHE_MB), as
// conv2d's layout cache does.
var panelCache = &buf.Cache[panelKey, *panels]{MaxBytes: buf.WeightCacheBytes}

// weightPanels returns w's N channels (G groups of N/G) packed, from the
// cache when keep is set and the same codes (or the same w.ID) were packed
// before. kh, kw > 0: a conv's channel-quad layout of K = (K/(kh*kw))
// channels x kh x kw.
func weightPanels(w Weight, N, K, G int, keep bool, kh, kw int) *panels {
	src := w.Data[:N*K]
	var perm []int32
	if kh > 0 {
		perm = quadPerm(K/(kh*kw), kh, kw)
	}
	if !keep || len(src) == 0 {
		return packPanels(w, src, N, K, G, perm)
	}
	key := panelKey{uintptr(unsafe.Pointer(unsafe.SliceData(src))), len(src), N, K, G, w.Unsigned, w.Transposed, kh, kw, w.ID}
	build := func(codes []byte) (*panels, int, error) {
		p := packPanels(w, codes, N, K, G, perm)
		return p, len(p.w) + 4*len(p.cs), nil
	}
	get := panelCache.Get
	if w.ID != 0 {
		get = panelCache.GetKept
	}
	p, _ := get(key, src, build)
	return p
}

// packPanels packs codes (w's layout: N x K, or K x N when Transposed;
// uint8 codes shifted to int8 when Unsigned), packed k i holding code
// perm[i] (nil: i; -1: zero).
func packPanels(w Weight, codes []byte, N, K, G int, perm []int32) *panels {
	og := N / G
	npg := (og + NR - 1) / NR
	kq := (K + 3) / 4
	if perm != nil {
		kq = len(perm) / 4
	}
	plen := kq * NR * 4
	p := &panels{w: make([]int8, G*npg*plen), cs: make([]int32, N), npg: npg, kq: kq}
	var flip byte
	if w.Unsigned {
		flip = 0x80
	}
	par.Run(par.ChunksWork(G*npg, NR*K), func(_, lo, hi int) {
		for pi := lo; pi < hi; pi++ {
			g, j0 := pi/npg, (pi%npg)*NR
			dst := p.w[pi*plen : (pi+1)*plen]
			for c := 0; c < NR && j0+c < og; c++ {
				n := g*og + j0 + c
				var s int32
				if perm != nil {
					for i, k := range perm {
						if k >= 0 {
							v := int8(codes[n*K+int(k)] ^ flip)
							dst[(i>>2)*NR*4+c*4+i&3] = v
							s += int32(v)
						}
					}
				} else {
					for k := 0; k < K; k++ {
						var b byte
						if w.Transposed {
							b = codes[k*N+n]
						} else {
							b = codes[n*K+k]
						}
						v := int8(b ^ flip)
						dst[(k>>2)*NR*4+c*4+k&3] = v
						s += int32(v)
					}
				}
				p.cs[n] = s
			}
		}
	})
	return p
}

// actSrc is where activation tiles are packed from.
type actSrc interface {
	// rows returns the number of rows.
	rows() int
	// tile writes tile t (rows t*MR..) to dst (every byte of its kq
	// quads, int16 codes when k.WideA: zeros past K and past the last row)
	// and the rows' sums to rs (MR values).
	tile(k *Kernels, t int, dst []byte, rs []int32)
}

// rowSrc is row-major activations: M rows of K codes, xored with flip.
type rowSrc struct {
	data []byte
	M, K int
	flip byte
}

func (s *rowSrc) rows() int { return s.M }

func (s *rowSrc) tile(k *Kernels, t int, dst []byte, rs []int32) {
	clear(dst)
	wide := k.WideA
	var row []byte
	if s.flip != 0 {
		row = make([]byte, s.K)
	}
	for r := 0; r < MR; r++ {
		m := t*MR + r
		if m >= s.M {
			rs[r] = 0
			continue
		}
		src := s.data[m*s.K : (m+1)*s.K]
		if s.flip != 0 {
			for k, b := range src {
				row[k] = b ^ s.flip
			}
			src = row
		}
		rs[r] = putRow(dst, src, r, wide)
	}
}

// putRow writes row (the codes of row r of a tile) to the tile dst (zeros)
// and returns its sum.
func putRow(dst, row []byte, r int, wide bool) int32 {
	s := mk.SumU8(row)
	K := len(row)
	if wide {
		for k, v := range row {
			dst[2*((k>>2)*MR*4+r*4+k&3)] = v
		}
		return s
	}
	q := 0
	for ; q+4 <= K; q += 4 {
		copy(dst[q*MR+r*4:q*MR+r*4+4], row[q:q+4])
	}
	if q < K {
		copy(dst[q*MR+r*4:], row[q:])
	}
	return s
}

// scratch keeps the packed activations and the product tiles between calls.
var scratch = &buf.List[byte]{MaxCap: 1 << 26, MaxCount: 4}

// packActs packs every tile of kq k quads of src (in parallel) into a
// buffer from scratch: the tiles, their row sums and the handle to give
// back.
func packActs(k *Kernels, src actSrc, kq int) ([]byte, []int32, *[]byte) {
	mt := (src.rows() + MR - 1) / MR
	tb := tileBytes(k, kq)
	a, h := scratch.Sized(mt * tb)
	rs := make([]int32, mt*MR)
	par.Run(par.ChunksWork(mt, MR*4*kq), func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			src.tile(k, t, a[t*tb:(t+1)*tb], rs[t*MR:(t+1)*MR])
		}
	})
	return a, rs, h
}

// tileBytes is the size of one packed activation tile of kq k quads.
func tileBytes(k *Kernels, kq int) int {
	n := kq * MR * 4
	if k.WideA {
		n *= 2
	}
	return n
}
