package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// sameBits reports whether got and want hold the same float32 bits (any
// NaN matching any NaN), else the first index that differs.
func sameBits(got, want []float32) (int, bool) {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			return i, false
		}
	}
	return 0, true
}

// fillSpecial fills x with normal values and, one in 40 each, NaN, +-Inf
// and +-0.
func fillSpecial(rng *rand.Rand, x []float32) {
	for i := range x {
		switch rng.IntN(40) {
		case 0:
			x[i] = float32(math.NaN())
		case 1:
			x[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		case 2:
			x[i] = float32(math.Copysign(0, float64(1-2*rng.IntN(2))))
		default:
			x[i] = float32(rng.NormFloat64())
		}
	}
}

// TestDepthwiseLanes compares every conv_dw family's lanes kernels with the
// generic loops of the same width: LanesF32 to the bit in every mode (NaN,
// ±Inf and ±0 in x; strides 1 to 3; 1 to 25 taps at random offsets; runs
// of every length mod the unroll; several rows), Interleave, InterleaveI8
// and Deinterleave on runs with tails of every length and row pitches
// above the run.
func TestDepthwiseLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1124))
	lanesFamilies := 0
	for _, k := range DepthwiseFamilies() {
		if k.Lanes == 0 {
			continue
		}
		lanesFamilies++
		gen := LanesGeneric(k.Lanes)
		L := k.Lanes
		for _, stride := range []int{1, 2, 3} {
			for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 14, 17} {
				for _, taps := range []int{1, 3, 9, 25} {
					rows := 1 + rng.IntN(3)
					t.Run(fmt.Sprintf("%s/s%d/n%d/taps%d", k.Family, stride, n, taps), func(t *testing.T) {
						offs := make([]int, taps)
						w := make([]float32, taps*L)
						maxOff := 0
						for i := range offs {
							offs[i] = rng.IntN(60) * L
							if rng.IntN(4) == 0 {
								offs[i] += rng.IntN(L) // unaligned vectors
							}
							maxOff = max(maxOff, offs[i])
						}
						for i := range w {
							w[i] = float32(rng.IntN(3) - 1)
						}
						xrow := (n-1)*stride*L + L + rng.IntN(3)*L
						x := make([]float32, maxOff+(rows-1)*xrow+(n-1)*stride*L+L+rng.IntN(5))
						fillSpecial(rng, x)
						want := make([]float32, rows*n*L+3)
						got := make([]float32, len(want))
						for i := range want {
							want[i] = float32(rng.NormFloat64())
							got[i] = want[i]
						}
						div, sc, bias := make([]float32, L), make([]float32, L), make([]float32, L)
						for l := range L {
							div[l] = float32(rng.ExpFloat64() * 100)
							sc[l] = float32(rng.ExpFloat64())
							bias[l] = float32(rng.NormFloat64())
						}
						for _, mode := range []int{0, 1, 5, 7, 3} {
							gen.LanesF32(want, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
							k.LanesF32(got, x, offs, w, stride, n, rows, xrow, div, sc, bias, mode)
							if i, ok := sameBits(got, want); !ok {
								t.Fatalf("mode %d [%d]: got %v, want %v", mode, i, got[i], want[i])
							}
						}
						// the generic loops' own arithmetic on one element
						l, p := rng.IntN(L), rng.IntN(rows*n)
						var s float32
						for t, o := range offs {
							s += w[t*L+l] * x[p/n*xrow+p%n*stride*L+o+l]
						}
						if s = float32(s*sc[l]) + bias[l]; math.Float32bits(s) != math.Float32bits(want[p*L+l]) && s == s {
							t.Fatalf("generic [%d, %d] = %v, want %v", p, l, want[p*L+l], s)
						}
					})
				}
			}
		}
		for _, n := range []int{0, 1, 7, L - 1, L, L + 1, 2*L + 3, 49, 196} {
			ld := n + rng.IntN(5)
			src := make([]float32, (L-1)*ld+n)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			// positions of rows of w columns into rows of w+gap, each
			// lanes floats
			w := 1 + rng.IntN(9)
			gap := rng.IntN(3)
			pos := make([]int, n)
			for i := range pos {
				pos[i] = (i/w*(w+gap) + i%w + 1) * L
			}
			want := make([]float32, (n/w+2)*(w+gap)*L)
			got := make([]float32, len(want))
			gen.Interleave(want, src, ld, pos)
			k.Interleave(got, src, ld, pos)
			if i, ok := sameBits(got, want); !ok {
				t.Fatalf("%s interleave n=%d ld=%d [%d]: got %v, want %v", k.Family, n, ld, i, got[i], want[i])
			}
			for i := range n * L {
				if want[pos[i/L]+i%L] != src[i%L*ld+i/L] {
					t.Fatalf("%s interleave n=%d: generic [%d] = %v", k.Family, n, i, want[pos[i/L]+i%L])
				}
			}
			srcI8 := make([]int8, len(src))
			for i := range srcI8 {
				srcI8[i] = int8(rng.IntN(256) - 128)
			}
			clear(want)
			clear(got)
			gen.InterleaveI8(want, srcI8, ld, pos)
			k.InterleaveI8(got, srcI8, ld, pos)
			for i := range n * L {
				if want[pos[i/L]+i%L] != float32(srcI8[i%L*ld+i/L]) || got[pos[i/L]+i%L] != want[pos[i/L]+i%L] {
					t.Fatalf("%s interleave int8 n=%d [%d]: got %v, generic %v, want %v", k.Family, n, i,
						got[pos[i/L]+i%L], want[pos[i/L]+i%L], srcI8[i%L*ld+i/L])
				}
			}
			gen.Interleave(want, src, ld, pos)
			packed := make([]float32, n*L)
			for i := range n {
				copy(packed[i*L:][:L], want[pos[i]:])
			}
			back := make([]float32, len(src))
			wantBack := make([]float32, len(src))
			gen.Deinterleave(wantBack, ld, packed, n)
			k.Deinterleave(back, ld, packed, n)
			if i, ok := sameBits(back, wantBack); !ok {
				t.Fatalf("%s deinterleave n=%d ld=%d [%d]: got %v, want %v", k.Family, n, ld, i, back[i], wantBack[i])
			}
			for l := range L {
				for i := range n {
					if back[l*ld+i] != src[l*ld+i] {
						t.Fatalf("%s deinterleave n=%d: [%d,%d] = %v, want %v", k.Family, n, l, i, back[l*ld+i], src[l*ld+i])
					}
				}
			}
		}
	}
	if lanesFamilies == 0 && cpu.Usable(cpu.AVX2) && cpu.AsmBuilt() {
		t.Fatal("no conv_dw family with lanes kernels on an AVX2 CPU")
	}
}

