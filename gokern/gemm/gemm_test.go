package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// randPanel returns kc panel bytes of random codes 0..2 in every slot.
func randPanel(rng *rand.Rand, kc int) []byte {
	a := make([]byte, kc)
	for i := range a {
		for r := range MR {
			a[i] |= byte(rng.IntN(3)) << (2 * r)
		}
	}
	return a
}

// refTile returns tile with the MR x nr product of panel a (kc bytes) and
// the B micro-panel b stored (or, with add, added) at tile[r*ldt+j],
// summed in S (float64 for float32 tiles, int64 for int8 ones).
func refTile[S float64 | int64, B float32 | int8, T float32 | int32](a []byte, b []B, tile []T, kc, nr, ldt int, add bool) []T {
	want := append([]T(nil), tile...)
	for r := range MR {
		for j := range nr {
			var s S
			for k := range kc {
				s += S(lutI8[a[k]][r]) * S(b[k*nr+j])
			}
			if add {
				s += S(want[r*ldt+j])
			}
			want[r*ldt+j] = T(s)
		}
	}
	return want
}

func TestMicroF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, ks := range Families() {
		for _, kc := range []int{1, 2, 3, 4, 5, 7, 8, 31, 64, 129, 256} {
			for _, add := range []bool{false, true} {
				nr := ks.NRF32
				a := randPanel(rng, kc)
				b := make([]float32, kc*nr)
				for i := range b {
					b[i] = rng.Float32()*2 - 1
				}
				ldt := nr + 3
				tile := make([]float32, MR*ldt)
				for i := range tile {
					tile[i] = rng.Float32()
				}
				want := refTile[float64](a, b, tile, kc, nr, ldt, add)
				ks.F32(kc, a, b, tile, ldt, add)
				for i := range tile {
					if d := math.Abs(float64(tile[i] - want[i])); d > 1e-5*math.Sqrt(float64(kc))+1e-6 {
						t.Fatalf("%s kc=%d add=%v: t[%d] = %g, want %g", ks.Family, kc, add, i, tile[i], want[i])
					}
				}
			}
		}
	}
}

func TestMicroI8(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, ks := range Families() {
		for _, kc := range []int{1, 2, 3, 4, 5, 7, 8, 31, 64, 129, 256, 100000} {
			for _, mode := range []string{"random", "extreme"} {
				nr := ks.NRI8
				a := randPanel(rng, kc)
				b := make([]int8, kc*nr)
				for i := range b {
					b[i] = int8(rng.IntN(256) - 128)
				}
				if mode == "extreme" { // largest sums of either sign in every lane
					for i := range a {
						a[i] = byte([]int{0x00, 0xaa}[rng.IntN(2)])
					}
					for i := range b {
						b[i] = -128
					}
				}
				ldt := nr + 1
				tile := make([]int32, MR*ldt)
				for _, add := range []bool{false, true} {
					for i := range tile {
						tile[i] = int32(rng.IntN(1000) - 500)
					}
					want := refTile[int64](a, b, tile, kc, nr, ldt, add)
					var prepped []int8
					ks.I8(kc, a, ks.PrepareI8(b, kc, &prepped), tile, ldt, add)
					for i := range tile {
						if tile[i] != want[i] {
							t.Fatalf("%s kc=%d %s add=%v: t[%d] = %d, want %d", ks.Family, kc, mode, add, i, tile[i], want[i])
						}
					}
				}
			}
		}
	}
}

func TestMicroShortBuffersPanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a short B panel")
		}
	}()
	microF32Generic(8, make([]byte, 8), make([]float32, 3), make([]float32, 16), 4, false)
}

func TestLanes(t *testing.T) {
	for _, lo := range []int32{0, 1, -1, math.MaxInt32, math.MinInt32, 12345, -98765} {
		for _, hi := range []int32{0, 1, -1, math.MaxInt32, math.MinInt32, 777, -4242} {
			v := uint64(int64(lo)) + uint64(int64(hi))<<32
			if a, b := lanes(v); a != lo || b != hi {
				t.Fatalf("lanes(%d,%d) = %d,%d", lo, hi, a, b)
			}
		}
	}
}

func TestPackA(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	old := par.Threads()
	defer func() { _ = par.SetThreads(old) }()
	// Every family's packer (the generic decoder first), on one and three
	// threads.
	for _, ks := range Families() {
		for _, th := range []int{1, 3} {
			_ = par.SetThreads(th)
			testPackA(t, rng, ks)
		}
	}
	if err := Generic().PackA(make([]byte, 3), make([]byte, 32), 1, 1, 4); err == nil {
		t.Fatal("short dst accepted")
	}
	if err := Generic().PackA(make([]byte, 4), make([]byte, 0), 1, 1, 4); err == nil {
		t.Fatal("short packed accepted")
	}
}

