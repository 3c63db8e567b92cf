//go:build !noasm && amd64

package gemm

import (
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// The avx512vnni family's int8 GEMV (op "linear_gemv"): the kernels of
// _gen/gemv_avx512.go (gemv_avx512_amd64.s), VPDPBUSD on ZMM over I2_S
// rows as they are, tiles of up to 4 rows x 1 column or 2 rows x 4
// columns, and 4 rows x 4 columns with one accumulator per output
// (gemvI8VNNIs4c4: the codes shifted down in the loop).
var _ = GemvOp.Register(cpu.AVX512VNNI, &GemvKernels{Family: cpu.AVX512VNNI,
	I8: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
		return gemvI8VNNIKernel(w, ldw, x, k, ldx, xsum, out, &gemvVNNIChecked)
	},
	I8Valid: func(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) {
		gemvI8VNNIValid(w, ldw, x, k, ldx, xsum, out)
	},
	I8ValidBlocks: gemvI8VNNIBlocks,
})

// gemvI8VNNIValid is the family's I8Valid, returning true (the shape of I8).
func gemvI8VNNIValid(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32) bool {
	return gemvI8VNNIKernel(w, ldw, x, k, ldx, xsum, out, &gemvVNNIValid)
}

// gemvI8VNNIBlocks is the family's I8ValidBlocks: rows in tiles of 4 with
// gemvI8VNNIb4c4v over columns in fours and gemvI8VNNIb4c1v over the rest,
// every block in one call a tile; the last rows % 4 rows, and blocks of
// more than gemvVNNIMaxGroups groups, a block at a time with I8Valid. Not
// split into runs of blocks whose activations fit L1 as gemvChunked splits
// rows: 4096 x 11008 in blocks of 256 or 128, 1 to 64 samples, ran the
// same either way (BenchmarkGEMVBlocks, Zen 4, 2 rounds).
func gemvI8VNNIBlocks(w []byte, ldw int, x []int8, ldx, gpb, nb int, xsum []int32, xsb, ncol int, out []int32) bool {
	rows := blocksRows(w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out)
	r4 := rows &^ 3
	if gpb > gemvVNNIMaxGroups {
		r4 = 0
	}
	for r := 0; r < r4; r += 4 {
		j := 0
		for ; j+4 <= ncol; j += 4 {
			gemvI8VNNIb4c4v(&w[r*ldw], ldw, &x[j*ldx], ldx, gpb, nb, &xsum[j], xsb, &out[j*rows+r], rows, ncol*rows)
		}
		for ; j < ncol; j++ {
			gemvI8VNNIb4c1v(&w[r*ldw], ldw, &x[j*ldx], ldx, gpb, nb, &xsum[j], xsb, &out[j*rows+r], rows, ncol*rows)
		}
	}
	if r4 < rows {
		blocksByCalls(gemvI8VNNIValid, w, ldw, x, ldx, gpb, nb, xsum, xsb, ncol, out, r4)
	}
	return true
}

// gemvVNNITiles are one variant's tile kernels, named by rows x columns;
// p4c1, p2c1 and p1c1 (one column) take two groups a step.
type gemvVNNITiles struct {
	s4c4, r4c1, r2c1, r1c1, r2c2, r1c2, r2c4, r1c4, p4c1, p2c1, p1c1 func(w *byte, ldw int, x *int8, ldx int, ng int, xsum *int32, out *int32, ldo int) uint32
}

// gemvVNNIChecked check the codes (a code 3: a non-zero return);
// gemvVNNIValid do not (codes known valid).
var (
	gemvVNNIChecked = gemvVNNITiles{gemvI8VNNIs4c4, gemvI8VNNIr4c1, gemvI8VNNIr2c1, gemvI8VNNIr1c1, gemvI8VNNIr2c2, gemvI8VNNIr1c2, gemvI8VNNIr2c4, gemvI8VNNIr1c4,
		gemvI8VNNIp4c1, gemvI8VNNIp2c1, gemvI8VNNIp1c1}
	gemvVNNIValid = gemvVNNITiles{gemvI8VNNIs4c4v, gemvI8VNNIr4c1v, gemvI8VNNIr2c1v, gemvI8VNNIr1c1v, gemvI8VNNIr2c2v, gemvI8VNNIr1c2v, gemvI8VNNIr2c4v, gemvI8VNNIr1c4v,
		gemvI8VNNIp4c1v, gemvI8VNNIp2c1v, gemvI8VNNIp1c1v}
)

