package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// gemmWith computes T = A·B (m x n, row stride n) with kernel set ks the way
// gokern/ops/conv2d drives it: A packed by PackA, B packed chunk by chunk (kc
// values of k at most) into ks's micro-panels, one micro-kernel call per
// (panel, micro-panel, chunk), later chunks added. Slices handed to the
// kernels start off elements into their allocations (misaligned).
func gemmWith[T float32 | int8, A float32 | int32](ks *Kernels, q []int8, bm []T, m, n, k, kcMax, off int) []A {
	packed := make([]byte, ternary.PackedLen(m*k))
	if err := ternary.Pack(q, packed); err != nil {
		panic(err)
	}
	apan := make([]byte, ALen(m, 1, k)+off)[off:]
	if err := ks.PackA(apan, packed, m, 1, k); err != nil {
		panic(err)
	}
	nr := ks.NRF32
	var zero T
	if any(zero) == any(int8(0)) {
		nr = ks.NRI8
	}
	np := Panels(m)
	npn := (n + nr - 1) / nr
	ldt := npn*nr + 1 // wider than the tiles: exercises ldt
	t := make([]A, np*MR*ldt+off)[off:]
	buf := make([]T, kcMax*npn*nr+off)[off:]
	for k0 := 0; k0 < k; k0 += kcMax {
		kc := min(kcMax, k-k0)
		for jp := range npn {
			for kk := range kc {
				for j := range nr {
					var v T
					if c := jp*nr + j; c < n {
						v = bm[(k0+kk)*n+c]
					}
					buf[(jp*kc+kk)*nr+j] = v
				}
			}
		}
		var prepped []int8
		for jp := range npn {
			bp := buf[jp*kc*nr : (jp+1)*kc*nr]
			if b8, ok := any(bp).([]int8); ok {
				bp = any(ks.PrepareI8(b8, kc, &prepped)).([]T)
			}
			for i := range np {
				ap := apan[i*k+k0:][:kc]
				tt := t[i*MR*ldt+jp*nr:]
				switch tt := any(tt).(type) {
				case []float32:
					ks.F32(kc, ap, any(bp).([]float32), tt, ldt, k0 > 0)
				case []int32:
					ks.I8(kc, ap, any(bp).([]int8), tt, ldt, k0 > 0)
				}
			}
		}
	}
	out := make([]A, m*n)
	for r := range m {
		copy(out[r*n:(r+1)*n], t[r*ldt:][:n])
	}
	return out
}

// TestFamiliesMatchGeneric checks every SIMD family against the generic
// kernels on random shapes whose M, N and K are multiples of no tile size,
// with K split in chunks of odd lengths: int8 bit-exact, float32 bit-exact
// too (each sum runs over k in order and every product w*x is exact).
func TestFamiliesMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	shapes := []struct{ m, n, k, kc int }{
		{1, 1, 1, 1}, {1, 17, 3, 3}, {5, 15, 7, 4}, {7, 33, 27, 27}, {3, 16, 9, 5},
		{9, 47, 75, 32}, {13, 31, 129, 64}, {4, 16, 256, 256}, {6, 50, 300, 257}, {11, 3, 1001, 251},
		{5, 130, 37, 13}, {8, 64, 128, 128}, {7, 200, 262, 131}, {2, 65, 4, 4},
	}
	gen := Generic()
	tested := 0
	for _, ks := range Families() {
		if ks.Family == cpu.Generic {
			continue
		}
		tested++
		for si, s := range shapes {
			off := si % 4
			q := make([]int8, s.m*s.k)
			for i := range q {
				q[i] = int8(rng.IntN(3) - 1)
			}
			name := fmt.Sprintf("%s/%dx%dx%d/kc%d/off%d", ks.Family, s.m, s.n, s.k, s.kc, off)
			bi := make([]int8, s.k*s.n)
			for i := range bi {
				bi[i] = int8(rng.IntN(256) - 128)
			}
			if si%3 == 2 { // extremes: every x = -128
				for i := range bi {
					bi[i] = -128
				}
			}
			gi := gemmWith[int8, int32](ks, q, bi, s.m, s.n, s.k, s.kc, off)
			wi := gemmWith[int8, int32](gen, q, bi, s.m, s.n, s.k, s.kc, 0)
			if i := firstDiff(gi, wi); i >= 0 {
				t.Fatalf("%s i8: T[%d] = %d, generic %d", name, i, gi[i], wi[i])
			}
			bf := make([]float32, s.k*s.n)
			for i := range bf {
				bf[i] = rng.Float32()*2 - 1
			}
			gf := gemmWith[float32, float32](ks, q, bf, s.m, s.n, s.k, s.kc, off)
			wf := gemmWith[float32, float32](gen, q, bf, s.m, s.n, s.k, s.kc, 0)
			if i := firstDiff(gf, wf); i >= 0 {
				t.Fatalf("%s f32: T[%d] = %g, generic %g", name, i, gf[i], wf[i])
			}
		}
	}
	if cpu.AsmBuilt() && cpu.Usable(cpu.AVX2) && tested == 0 {
		t.Fatal("AVX2 usable here but no SIMD family was tested")
	}
}