// TestDepthwiseLanesRows compares every family's LanesRowsF32 (where it
// runs) with the generic loops (LanesF32 on the same taps) to the bit, in
// every mode, on 3- and 5-column kernels of 1 to 5 rows, runs of 4 to 17
// positions (rests of every length), several rows, NaN, ±Inf and ±0 in x;
// it must run for 3 and 5 columns from 4 positions.
func TestDepthwiseLanesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1125))
	for _, k := range DepthwiseFamilies() {
		if k.Lanes == 0 {
			continue
		}
		L := k.Lanes
		gen := LanesGeneric(L)
		for _, kw := range []int{1, 3, 5} {
			for _, kh := range []int{1, 3, 5} {
				for _, n := range []int{3, 4, 5, 7, 8, 14, 17} {
					rows := 1 + rng.IntN(3)
					khStep := (n+kw-1)*L + rng.IntN(3)*L
					xrow := khStep * (1 + rng.IntN(2))
					x := make([]float32, (kh-1)*khStep+(kw-1)*L+(rows-1)*xrow+n*L+rng.IntN(4))
					fillSpecial(rng, x)
					w := make([]float32, kh*kw*L)
					for i := range w {
						w[i] = float32(rng.IntN(3) - 1)
					}
					div, sc, bias := make([]float32, L), make([]float32, L), make([]float32, L)
					for l := range L {
						div[l] = float32(rng.ExpFloat64() * 100)
						sc[l] = float32(rng.ExpFloat64())
						bias[l] = float32(rng.NormFloat64())
					}
					for _, mode := range []int{0, 1, 3, 5, 7} {
						want := make([]float32, rows*n*L+2)
						got := make([]float32, len(want))
						gen.LanesF32(want, x, rowsOffsets(L, kh, kw, khStep), w, 1, n, rows, xrow, div, sc, bias, mode)
						ran := k.LanesRowsF32(got, x, w, kh, kw, khStep, n, rows, xrow, div, sc, bias, mode)
						if should := n >= 4 && (kw == 3 || kw == 5); ran != should {
							t.Fatalf("%s %dx%d n=%d: ran %v, want %v", k.Family, kh, kw, n, ran, should)
						}
						if !ran {
							continue
						}
						if i, ok := sameBits(got, want); !ok {
							t.Fatalf("%s %dx%d n=%d rows=%d mode %d [%d]: got %v, want %v", k.Family, kh, kw, n, rows, mode, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
