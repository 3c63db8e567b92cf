package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestDepthwiseFamilies compares every conv_dw family with the generic
// loops on random rows of odd lengths (tails of every size, inputs longer
// than the outputs, an offset start): float32 to the bit (w is -1, 0 or
// +1, so fused and unfused agree), int8 exactly, NaN and Inf kept.
func TestDepthwiseFamilies(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	gen, _ := DepthwiseOp.Impl(cpu.Generic)
	if len(DepthwiseFamilies()) < 2 && cpu.Usable(cpu.AVX2) && cpu.AsmBuilt() {
		t.Fatalf("conv_dw has %d families on an AVX2 CPU, want the assembly ones too", len(DepthwiseFamilies()))
	}
	lens := []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 200, 257}
	for _, k := range DepthwiseFamilies() {
		for _, n := range lens {
			for _, w := range []float32{-1, 0, 1} {
				t.Run(fmt.Sprintf("%s/n%d/w%v", k.Family, n, w), func(t *testing.T) {
					off := rng.IntN(3)
					x := make([]float32, off+n+rng.IntN(5))
					xi := make([]int8, len(x))
					for i := range x {
						x[i] = float32(rng.NormFloat64())
						xi[i] = int8(rng.IntN(256) - 128)
					}
					if n > 4 {
						x[off+n/2] = float32(math.Inf(1))
						x[off+n/3] = float32(math.NaN())
					}
					want := make([]float32, n)
					wantI := make([]int32, n)
					for i := range want {
						want[i] = float32(rng.NormFloat64())
						wantI[i] = rng.Int32N(1<<20) - 1<<19
					}
					got := append([]float32(nil), want...)
					gotI := append([]int32(nil), wantI...)
					gen.AxpyF32(want, x[off:], w)
					k.AxpyF32(got, x[off:], w)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("f32 [%d]: got %v, want %v", i, got[i], want[i])
						}
					}
					add, addG := k.AddI8, gen.AddI8
					if w < 0 {
						add, addG = k.SubI8, gen.SubI8
					}
					addG(wantI, xi[off:])
					add(gotI, xi[off:])
					for i := range wantI {
						if gotI[i] != wantI[i] {
							t.Fatalf("i8 [%d]: got %d, want %d", i, gotI[i], wantI[i])
						}
					}
				})
			}
		}
	}
}

// TestDepthwiseShortInput checks that every family panics, not reads past
// x, when x is shorter than dst.
func TestDepthwiseShortInput(t *testing.T) {
	for _, k := range DepthwiseFamilies() {
		for name, f := range map[string]func(){
			"f32": func() { k.AxpyF32(make([]float32, 33), make([]float32, 32), 1) },
			"add": func() { k.AddI8(make([]int32, 33), make([]int8, 32)) },
			"sub": func() { k.SubI8(make([]int32, 33), make([]int8, 32)) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s/%s: no panic on a short input", k.Family, name)
					}
				}()
				f()
			}()
		}
	}
}