func firstDiff[E comparable](a, b []E) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestDisableFamily: with each SIMD family switched off (a selection as
// BITNET_GO_DISABLE would make it) a lower family's kernels are selected
// and give the same results as the family did.
func TestDisableFamily(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	const m, n, k = 7, 37, 83
	q := make([]int8, m*k)
	for i := range q {
		q[i] = int8(rng.IntN(3) - 1)
	}
	bi := make([]int8, k*n)
	for i := range bi {
		bi[i] = int8(rng.IntN(256) - 128)
	}
	bf := make([]float32, k*n)
	for i := range bf {
		bf[i] = rng.Float32()*2 - 1
	}
	for _, ks := range Families() {
		if ks.Family == cpu.Generic {
			continue
		}
		wi := gemmWith[int8, int32](ks, q, bi, m, n, k, 64, 1)
		wf := gemmWith[float32, float32](ks, q, bf, m, n, k, 64, 1)
		cur, fam := KernelOp.Select(cpu.ParseDisable(string(ks.Family)))
		if cur.Family != fam || fam == ks.Family || cur == ks || !slices.Contains(cpu.Families, fam) ||
			slices.Index(cpu.Families, fam) < slices.Index(cpu.Families, ks.Family) {
			t.Fatalf("%s disabled: selected %s (set %s)", ks.Family, fam, cur.Family)
		}
		if got := gemmWith[int8, int32](cur, q, bi, m, n, k, 64, 3); !slices.Equal(got, wi) {
			t.Fatalf("%s disabled: i8 results differ", ks.Family)
		}
		if got := gemmWith[float32, float32](cur, q, bf, m, n, k, 64, 2); !slices.Equal(got, wf) {
			t.Fatalf("%s disabled: f32 results differ", ks.Family)
		}
	}
}

// TestSIMDShortBuffersPanic: the assembly wrappers check buffer lengths.
func TestSIMDShortBuffersPanic(t *testing.T) {
	for _, ks := range Families() {
		nb := 8 * ks.NRI8 // a whole B micro-panel (prepared, where the set prepares them)
		if ks.PanelI8 != nil {
			nb = ks.PanelI8(8)
		}
		for _, f := range []func(){
			func() {
				ks.F32(8, make([]byte, 8), make([]float32, 8*ks.NRF32-1), make([]float32, 4*ks.NRF32), ks.NRF32, false)
			},
			func() { ks.I8(8, make([]byte, 7), make([]int8, nb), make([]int32, 4*ks.NRI8), ks.NRI8, false) },
			func() { ks.I8(8, make([]byte, 8), make([]int8, nb), make([]int32, 4*ks.NRI8-1), ks.NRI8, false) },
			func() { ks.I8(8, make([]byte, 8), make([]int8, nb-1), make([]int32, 4*ks.NRI8), ks.NRI8, false) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: no panic for a short buffer", ks.Family)
					}
				}()
				f()
			}()
		}
	}
}

// TestQuantI8MatchesGeneric compares every family's QuantI8 with Quant8 on
// random values at random scales, ties, the clamp edges, ±0, ±Inf and NaN,
// for lengths around the SIMD block and misaligned slices.
func TestQuantI8MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, 127.5, -127.5, -128.5,
		127, -128, 128, -129, 1e30, -1e30, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00000)}
	for _, ks := range Families() {
		t.Logf("family %s", ks.Family)
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 96, 127, 1000} {
			for _, a := range []float32{1, 0.37, 127 / float32(0.9), 3e4} {
				for off := range 3 {
					src := make([]float32, n+off)[off:]
					for i := range src {
						switch rng.IntN(3) {
						case 0:
							src[i] = special[rng.IntN(len(special))]
						case 1:
							src[i] = float32(rng.IntN(600)-300) / 2 / a // ties after the scaling, often
						default:
							src[i] = float32(rng.NormFloat64()) * 2
						}
					}
					got := make([]int8, n+off)[off:]
					ks.QuantI8(got, src, a)
					for i, v := range src {
						if want := Quant8(v, a); got[i] != want {
							t.Fatalf("%s: QuantI8(n=%d, a=%v)[%d] for %v = %d, want %d", ks.Family, n, a, i, v, got[i], want)
						}
					}
				}
			}
		}
	}
}

