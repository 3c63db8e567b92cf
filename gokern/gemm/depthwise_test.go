package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestDepthwiseFamilies compares every conv_dw family with the generic
// loops on random runs of odd lengths (tails of every size) with 1 to 25
// taps at random offsets: float32 to the bit (the weights are -1, 0, +1,
// so fused and unfused agree), NaN and Inf kept; int8 exactly, with every
// split of added and subtracted taps.
func TestDepthwiseFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	gen, _ := DepthwiseOp.Impl(cpu.Generic)
	if len(DepthwiseFamilies()) < 2 && cpu.Usable(cpu.AVX2) && cpu.AsmBuilt() {
		t.Fatalf("conv_dw has %d families on an AVX2 CPU, want the assembly ones too", len(DepthwiseFamilies()))
	}
	lens := []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 200, 257}
	for _, k := range DepthwiseFamilies() {
		for _, n := range lens {
			for _, taps := range []int{1, 2, 9, 25} {
				t.Run(fmt.Sprintf("%s/n%d/taps%d", k.Family, n, taps), func(t *testing.T) {
					offs := make([]int, taps)
					w := make([]float32, taps)
					maxOff := 0
					for i := range offs {
						offs[i] = rng.IntN(40)
						maxOff = max(maxOff, offs[i])
						w[i] = float32(rng.IntN(3) - 1)
					}
					x := make([]float32, maxOff+n+rng.IntN(3))
					xi := make([]int8, len(x))
					for i := range x {
						x[i] = float32(rng.NormFloat64())
						xi[i] = int8(rng.IntN(256) - 128)
					}
					if n > 4 {
						x[maxOff+n/2] = float32(math.Inf(1))
						x[maxOff+n/3] = float32(math.NaN())
					}
					want := make([]float32, n)
					wantI := make([]int32, n)
					for i := range want {
						want[i] = float32(rng.NormFloat64())
						wantI[i] = rng.Int32N(1<<20) - 1<<19
					}
					got := append([]float32(nil), want...)
					gen.TapsF32(want, x, offs, w)
					k.TapsF32(got, x, offs, w)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("f32 [%d]: got %v, want %v", i, got[i], want[i])
						}
					}
					for _, npos := range []int{0, taps / 2, taps} {
						wi := append([]int32(nil), wantI...)
						gi := append([]int32(nil), wantI...)
						gen.TapsI8(wi, xi, offs, npos)
						k.TapsI8(gi, xi, offs, npos)
						for i := range wi {
							if gi[i] != wi[i] {
								t.Fatalf("i8 npos %d [%d]: got %d, want %d", npos, i, gi[i], wi[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestDepthwiseBadTaps checks that every family panics, not reads past x,
// on taps that do not fit.
func TestDepthwiseBadTaps(t *testing.T) {
	for _, k := range DepthwiseFamilies() {
		for name, f := range map[string]func(){
			"f32 short": func() { k.TapsF32(make([]float32, 33), make([]float32, 40), []int{0, 8}, []float32{1, 1}) },
			"f32 neg":   func() { k.TapsF32(make([]float32, 16), make([]float32, 40), []int{-1}, []float32{1}) },
			"f32 w":     func() { k.TapsF32(make([]float32, 16), make([]float32, 40), []int{0, 1}, []float32{1}) },
			"f32 none":  func() { k.TapsF32(make([]float32, 16), make([]float32, 40), nil, nil) },
			"i8 short":  func() { k.TapsI8(make([]int32, 33), make([]int8, 40), []int{0, 8}, 1) },
			"i8 npos":   func() { k.TapsI8(make([]int32, 16), make([]int8, 40), []int{0}, 2) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s/%s: no panic", k.Family, name)
					}
				}()
				f()
			}()
		}
	}
}
