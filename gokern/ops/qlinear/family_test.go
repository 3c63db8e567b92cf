package qlinear

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// TestFamiliesPresent checks that the families this CPU can run are tested
// (an assembly family the CPU has must be among families()).
func TestFamiliesPresent(t *testing.T) {
	got := map[cpu.Family]bool{}
	for _, k := range families(t) {
		got[k.Family] = true
	}
	t.Logf("families tested: %v", got)
	if !got[cpu.Generic] {
		t.Fatal("the generic kernels are not tested")
	}
}

// TestTileMatchesGeneric compares every family's tile kernel with the
// generic one on random packed operands (every code value), both with and
// without adding to c, for several k lengths and row strides.
func TestTileMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range families(t) {
		for _, kq := range []int{1, 2, 3, 17, kcQuads + 5} {
			ldc := NR + r.IntN(9)
			a := randCodes(r, kq*MR*4)
			w := asInt8(randCodes(r, kq*NR*4))
			init := make([]int32, MR*ldc)
			for i := range init {
				init[i] = int32(r.Uint32())
			}
			for _, add := range []bool{false, true} {
				got := append([]int32(nil), init...)
				want := append([]int32(nil), init...)
				k.Tile(kq, widen(k, a), w, got, ldc, add)
				tileGeneric(kq, a, w, want, ldc, add)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s Tile kq=%d ldc=%d add=%v: c[%d] = %d, want %d", k.Family, kq, ldc, add, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// widen returns a packed activation tile as k's Tile reads it.
func widen(k *Kernels, a []byte) []byte {
	if !k.WideA {
		return a
	}
	out := make([]byte, 2*len(a))
	for i, v := range a {
		out[2*i] = v
	}
	return out
}

// TestLinearLarge runs shapes with several tasks, K blocks and tails on
// every family, on both paths (dot kernels below tileMinRows rows, tiles
// from it), and compares the outputs with the int64 reference's: twice
// with the weight's panels kept by its codes, twice kept by an ID
// (Weight.ID: a second weight at the same address with another ID must not
// find the first one's panels).
func TestLinearLarge(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(9, 10))
	shapes := [][3]int{{70, 150, 1500}, {64, 33, 4*kcQuads + 3}, {5, 33, 99}, {129, 40, 77}, {3, 300, 1100}, {17, 257, 2049},
		{8, 67, 320}, {13, 9, 64}, {24, 130, 500}, {tileMinRows, 33, 4*kcQuads + 3}, {tileMinRows + 5, 40, 77}}
	var id uint64
	for _, sh := range shapes {
		M, N, K := sh[0], sh[1], sh[2]
		x := Act{Data: randCodes(r, M*K), Signed: K%2 == 1, Scale: 0.01, Zero: int32(r.IntN(100))}
		w := Weight{Data: randCodes(r, N*K), Scales: make([]float32, N), Zeros: make([]int32, N)}
		for i := range w.Scales {
			w.Scales[i] = 0.0005 + r.Float32()*0.001
			w.Zeros[i] = int32(r.IntN(9)) - 4
		}
		o := Output{Scale: 1 + r.Float32(), Zero: 100}
		want := refLinear(M, N, K, x, w, nil, o)
		for _, k := range families(t) {
			for rep := 0; rep < 4; rep++ { // calls 2 and 4: the kept panels, kept by ID from call 3 on
				wr := w
				if rep >= 2 {
					if rep == 2 {
						id++
					}
					wr.ID = id
				}
				got := make([]byte, M*N)
				if _, err := Linear(k, M, N, K, x, wr, nil, o, got); err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s %v call %d: out[%d] = %d, want %d", k.Family, sh, rep, i, got[i], want[i])
					}
				}
			}
		}
		// other codes at the same address under a new ID: never the panels kept under the old one
		saved := append([]byte(nil), w.Data...)
		copy(w.Data, randCodes(r, len(w.Data)))
		id++
		wr := w
		wr.ID = id
		other := refLinear(M, N, K, x, w, nil, o)
		got := make([]byte, M*N)
		if _, err := Linear(KernelOp.Get(), M, N, K, x, wr, nil, o, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != other[i] {
				t.Fatalf("%v, other codes under a new ID: out[%d] = %d, want %d", sh, i, got[i], other[i])
			}
		}
		copy(w.Data, saved)
		// the weight changed in place: never the stale panels
		w.Data[r.IntN(len(w.Data))] ^= 0x5a
		fresh := refLinear(M, N, K, x, w, nil, o)
		got = make([]byte, M*N)
		if _, err := Linear(KernelOp.Get(), M, N, K, x, w, nil, o, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != fresh[i] {
				t.Fatalf("%v after a change of the weight: out[%d] = %d, want %d", sh, i, got[i], fresh[i])
			}
		}
	}
}