// TestQuantU8MatchesGeneric checks every family's QuantU8x16, QuantU8x8 and
// QuantU8x4 (1 to 4 channels) byte for byte against Quant8 (the special values of
// TestQuantI8MatchesGeneric, ties, NaN), on row widths around the 8- and 16-pixel
// blocks, padded channel and pixel strides and misaligned buffers; bytes
// they must not write keep their stale value.
func TestQuantU8MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	special := []float32{0, 0.5, -0.5, 2.5, -2.5, 127.5, -128.5, 1e30, -1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, ks := range ConvI8Families() {
		for _, nc := range []int{16, 8, 1, 2, 3, 4} {
			width := (nc + 3) &^ 3
			for _, w := range []int{1, 7, 8, 9, 15, 16, 17, 28, 31, 32, 33, 47, 56, 61} {
				for _, a := range []float32{1, 0.37, 3e4} {
					hw, cp, off := w+rng.IntN(3)*rng.IntN(20), width+rng.IntN(3)*rng.IntN(9), rng.IntN(4)
					if nc < 4 && rng.IntN(2) == 0 {
						cp = nc // a packed row: 4-byte pixels overlapping
					}
					src := make([]float32, (nc-1)*hw+w+off)[off:]
					for i := range src {
						switch rng.IntN(4) {
						case 0:
							src[i] = special[rng.IntN(len(special))]
						case 1:
							src[i] = float32(rng.IntN(600)-300) / 2 / a
						default:
							src[i] = float32(rng.NormFloat64()) * 2
						}
					}
					dst := make([]byte, (w-1)*cp+width+off+5)[off:]
					for i := range dst {
						dst[i] = 0x5a
					}
					switch nc {
					case 16:
						ks.QuantU8x16(dst, src, hw, w, cp, a)
					case 8:
						ks.QuantU8x8(dst, src, hw, w, cp, a)
					default:
						ks.QuantU8x4(dst, src, hw, w, cp, nc, a)
					}
					want := make([]byte, len(dst)) // the bytes of width-byte pixels written in order
					for i := range want {
						want[i] = 0x5a
					}
					for x := range w {
						for c := range width {
							want[x*cp+c] = byte(Quant8(src[min(c, nc-1)*hw+x], a)) ^ 0x80
						}
					}
					for i, b := range dst {
						if want := want[i]; b != want {
							t.Fatalf("%s: nc=%d, w=%d, hw=%d, cp=%d, a=%v: byte %d = %#x, want %#x",
								ks.Family, nc, w, hw, cp, a, i, b, want)
						}
					}
				}
			}
		}
	}
}

// TestGemvMatchesGeneric compares every family's GemvF32 with a direct sum
// over the unpacked values (to float32 rounding; the int8 GEMV, op
// linear_gemv, is tested in gemv_test.go),
// for column counts around every generated kernel width, one or several
// rows (packed or with a gap between rows), padded column strides and
// misaligned buffers; then a code 3 at every position class of any row must
// be reported. Float columns are passed in gemv order.
func TestGemvMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct{ ng, cols, pad, rows int }{
		{1, 1, 0, 1}, {1, 2, 3, 3}, {2, 3, 0, 1}, {3, 4, 1, 2}, {1, 5, 0, 5}, {7, 7, 5, 1}, {2, 8, 0, 4},
		{3, 9, 2, 1}, {1, 13, 0, 2}, {40, 1, 0, 3}, {40, 8, 7, 1}, {5, 16, 0, 2}, {2, 17, 1, 1},
		{3, 1, 0, 9}, {1, 1, 2, 4}, {6, 1, 0, 8}, // one column: four rows a call
	} {
		k := tc.ng * GroupValues
		ldx := k + tc.pad
		ldw := k/4 + 32*(tc.rows%2)
		q := make([]int8, tc.rows*k)
		for i := range q {
			q[i] = int8(rng.IntN(3) - 1)
		}
		w := make([]byte, (tc.rows-1)*ldw+k/4+1)[1:] // misaligned
		for r := range tc.rows {
			if err := ternary.Pack(q[r*k:][:k], w[r*ldw:][:k/4]); err != nil {
				t.Fatal(err)
			}
		}
		lx := (tc.cols-1)*ldx + k
		x := make([]float32, lx+1)[1:]
		xg := make([]float32, lx+1)[1:] // x in gemv order
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		n := tc.rows * tc.cols
		want64 := make([]float64, n)
		mag := make([]float64, tc.cols)
		for j := range tc.cols {
			for r := range tc.rows {
				for i, v := range q[r*k:][:k] {
					want64[r*tc.cols+j] += float64(v) * float64(x[j*ldx+i])
				}
			}
			for i := range k {
				mag[j] += math.Abs(float64(x[j*ldx+i]))
			}
			GemvOrder(xg[j*ldx:][:k], x[j*ldx:][:k])
		}
		for _, ks := range Families() {
			got := make([]float32, n)
			if !ks.GemvF32(w, ldw, xg, k, ldx, tc.cols, got) {
				t.Fatalf("%s: %+v: code 3 reported in valid codes", ks.Family, tc)
			}
			for i := range n {
				j := i % tc.cols
				if math.Abs(float64(got[i])-want64[i]) > 1e-6*mag[j]+1e-6 {
					t.Errorf("%s: %+v: GemvF32 row %d column %d = %v, want %v", ks.Family, tc, i/tc.cols, j, got[i], want64[i])
				}
			}
			for _, pos := range []int{0, 31, 32, 77, 127, k - 1} {
				r := rng.IntN(tc.rows)
				bad := append([]byte(nil), w...)
				bad[r*ldw+pos/128*32+pos%32] |= 3 << (6 - 2*(pos%128/32))
				if Code3(bad[r*ldw:][:k/4]) != pos {
					t.Errorf("Code3 = %d, want %d", Code3(bad[r*ldw:][:k/4]), pos)
				}
				if ks.GemvF32(bad, ldw, xg, k, ldx, tc.cols, got) {
					t.Errorf("%s: %+v: code 3 at %d of row %d not reported", ks.Family, tc, pos, r)
				}
			}
		}
	}
}

