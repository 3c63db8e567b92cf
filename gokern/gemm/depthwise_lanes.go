package gemm

import "fmt"

// The channels-in-lanes kernels of conv_dw (DepthwiseKernels.Lanes > 0):
// conv2d's depthwiseLanes copies the input of Lanes consecutive channels
// into a position-major tile (x[p*Lanes+l], channel l at position p), runs
// every tap on a vector of Lanes channels of one output position, and
// copies the sums back channel-major. The plain Go loops below are the
// oracle of the assembly (depthwise_amd64.go); the generic family has no
// lanes kernels (Lanes 0: conv2d runs its per-channel oracle).

// checkLanes panics unless a LanesF32 call's slices hold what the kernels
// read and write (the assembly reads them unchecked).
func checkLanes(lanes int, dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int) {
	if len(offs) < 1 || len(w) < len(offs)*lanes || stride < 1 || n < 1 || rows < 1 || xrow < 0 ||
		mode < 0 || mode > 7 || mode != 0 && mode&1 == 0 || mode != 0 && len(sc) < lanes ||
		mode&2 != 0 && len(bias) < lanes || mode&4 != 0 && len(div) < lanes {
		panic(fmt.Sprintf("gemm: depthwise lanes: %d offsets, %d weights, stride %d, n %d, rows %d, xrow %d, mode %d, %d divisors, %d scales, %d biases",
			len(offs), len(w), stride, n, rows, xrow, mode, len(div), len(sc), len(bias)))
	}
	if len(dst) < rows*n*lanes {
		panic(fmt.Sprintf("gemm: depthwise lanes: dst has %d floats, want %d", len(dst), rows*n*lanes))
	}
	last := (rows-1)*xrow + (n-1)*stride*lanes + lanes
	for _, o := range offs {
		if o < 0 || o+last > len(x) {
			panic(fmt.Sprintf("gemm: depthwise lanes: offset %d reads to %d, x has %d", o, o+last, len(x)))
		}
	}
}