// refLinear is Linear's int64 reference (refOut per output).
func refLinear(M, N, K int, x Act, w Weight, bias []float32, o Output) []byte {
	out := make([]byte, M*N)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			zw := int64(w.Zeros[0])
			if len(w.Zeros) > 1 {
				zw = int64(w.Zeros[n])
			}
			var raw int64
			for i := 0; i < K; i++ {
				raw += (code(x.Data[m*K+i], x.Signed) - int64(x.Zero)) * (int64(int8(w.Data[n*K+i])) - zw)
			}
			out[m*N+n] = refOut(raw, bias, n, x.Scale, w.Scales, o)
		}
	}
	return out
}

// TestQuantMatchesGeneric compares every family's Quant with Requant.Quant
// on blocks of rows (strided, each with its row sum) of random products and
// channel parameters, with extremes: wrapping raw values, huge, infinite
// and NaN multipliers and biases, ReLU and int8 ranges.
func TestQuantMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e9, -3e9, 0.5, -0.5, 2.5, 1 << 30}
	for _, k := range families(t) {
		for c := 0; c < 80; c++ {
			N := 1 + r.IntN(70)
			n0 := r.IntN(5)
			rq := &Requant{ColTerm: make([]int32, n0+N), ZW: make([]int32, n0+N), BiasQ: make([]float32, n0+N), Mult: make([]float32, n0+N),
				ZO: int32(r.IntN(256)), Lo: 0, Hi: 255}
			if c%2 == 1 {
				rq.ZO -= 128
				rq.Lo, rq.Hi = -128, 127
			}
			if c%3 == 0 {
				rq.Lo = max(rq.Lo, rq.ZO)
			}
			for i := range rq.Mult {
				rq.ColTerm[i] = int32(r.Uint32())
				rq.ZW[i] = int32(r.IntN(256)) - 128
				rq.BiasQ[i] = float32(r.NormFloat64() * 100)
				rq.Mult[i] = float32(r.ExpFloat64() * 0.01)
				if r.IntN(8) == 0 {
					rq.Mult[i] = specials[r.IntN(len(specials))]
				}
				if r.IntN(8) == 0 {
					rq.BiasQ[i] = specials[r.IntN(len(specials))]
				}
			}
			if c%4 == 2 { // symmetric weights: the kernels' path without zw*rowsum
				clear(rq.ZW)
				rq.ZWZero = true
			}
			// rows of N products ld apart (the gaps must stay as they are)
			rows := 1 + r.IntN(4)
			ld := N + r.IntN(3)*(1+r.IntN(20))
			acc := make([]int32, (rows-1)*ld+N)
			for i := range acc {
				acc[i] = int32(r.Uint32()) >> r.IntN(32)
			}
			rowsums := make([]int32, rows)
			for i := range rowsums {
				rowsums[i] = int32(r.Uint32()) >> r.IntN(32)
			}
			got, want := append([]int32(nil), acc...), append([]int32(nil), acc...)
			k.Quant(got, ld, rowsums, n0, N, rq)
			for i, rs := range rowsums {
				for j := range N {
					want[i*ld+j] = rq.Quant(rq.Raw(acc[i*ld+j], rs, n0+j), n0+j)
				}
			}
			for i := range got {
				if got[i] != want[i] {
					what := "a gap between rows"
					if j := i % ld; j < N {
						what = fmt.Sprintf("mult %v, bias %v", rq.Mult[n0+j], rq.BiasQ[n0+j])
					}
					t.Fatalf("%s case %d (%d rows of %d, ld %d): value %d = %d, want %d (acc %d, %s)", k.Family, c, rows, N, ld,
						i, got[i], want[i], acc[i], what)
				}
			}
		}
	}
}