// TestFoldMatchesGeneric: every family's FoldI32, FoldF32, FoldI32Scales
// and FoldF32Scales bit for bit
// against the generic ones (themselves against the formulas), every mode,
// lengths around the SIMD width, signed zeros among the float32 sums.
func TestFoldMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	same := func(what string, got, want []float32) {
		t.Helper()
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s [%d]: %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 16, 31, 100} {
		src := make([]int32, n)
		srcF := make([]float32, n)
		init := make([]float32, n)
		for i := range src {
			src[i] = int32(rng.IntN(1<<20) - 1<<19)
			srcF[i] = float32(rng.NormFloat64() * 100)
			init[i] = float32(rng.NormFloat64())
			if i%5 == 1 {
				srcF[i] = float32(math.Copysign(0, -1))
			}
		}
		a, sc, bias := float32(127)/float32(rng.Float64()*3+0.01), float32(rng.Float64()+0.05), float32(rng.NormFloat64())
		scs := make([]float32, n) // a scale per element (FoldI32Scales, FoldF32Scales)
		for i := range scs {
			scs[i] = float32(rng.Float64()*2 + 0.001)
		}
		for _, add := range []bool{false, true} {
			want := append([]float32(nil), init...)
			foldI32ScalesGeneric(want, src, a, scs, add)
			wantF := append([]float32(nil), init...)
			foldF32ScalesGeneric(wantF, srcF, scs, add)
			for i := range src { // the formulas, independently
				e, eF := float32(float32(float32(src[i])/a)*scs[i]), srcF[i]*scs[i]
				if add {
					e, eF = init[i]+e, init[i]+eF
				}
				if math.Float32bits(e) != math.Float32bits(want[i]) || math.Float32bits(eF) != math.Float32bits(wantF[i]) {
					t.Fatalf("fold*ScalesGeneric n=%d add=%v [%d]: %v %v, want %v %v", n, add, i, want[i], wantF[i], e, eF)
				}
			}
			for _, ks := range Families() {
				got := append([]float32(nil), init...)
				ks.FoldI32Scales(got, src, a, scs, add)
				same(fmt.Sprintf("%s: FoldI32Scales n=%d add=%v", ks.Family, n, add), got, want)
				got = append(got[:0], init...)
				ks.FoldF32Scales(got, srcF, scs, add)
				same(fmt.Sprintf("%s: FoldF32Scales n=%d add=%v", ks.Family, n, add), got, wantF)
			}
		}
		for mode := range 4 {
			add, addBias := mode&1 != 0, mode&2 != 0
			want := append([]float32(nil), init...)
			foldI32Generic(want, src, a, sc, bias, add, addBias)
			wantF := append([]float32(nil), init...)
			foldF32Generic(wantF, srcF, sc, bias, add, addBias)
			for i, v := range srcF { // the formula, independently
				e := v * sc
				if add {
					e = init[i] + e
				}
				if addBias {
					e += bias
				}
				if math.Float32bits(e) != math.Float32bits(wantF[i]) {
					t.Fatalf("foldF32Generic n=%d mode=%d [%d]: %v, want %v", n, mode, i, wantF[i], e)
				}
			}
			for _, ks := range Families() {
				got := append([]float32(nil), init...)
				ks.FoldI32(got, src, a, sc, bias, add, addBias)
				same(fmt.Sprintf("%s: FoldI32 n=%d mode=%d", ks.Family, n, mode), got, want)
				got = append(got[:0], init...)
				ks.FoldF32(got, srcF, sc, bias, add, addBias)
				same(fmt.Sprintf("%s: FoldF32 n=%d mode=%d", ks.Family, n, mode), got, wantF)
			}
		}
	}
}