// gemvVNNIMaxGroups is the most groups one kernel call sums: its scaled
// int32 lanes stay exact up to 16384.
const gemvVNNIMaxGroups = 16384

// gemvI8VNNIKernel runs tiles over k in runs of gemvChunk groups
// (gemvChunked). One column (a linear layer on one vector) runs the pair
// tiles (two groups a step), in runs of an even number of groups so that
// only the last may end on an odd group: 4096 x 4096 from L3, one thread,
// 0.115 -> 0.096 ms on Zen 4.
func gemvI8VNNIKernel(w []byte, ldw int, x []int8, k, ldx int, xsum, out []int32, tiles *gemvVNNITiles) bool {
	ng := k / GroupValues
	if len(xsum) != 1 {
		return gemvChunked(w, ldw, x, k, ldx, xsum, out, gemvChunk(ng, len(xsum), gemvVNNIMaxGroups), tiles.run)
	}
	chunk := gemvChunk(ng, 1, gemvVNNIMaxGroups)
	chunk += chunk & 1 // even (at most gemvL1Bytes/GroupValues = 128, itself even)
	return gemvChunked(w, ldw, x, k, ldx, xsum, out, chunk, tiles.runPairs)
}

// runPairs is run for one column with the pair tiles: the rows in tiles
// of 4, then 2 and 1.
func (tiles *gemvVNNITiles) runPairs(w []byte, ldw int, x []int8, ldx, ng int, xsum []int32, rows int, out []int32) uint32 {
	var bad uint32
	for r := 0; r < rows; {
		pw, po := &w[r*ldw], &out[r]
		switch {
		case rows-r >= 4:
			bad |= tiles.p4c1(pw, ldw, &x[0], ldx, ng, &xsum[0], po, 1)
			r += 4
		case rows-r >= 2:
			bad |= tiles.p2c1(pw, ldw, &x[0], ldx, ng, &xsum[0], po, 1)
			r += 2
		default:
			bad |= tiles.p1c1(pw, ldw, &x[0], ldx, ng, &xsum[0], po, 1)
			r++
		}
	}
	return bad
}

// run covers rows x ncol outputs (out[r*ncol+j], ncol = len(xsum))
// with the widest tiles that fit over ng <= gemvVNNIMaxGroups groups, a
// block of columns (4, 2 or 1) at a time, its rows in tiles of 4 (one or
// four columns) or 2 (the block's activations stay in L1 while the rows
// stream by); it ORs the code-3 flags of tiles.
func (tiles *gemvVNNITiles) run(w []byte, ldw int, x []int8, ldx, ng int, xsum []int32, rows int, out []int32) uint32 {
	ncol := len(xsum)
	return gemvCols(ncol, []int{4, 2, 1}, func(j, c int) uint32 {
		var bad uint32
		tallest := 4
		if c == 2 {
			tallest = 2
		}
		px, ps := &x[j*ldx], &xsum[j]
		for r := 0; r < rows; {
			h := tallest
			for h > rows-r {
				h /= 2
			}
			pw, po := &w[r*ldw], &out[r*ncol+j]
			switch {
			case h == 4 && c == 4:
				bad |= tiles.s4c4(pw, ldw, px, ldx, ng, ps, po, ncol)
			case h == 4:
				bad |= tiles.r4c1(pw, ldw, px, ldx, ng, ps, po, ncol)
			case h == 2 && c == 4:
				bad |= tiles.r2c4(pw, ldw, px, ldx, ng, ps, po, ncol)
			case h == 2 && c == 2:
				bad |= tiles.r2c2(pw, ldw, px, ldx, ng, ps, po, ncol)
			case h == 2:
				bad |= tiles.r2c1(pw, ldw, px, ldx, ng, ps, po, ncol)
			case c == 4:
				bad |= tiles.r1c4(pw, ldw, px, ldx, ng, ps, po, ncol)
			case c == 2:
				bad |= tiles.r1c2(pw, ldw, px, ldx, ng, ps, po, ncol)
			default:
				bad |= tiles.r1c1(pw, ldw, px, ldx, ng, ps, po, ncol)
			}
			r += h
		}
		return bad
	})
}