// TestCols16MatchesGeneric compares every family's Cols16 with the generic
// one on random codes (every value of [-128, 255]) and strides.
func TestCols16MatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, k := range families(t) {
		if k.Cols16 == nil {
			continue
		}
		for _, lds := range []int{16, 17, 128} {
			for _, ldo := range []int{16, 23, 3136} {
				src := make([]int32, 15*lds+16)
				for i := range src {
					src[i] = int32(r.IntN(384)) - 128
				}
				got := randCodes(r, 15*ldo+16)
				want := append([]byte(nil), got...)
				k.Cols16(src, lds, got, ldo)
				cols16Generic(src, lds, want, ldo)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s Cols16 lds=%d ldo=%d: out[%d] = %d, want %d", k.Family, lds, ldo, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestQuadRunMatchesGeneric compares every family's QuadRun with the
// generic one (widened for a WideA family) on random words, offsets
// (unordered, repeated) and sums.
func TestQuadRunMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, k := range families(t) {
		if k.QuadRun == nil {
			continue
		}
		for _, n := range []int{1, 2, 9, 49, 144} {
			nd := 1 + r.IntN(n)
			src := make([]uint32, 500)
			sum := make([]int32, 300)
			for i := range src {
				src[i] = r.Uint32()
			}
			for i := range sum {
				sum[i] = int32(r.Uint32())
			}
			offs, doffs := make([]int32, n), make([]int32, nd)
			maxOff, maxD := 0, 0
			for i := range offs {
				offs[i] = int32(r.IntN(len(src) - 7))
				maxOff = max(maxOff, int(offs[i]))
			}
			for i := range doffs {
				doffs[i] = int32(r.IntN(len(sum) - 7))
				maxD = max(maxD, int(doffs[i]))
			}
			want := make([]byte, 32*n)
			grs, wrs := make([]int32, 8), make([]int32, 8)
			quadRunGeneric(src, offs, maxOff, want, sum, doffs, maxD, wrs)
			want = append(widen(k, want), 0xA5, 0xA5, 0xA5, 0xA5, 0xA5) // WideA: int16 codes; the bytes past it kept
			got := make([]byte, len(want))
			for i := range got {
				got[i] = 0xA5
			}
			k.QuadRun(src, offs, maxOff, got, sum, doffs, maxD, grs)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s QuadRun n=%d: dst[%d] = %d, want %d", k.Family, n, i, got[i], want[i])
				}
			}
			for i := range grs {
				if grs[i] != wrs[i] {
					t.Fatalf("%s QuadRun n=%d nd=%d: rs[%d] = %d, want %d", k.Family, n, nd, i, grs[i], wrs[i])
				}
			}
		}
	}
}

// TestQuadRowMatchesGeneric compares every family's QuadRow with the
// generic one on random codes, flips, strides and block counts.
func TestQuadRowMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, k := range families(t) {
		if k.QuadRow == nil {
			continue
		}
		for _, sh := range [][3]int{{1, 1, 16}, {2, 3, 40}, {5, 16, 100}} {
			n16, c4, hw := sh[0], sh[1], sh[2]
			plane := 16*n16 + r.IntN(7)
			x := randCodes(r, 4*c4*hw)
			flip := []uint32{0, 0x80808080}[r.IntN(2)]
			got, want := make([]uint32, c4*plane), make([]uint32, c4*plane)
			gs, ws := make([]int32, 16*n16+3), make([]int32, 16*n16+3)
			for i := range gs {
				gs[i] = int32(r.Uint32())
				ws[i] = gs[i]
			}
			k.QuadRow(x, hw, n16, c4, got, plane, flip, gs)
			quadRowGeneric(x, hw, n16, c4, want, plane, flip, ws)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s QuadRow %v: out[%d] = %#x, want %#x", k.Family, sh, i, got[i], want[i])
				}
			}
			for i := range gs {
				if gs[i] != ws[i] {
					t.Fatalf("%s QuadRow %v: sums[%d] = %d, want %d", k.Family, sh, i, gs[i], ws[i])
				}
			}
		}
	}
}
