package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDirectF32Families runs every conv_directf family's tile on random
// problems (odd k, gaps between offsets, every nv, ldt past the tile,
// signed and zero weights) against a float64 reference of the same sum.
func TestDirectF32Families(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	fams := DirectF32Op.Impls()
	if len(fams) == 0 || fams[0].Tile == nil {
		t.Fatal("no conv_directf kernels")
	}
	for _, ks := range fams {
		for _, k := range []int{1, 2, 3, 9, 27, 64, 301} {
			for nv := 1; nv <= ks.NV; nv++ {
				name := fmt.Sprintf("%s k=%d nv=%d", ks.Family, k, nv)
				cols := nv * ks.Lanes
				offs := make([]int, k+2)
				o := rng.IntN(5)
				for i := range offs {
					offs[i] = o
					o += rng.IntN(4) // repeats allowed
				}
				x := make([]float32, offs[k-1]+cols+rng.IntN(3))
				for i := range x {
					x[i] = rng.Float32()*4 - 2
				}
				w := make([]float32, k*ks.MR+1)
				for i := range w {
					w[i] = float32(rng.IntN(3)-1) * (0.5 + rng.Float32())
				}
				bias := make([]float32, ks.MR)
				for i := range bias {
					bias[i] = rng.Float32() - 0.5
				}
				ldt := cols + rng.IntN(5)
				tt := make([]float32, (ks.MR-1)*ldt+cols)
				for i := range tt {
					tt[i] = float32(math.NaN()) // every element in the tile written
				}
				ks.Tile(k, w, x, offs, bias, tt, ldt, nv)
				for r := range ks.MR {
					for j := range cols {
						want, mag := float64(bias[r]), math.Abs(float64(bias[r]))
						for i := range k {
							p := float64(w[i*ks.MR+r]) * float64(x[offs[i]+j])
							want += p
							mag += math.Abs(p)
						}
						got := float64(tt[r*ldt+j])
						if math.Abs(got-want) > 1e-6*mag+1e-7 || math.IsNaN(got) {
							t.Fatalf("%s: t[%d][%d] = %v, want %v", name, r, j, got, want)
						}
					}
				}
			}
		}
	}
}

// TestDirectF32Checks makes sure a tile refuses arguments it would read
// past.
func TestDirectF32Checks(t *testing.T) {
	for _, ks := range DirectF32Op.Impls() {
		cols := ks.Lanes
		w := make([]float32, ks.MR)
		bias := make([]float32, ks.MR)
		tt := make([]float32, ks.MR*cols)
		for _, c := range []struct {
			name string
			x    []float32
			offs []int
			nv   int
		}{
			{"short x", make([]float32, cols+2), []int{3}, 1},
			{"nv 0", make([]float32, cols), []int{0}, 0},
			{"nv past NV", make([]float32, 8*cols), []int{0}, ks.NV + 1},
			{"negative offset", make([]float32, cols), []int{-1}, 1},
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s %s: no panic", ks.Family, c.name)
					}
				}()
				ks.Tile(1, w, c.x, c.offs, bias, tt, cols, c.nv)
			}()
		}
	}
}

// TestBlockedF32Families runs every family's channels-in-lanes tile on
// random problems against a float64 reference.
func TestBlockedF32Families(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, ks := range DirectF32Op.Impls() {
		if ks.Blocked == nil {
			continue
		}
		for _, n := range []int{1, 2, 9, 37} {
			for np := 1; np <= ks.BNP; np++ {
				offs := make([]int, n)
				o := rng.IntN(40)
				for i := range offs {
					offs[i] = o
					o += rng.IntN(50)
				}
				x := make([]float32, offs[n-1]+np*BlockC+rng.IntN(3))
				for i := range x {
					x[i] = rng.Float32()*4 - 2
				}
				w := make([]float32, n*BlockC*ks.BOC)
				for i := range w {
					w[i] = float32(rng.IntN(3)-1) * (0.5 + rng.Float32())
				}
				bias := make([]float32, ks.BOC)
				for i := range bias {
					bias[i] = rng.Float32() - 0.5
				}
				tt := make([]float32, np*ks.BOC)
				for i := range tt {
					tt[i] = float32(math.NaN())
				}
				ks.Blocked(n, w, x, offs, bias, tt, np)
				for p := range np {
					for oc := range ks.BOC {
						want, mag := float64(bias[oc]), math.Abs(float64(bias[oc]))
						for i := range n {
							for c := range BlockC {
								v := float64(w[(i*BlockC+c)*ks.BOC+oc]) * float64(x[offs[i]+p*BlockC+c])
								want += v
								mag += math.Abs(v)
							}
						}
						got := float64(tt[p*ks.BOC+oc])
						if math.Abs(got-want) > 1e-6*mag+1e-7 || math.IsNaN(got) {
							t.Fatalf("%s n=%d np=%d: t[%d][%d] = %v, want %v", ks.Family, n, np, p, oc, got, want)
						}
					}
				}
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: blocked tile read past x without a panic", ks.Family)
				}
			}()
			ks.Blocked(1, make([]float32, BlockC*ks.BOC), make([]float32, 2*BlockC-1), []int{0}, make([]float32, ks.BOC),
				make([]float32, 2*ks.BOC), 2)
		}()
	}
}