// lanesF32Generic is LanesF32 for vectors of lanes channels.
func lanesF32Generic(lanes int, dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int) {
	checkLanes(lanes, dst, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
	for r := range rows {
		for i := range n {
			base := r*xrow + i*stride*lanes
			out := dst[(r*n+i)*lanes:][:lanes]
			for l := range out {
				var s float32
				for t, o := range offs {
					s += w[t*lanes+l] * x[base+o+l]
				}
				if mode&4 != 0 {
					s = float32(s / div[l])
				}
				if mode&1 != 0 {
					s = float32(s * sc[l])
				}
				if mode&2 != 0 {
					s = s + bias[l]
				}
				out[l] = s
			}
		}
	}
}

// rowsOffsets returns the tap offsets of LanesRowsF32: r*khStep + c*lanes
// for r < kh, c < kw, in order.
func rowsOffsets(lanes, kh, kw, khStep int) []int {
	offs := make([]int, 0, kh*kw)
	for r := range kh {
		for c := range kw {
			offs = append(offs, r*khStep+c*lanes)
		}
	}
	return offs
}

// checkRows panics unless a LanesRowsF32 call's slices hold what the
// kernels read and write.
func checkRows(lanes int, dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) {
	if kh < 1 || kw < 1 || khStep < 0 || n < 1 || rows < 1 || xrow < 0 || len(w) < kh*kw*lanes ||
		mode < 0 || mode > 7 || mode != 0 && mode&1 == 0 || mode != 0 && len(sc) < lanes ||
		mode&2 != 0 && len(bias) < lanes || mode&4 != 0 && len(div) < lanes || len(dst) < rows*n*lanes ||
		(kh-1)*khStep+(kw-1)*lanes+(rows-1)*xrow+n*lanes > len(x) {
		panic(fmt.Sprintf("gemm: depthwise lanes rows: %dx%d taps, khStep %d, n %d, rows %d, xrow %d, mode %d, %d weights, dst %d, x %d",
			kh, kw, khStep, n, rows, xrow, mode, len(w), len(dst), len(x)))
	}
}

// lanesRowsGeneric is LanesRowsF32 for lanes channels: LanesF32 with the
// offsets of the kh x kw taps.
func lanesRowsGeneric(lanes int, dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) {
	checkRows(lanes, dst, x, w, kh, kw, khStep, n, rows, xrow, div, sc, bias, mode)
	lanesF32Generic(lanes, dst, x, rowsOffsets(lanes, kh, kw, khStep), w, 1, n, rows, xrow, div, sc, bias, mode)
}

// checkInterleave panics unless rows of n floats, ld apart, of lanes
// channels fit in ch and n positions of lanes floats in pm.
func checkInterleave(lanes int, pm, ch []float32, ld, n int) {
	if n < 0 || ld < n || len(pm) < n*lanes || n > 0 && len(ch) < (lanes-1)*ld+n {
		panic(fmt.Sprintf("gemm: depthwise interleave: %d lanes, ld %d, n %d, %d and %d floats", lanes, ld, n, len(pm), len(ch)))
	}
}

// checkPositions panics unless the rows of Interleave's src and the
// vectors at pos fit.
func checkPositions(lanes int, dst []float32, nsrc, ld int, pos []int) {
	n := len(pos)
	if ld < n || n > 0 && nsrc < (lanes-1)*ld+n {
		panic(fmt.Sprintf("gemm: depthwise interleave: %d lanes, ld %d, n %d, src has %d values", lanes, ld, n, nsrc))
	}
	for _, p := range pos {
		if p < 0 || p+lanes > len(dst) {
			panic(fmt.Sprintf("gemm: depthwise interleave: position %d, dst has %d floats", p, len(dst)))
		}
	}
}

// interleaveGeneric is Interleave (float32) and InterleaveI8 (int8) for
// lanes channels.
func interleaveGeneric[T float32 | int8](lanes int, dst []float32, src []T, ld int, pos []int) {
	checkPositions(lanes, dst, len(src), ld, pos)
	for l := range lanes {
		row := src[l*ld:][:len(pos)]
		for i, v := range row {
			dst[pos[i]+l] = float32(v)
		}
	}
}

// deinterleaveGeneric is Deinterleave for lanes channels.
func deinterleaveGeneric(lanes int, dst []float32, ld int, src []float32, n int) {
	checkInterleave(lanes, src, dst, ld, n)
	for l := range lanes {
		row := dst[l*ld:][:n]
		for i := range row {
			row[i] = src[i*lanes+l]
		}
	}
}

// LanesGeneric returns the plain Go lanes kernels for vectors of lanes
// channels (the oracle of a family's LanesF32, Interleave and Deinterleave;
// tests use them).
func LanesGeneric(lanes int) *DepthwiseKernels {
	return &DepthwiseKernels{Family: "generic", Lanes: lanes,
		LanesF32: func(dst, x []float32, offs []int, w []float32, stride, n, rows, xrow int, div, sc, bias []float32, mode int) {
			lanesF32Generic(lanes, dst, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
		},
		LanesRowsF32: func(dst, x, w []float32, kh, kw, khStep, n, rows, xrow int, div, sc, bias []float32, mode int) bool {
			lanesRowsGeneric(lanes, dst, x, w, kh, kw, khStep, n, rows, xrow, div, sc, bias, mode)
			return true
		},
		Interleave:   func(dst, src []float32, ld int, pos []int) { interleaveGeneric(lanes, dst, src, ld, pos) },
		InterleaveI8: func(dst []float32, src []int8, ld int, pos []int) { interleaveGeneric(lanes, dst, src, ld, pos) },
		Deinterleave: func(dst []float32, ld int, src []float32, n int) { deinterleaveGeneric(lanes, dst, ld, src, n) },
	}
}
