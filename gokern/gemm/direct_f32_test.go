package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
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

// winoMat returns the 4x4 matrix product a*b*c of row-major matrices with
// the given shapes, in float64.
func winoMat(a []float64, ar, ac int, b []float64, bc int, c []float64, cc int) []float64 {
	ab := make([]float64, ar*bc)
	for i := range ar {
		for j := range bc {
			for k := range ac {
				ab[i*bc+j] += a[i*ac+k] * b[k*bc+j]
			}
		}
	}
	out := make([]float64, ar*cc)
	for i := range ar {
		for j := range cc {
			for k := range bc {
				out[i*cc+j] += ab[i*bc+k] * c[k*cc+j]
			}
		}
	}
	return out
}

// TestWinogradTransforms checks every family's WinoIn and WinoOut
// bit for bit against the generic ones, and the generic ones against B^T d
// B and A^T m A in float64, for 1 to 2*BNP+1 tiles with padded strides, and
// that both refuse short buffers.
func TestWinogradTransforms(t *testing.T) {
	bt := []float64{1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1}
	b := []float64{1, 0, 0, 0, 0, 1, -1, 1, -1, 1, 1, 0, 0, 0, 0, -1}
	at := []float64{1, 1, 1, 0, 0, 1, -1, -1}
	a := []float64{1, 0, 1, 1, 1, -1, 0, -1}
	rng := rand.New(rand.NewPCG(11, 12))
	gen, _ := DirectF32Op.Impl(cpu.Generic)
	for _, ks := range DirectF32Op.Impls() {
		if ks.WinoIn == nil {
			continue
		}
		oc := ks.BOC
		for nt := 1; nt <= 2*ks.BNP+1; nt++ {
			ld := (2*nt+2)*BlockC + rng.IntN(3)*BlockC
			ldv := nt*BlockC + rng.IntN(2)*7
			x := make([]float32, 3*ld+(2*nt+2)*BlockC)
			for i := range x {
				x[i] = rng.Float32()*8 - 4
			}
			v, vg := make([]float32, 15*ldv+nt*BlockC), make([]float32, 15*ldv+nt*BlockC)
			ks.WinoIn(nt, x, ld, v, ldv)
			winoInGeneric(nt, x, ld, vg, ldv)
			ldm := nt*oc + rng.IntN(2)*5
			ldy := 2*nt*oc + rng.IntN(2)*3
			m := make([]float32, 15*ldm+nt*oc)
			for i := range m {
				m[i] = rng.Float32()*8 - 4
			}
			y, yg := make([]float32, ldy+2*nt*oc), make([]float32, ldy+2*nt*oc)
			ks.WinoOut(nt, m, ldm, y, ldy)
			winoOutGeneric(oc)(nt, m, ldm, yg, ldy)
			for i := range v {
				if math.Float32bits(v[i]) != math.Float32bits(vg[i]) {
					t.Fatalf("%s nt=%d: WinoIn v[%d] = %v, generic %v", ks.Family, nt, i, v[i], vg[i])
				}
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(yg[i]) {
					t.Fatalf("%s nt=%d: WinoOut y[%d] = %v, generic %v", ks.Family, nt, i, y[i], yg[i])
				}
			}
			if ks != gen {
				continue
			}
			for tt := range nt {
				for c := range oc {
					if c < BlockC {
						d := make([]float64, 16)
						for i := range 4 {
							for j := range 4 {
								d[i*4+j] = float64(x[i*ld+(2*tt+j)*BlockC+c])
							}
						}
						want := winoMat(bt, 4, 4, d, 4, b, 4)
						for xi, w := range want {
							if got := float64(vg[xi*ldv+tt*BlockC+c]); math.Abs(got-w) > 1e-5 {
								t.Fatalf("nt=%d tile %d channel %d: v[%d] = %v, want %v", nt, tt, c, xi, got, w)
							}
						}
					}
					mm := make([]float64, 16)
					for xi := range 16 {
						mm[xi] = float64(m[xi*ldm+tt*oc+c])
					}
					want := winoMat(at, 2, 4, mm, 4, a, 2)
					for i := range 2 {
						for j := range 2 {
							if got := float64(yg[i*ldy+(2*tt+j)*oc+c]); math.Abs(got-want[i*2+j]) > 1e-5 {
								t.Fatalf("nt=%d tile %d channel %d: y[%d][%d] = %v, want %v", nt, tt, c, i, j, got, want[i*2+j])
							}
						}
					}
				}
			}
		}
		for _, short := range []func(){
			func() { ks.WinoIn(2, make([]float32, 3*6*BlockC+6*BlockC-1), 6*BlockC, make([]float32, 15*32+32), 32) },
			func() { ks.WinoIn(2, make([]float32, 4*6*BlockC), 6*BlockC, make([]float32, 15*32+31), 32) },
			func() { ks.WinoOut(2, make([]float32, 15*2*oc+2*oc-1), 2*oc, make([]float32, 8*oc), 4*oc) },
			func() { ks.WinoOut(2, make([]float32, 16*2*oc), 2*oc, make([]float32, 8*oc-1), 4*oc) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: a Winograd transform took a short buffer without a panic", ks.Family)
					}
				}()
				short()
			}()
		}
	}
}

// TestTransposeF32 checks every family's Transpose (TBlock on whole blocks,
// the package's Transpose on the edges) bit for bit against the definition
// on shapes below, at and past whole blocks, with strides past the shape,
// leaving t's other values as they were; and that TBlock refuses short
// buffers.
func TestTransposeF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, ks := range DirectF32Op.Impls() {
		for _, sz := range [][2]int{{1, 1}, {7, 9}, {8, 8}, {16, 16}, {16, 28}, {28, 16}, {17, 33}, {32, 56}, {40, 5}} {
			rows, nc := sz[0], sz[1]
			ldm, ldt := nc+rng.IntN(3), rows+rng.IntN(3)
			m := make([]float32, (rows-1)*ldm+nc)
			for i := range m {
				m[i] = rng.Float32()
			}
			tt := make([]float32, (nc-1)*ldt+rows+5)
			for i := range tt {
				tt[i] = -1
			}
			ks.Transpose(tt, ldt, m, ldm, rows, nc)
			for j := range nc {
				for i := range ldt {
					want := float32(-1)
					if i < rows {
						want = m[i*ldm+j]
					}
					if at := j*ldt + i; at < len(tt) && tt[at] != want {
						t.Fatalf("%s %dx%d: t[%d][%d] = %v, want %v", ks.Family, rows, nc, j, i, tt[at], want)
					}
				}
			}
		}
		if ks.TBlock == nil {
			continue
		}
		b := ks.TB
		for _, short := range []func(){
			func() { ks.TBlock(make([]float32, (b-1)*b+b-1), b, make([]float32, b*b), b) },
			func() { ks.TBlock(make([]float32, b*b), b, make([]float32, (b-1)*b+b-1), b) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: TBlock took a short buffer without a panic", ks.Family)
					}
				}()
				short()
			}()
		}
	}
}