func testPackA(t *testing.T, rng *rand.Rand, ks *Kernels) {
	t.Helper()
	{
		for _, c := range []struct{ og, groups, k int }{
			{1, 1, 1}, {1, 1, 200}, {3, 2, 27}, {4, 1, 128}, {5, 3, 33}, {64, 1, 576}, {7, 4, 9}, {1, 16, 9},
			{3, 1, 32}, {6, 2, 96}, {9, 3, 64}, {2, 5, 160}, {6, 2, 128}, {3, 1, 256}, {9, 3, 384}, {64, 2, 512},
		} {
			n := c.og * c.groups * c.k
			q := make([]int8, n)
			for i := range q {
				q[i] = int8(rng.IntN(3) - 1)
			}
			packed := make([]byte, ternary.PackedLen(n))
			if err := ternary.Pack(q, packed); err != nil {
				t.Fatal(err)
			}
			dst := make([]byte, ALen(c.og, c.groups, c.k))
			if err := ks.PackA(dst, packed, c.og, c.groups, c.k); err != nil {
				t.Fatal(err)
			}
			np := Panels(c.og)
			for g := range c.groups {
				for row := range np * MR {
					for k := range c.k {
						got := Weights(dst[(g*np+row/MR)*c.k+k])[row%MR]
						var want int8
						if row < c.og {
							want = q[(g*c.og+row)*c.k+k]
						}
						if got != want {
							t.Fatalf("%s %+v: g=%d row=%d k=%d: %d, want %d", ks.Family, c, g, row, k, got, want)
						}
					}
				}
			}
			// a code 3 is reported with its element
			bad := rng.IntN(n)
			b, sh := (bad>>7)<<5|bad&31, uint(6-2*((bad>>5)&3))
			packed[b] |= 3 << sh
			err := ks.PackA(dst, packed, c.og, c.groups, c.k)
			if err == nil || err.Error() != fmt.Sprintf("weight: invalid I2_S code 3 at element %d", bad) {
				t.Fatalf("%s %+v: code 3 at %d: err %v", ks.Family, c, bad, err)
			}
		}
	}
}

func BenchmarkMicro(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	const kc = 256
	a := randPanel(rng, kc)
	for _, ks := range Families() {
		// B micro-panels of at most 32 KB (L1), as gokern/ops/conv2d chunks them.
		kf := min(kc, 32<<10/(4*ks.NRF32))
		bf := make([]float32, kf*ks.NRF32)
		tf := make([]float32, MR*ks.NRF32)
		b.Run(fmt.Sprintf("%s/f32", ks.Family), func(b *testing.B) {
			for b.Loop() {
				ks.F32(kf, a, bf, tf, ks.NRF32, false)
			}
			b.ReportMetric(float64(b.N)*2*MR*float64(ks.NRF32*kf)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		var prepped []int8
		bi := ks.PrepareI8(make([]int8, kc*ks.NRI8), kc, &prepped)
		ti := make([]int32, MR*ks.NRI8)
		b.Run(fmt.Sprintf("%s/i8", ks.Family), func(b *testing.B) {
			for b.Loop() {
				ks.I8(kc, a, bi, ti, ks.NRI8, false)
			}
			b.ReportMetric(float64(b.N)*2*MR*float64(ks.NRI8*kc)/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
	}
}

// TestSelect: the "conv_gemm" op selects the best registered set the CPU,
// the build and a BITNET_GO_DISABLE setting allow (the generic kernels with
// every assembly family off), whose Family is the family selected; the
// process's choice is the start-up selection's and is what cpu.Kernels
// reports.
func TestSelect(t *testing.T) {
	for _, off := range []string{"", "avx2", "avx512", "avx512vnni", "all"} {
		sel := cpu.ParseDisable(off)
		ks, fam := KernelOp.Select(sel)
		want := cpu.Generic
		for _, f := range cpu.Families {
			if _, ok := KernelOp.Impl(f); ok && sel.Usable(f) {
				want = f
				break
			}
		}
		if fam != want || ks.Family != want {
			t.Errorf("BITNET_GO_DISABLE=%q: selected %s (set %s), want %s", off, fam, ks.Family, want)
		}
		if (off == "avx2" || off == "all") && ks != Generic() {
			t.Errorf("BITNET_GO_DISABLE=%q: not the generic set", off)
		}
	}
	if _, fam := KernelOp.Select(cpu.Startup()); KernelOp.Get().Family != fam || cpu.Kernels()["conv_gemm"] != fam {
		t.Errorf("process set %s, reported %s, start-up selection %s", KernelOp.Get().Family, cpu.Kernels()["conv_gemm"], fam)
	}
}
