package cast

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// refF16 rounds f to float16 through float64 arithmetic (nearest, ties to
// even), independent of F16Bits' bit manipulation; NaN as F16Bits keeps it.
func refF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		h := uint16(b>>13) & 0x3ff
		return sign | 0x7c00 | max(h, 1)
	}
	a := math.Abs(float64(f))
	if a >= 65520 {
		return sign | 0x7c00
	}
	// the spacing of float16 values at a: 2^-24 below 2^-14, else 2^(e-10)
	e := max(math.Floor(math.Log2(a)), -14)
	if a == 0 {
		e = -14
	}
	q := math.RoundToEven(a / math.Exp2(e-10)) // a multiple of the spacing
	v := q * math.Exp2(e-10)
	if v == 0 {
		return sign
	}
	ve := max(math.Floor(math.Log2(v)), -14)
	if v < 0x1p-14 {
		return sign | uint16(v/0x1p-24)
	}
	return sign | uint16(ve+15)<<10 | uint16(v/math.Exp2(ve-10)-1024)
}

// bits is every bfloat16 pattern, then random ones, n values in all.
func bits(r *rand.Rand, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		if i < 1<<16 {
			s[i] = uint16(i)
		} else {
			s[i] = uint16(r.Uint32())
		}
	}
	return s
}

func TestCasts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 129, 1 << 16, 1<<16 + 3, 5*minChunk + 17} {
		for _, threads := range []int{1, 3} {
			old := par.Threads()
			if err := par.SetThreads(threads); err != nil {
				t.Fatal(err)
			}
			src := bits(r, n)
			f32 := make([]float32, n)
			if err := BF16ToF32(f32, src); err != nil {
				t.Fatal(err)
			}
			h := make([]uint16, n)
			if err := BF16ToF16(h, src); err != nil {
				t.Fatal(err)
			}
			for i, b := range src {
				if got, want := math.Float32bits(f32[i]), uint32(b)<<16; got != want {
					t.Fatalf("n=%d: BF16ToF32(%#04x) = %#08x, want %#08x", n, b, got, want)
				}
				if got, want := h[i], refF16(math.Float32frombits(uint32(b)<<16)); got != want {
					t.Fatalf("n=%d: BF16ToF16(%#04x) = %#04x, want %#04x", n, b, got, want)
				}
			}
			// random float32 bit patterns, and values near float16 ties
			x := make([]float32, n)
			for i := range x {
				if i%2 == 0 {
					x[i] = math.Float32frombits(r.Uint32())
				} else {
					x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(44)-28)))
				}
			}
			if err := F32ToF16(h, x); err != nil {
				t.Fatal(err)
			}
			for i, f := range x {
				if got, want := h[i], refF16(f); got != want {
					t.Fatalf("n=%d: F32ToF16(%#08x) = %#04x, want %#04x", n, math.Float32bits(f), got, want)
				}
			}
			if err := par.SetThreads(old); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestF16Ties checks the values halfway between two float16 values (ties
// to even) and the overflow and underflow edges.
func TestF16Ties(t *testing.T) {
	var cases []float32
	for h := 0; h < 0x7bff; h++ {
		lo := float64(f16Value(uint16(h)))
		hi := float64(f16Value(uint16(h + 1)))
		cases = append(cases, float32((lo+hi)/2), float32(lo), -float32((lo+hi)/2))
	}
	cases = append(cases, 65504, 65519.99, 65520, 0x1p-25, 0x1.000002p-25, 0x1p-26, float32(math.Inf(1)))
	for _, f := range cases {
		if got, want := F16Bits(f), refF16(f); got != want {
			t.Fatalf("F16Bits(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

// f16Value is the value of finite float16 bits h (a test helper).
func f16Value(h uint16) float32 {
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	v := m * 0x1p-24
	if e > 0 {
		v = (1024 + m) * math.Exp2(float64(e-25))
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return float32(v)
}

func TestLengthMismatch(t *testing.T) {
	if err := BF16ToF32(make([]float32, 2), make([]uint16, 3)); err == nil {
		t.Fatal("BF16ToF32 accepted 3 values into 2")
	}
	if err := BF16ToF16(make([]uint16, 4), make([]uint16, 3)); err == nil {
		t.Fatal("BF16ToF16 accepted 3 values into 4")
	}
	if err := F32ToF16(make([]uint16, 1), make([]float32, 3)); err == nil {
		t.Fatal("F32ToF16 accepted 3 values into 1")
	}
}

// TestWidenFamilies compares every registered widening kernel with the
// generic loop on odd lengths and misaligned starts, all bit patterns.
func TestWidenFamilies(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fams := WidenOp.Families()
	if len(fams) < 2 {
		t.Logf("only %v registered here", fams)
	}
	for _, f := range fams {
		widen, ok := WidenOp.Impl(f)
		if !ok {
			continue // registered but not usable on this CPU
		}
		t.Logf("family %s", f)
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 1000, 4131} {
			off := r.IntN(8)
			src := bits(r, n+off)[off:]
			for i := range src { // every pattern, shuffled in
				src[i] = uint16(r.Uint32())
			}
			want := make([]float32, n)
			bf16ToF32(want, src)
			buf := make([]float32, n+off+1)
			got := buf[off : off+n]
			buf[off+n] = 7 // past the end: left alone
			widen(got, src)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d: value %d (%#04x) = %#08x, want %#08x", f, n, i, src[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
			if buf[off+n] != 7 {
				t.Fatalf("%s n=%d: wrote past the end", f, n)
			}
		}
	}
}

// TestNarrowFamilies compares every registered bfloat16 -> float16 kernel
// with the generic lookup on odd lengths, tails and misaligned starts: all
// 65536 patterns (NaNs with every payload and sign, Infs, subnormals,
// overflow) in order and shuffled, random runs, and runs of one NaN amid
// ordinary values (the fix-up taken for one lane).
func TestNarrowFamilies(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fams := NarrowOp.Families()
	if len(fams) < 2 {
		t.Logf("only %v registered here", fams)
	}
	all := bits(r, 1<<16)
	shuffled := append([]uint16(nil), all...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	type input struct {
		name string
		src  func(n int) []uint16
	}
	random := func(n int) []uint16 {
		s := make([]uint16, n)
		for i := range s {
			s[i] = uint16(r.Uint32())
		}
		return s
	}
	inputs := []input{
		{"every pattern", func(n int) []uint16 { return all[:min(n, len(all))] }},
		{"shuffled", func(n int) []uint16 { return shuffled[len(shuffled)-min(n, len(shuffled)):] }},
		{"random", random},
		{"one NaN", func(n int) []uint16 {
			s := make([]uint16, n)
			for i := range s { // ordinary values: |x| in [2^-32, 2^32)
				s[i] = uint16(r.IntN(2))<<15 | uint16(95+r.IntN(64))<<7 | uint16(r.IntN(128))
			}
			if n > 0 {
				s[r.IntN(n)] = 0x7f81 | uint16(r.IntN(2))<<15 | uint16(r.IntN(127))
			}
			return s
		}},
	}
	for _, f := range fams {
		k, ok := NarrowOp.Impl(f)
		if !ok {
			continue
		}
		narrow := k.BF16
		t.Logf("family %s", f)
		for _, in := range inputs {
			for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 1000, 4131, 1 << 16} {
				src := in.src(n)
				off := r.IntN(8)
				s := make([]uint16, len(src)+off)[off:]
				copy(s, src)
				want := make([]uint16, len(s))
				bf16ToF16(want, s)
				buf := make([]uint16, len(s)+off+1)
				got := buf[off : off+len(s)]
				buf[off+len(s)] = 7 // past the end: left alone
				narrow(got, s)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s %s n=%d: value %d (%#04x) = %#04x, want %#04x", f, in.name, len(s), i, s[i], got[i], want[i])
					}
				}
				if buf[off+len(s)] != 7 {
					t.Fatalf("%s %s n=%d: wrote past the end", f, in.name, len(s))
				}
			}
		}
	}
}

// BenchmarkNarrow times each family's bfloat16 -> float16 kernel on one
// thread, 1M random values.
func BenchmarkNarrow(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	src := make([]uint16, 1<<20)
	for i := range src {
		src[i] = uint16(r.IntN(2))<<15 | uint16(95+r.IntN(64))<<7 | uint16(r.IntN(128))
	}
	dst := make([]uint16, len(src))
	x := make([]float32, len(src))
	bf16ToF32(x, src)
	for _, f := range NarrowOp.Families() {
		k, _ := NarrowOp.Impl(f)
		b.Run(string(f)+"/bf16", func(b *testing.B) {
			b.SetBytes(int64(2 * len(src)))
			for b.Loop() {
				k.BF16(dst, src)
			}
		})
		b.Run(string(f)+"/f32", func(b *testing.B) {
			b.SetBytes(int64(4 * len(src)))
			for b.Loop() {
				k.F32(dst, x)
			}
		})
	}
}

// TestNarrowF32Families compares every registered float32 -> float16
// kernel with the generic F16Bits loop on odd lengths, tails and misaligned
// starts: random bit patterns (NaNs among them, with payloads only in the
// low 13 bits too), values near float16's ties, overflow and subnormal
// edges, and runs of one NaN amid ordinary values.
func TestNarrowF32Families(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	fams := NarrowOp.Families()
	if len(fams) < 2 {
		t.Logf("only %v registered here", fams)
	}
	nan := func() float32 { // any NaN: exponent all ones, mantissa not 0
		return math.Float32frombits(uint32(r.IntN(2))<<31 | 0x7f800000 | (1 + uint32(r.IntN(0x7fffff))))
	}
	inputs := []struct {
		name string
		val  func(i int) float32
	}{
		{"bits", func(int) float32 { return math.Float32frombits(r.Uint32()) }},
		{"NaN payloads", func(i int) float32 {
			if i%2 == 0 { // payload below the half's mantissa: numpy's 0x7c01
				return math.Float32frombits(uint32(r.IntN(2))<<31 | 0x7f800000 | (1 + uint32(r.IntN(0x1fff))))
			}
			return nan()
		}},
		{"ties and edges", func(i int) float32 {
			switch i % 4 {
			case 0:
				h := uint16(r.IntN(0x7bff))
				return float32((float64(f16Value(h))+float64(f16Value(h+1)))/2) * float32(1-2*r.IntN(2))
			case 1:
				return []float32{65504, 65519.99, 65520, 0x1p-25, 0x1.000002p-25, 0x1p-26, 0, float32(math.Inf(-1))}[r.IntN(8)]
			}
			return float32(r.NormFloat64() * math.Exp2(float64(r.IntN(44)-28)))
		}},
		{"one NaN", func(i int) float32 {
			if r.IntN(64) == 0 {
				return nan()
			}
			return float32(r.NormFloat64())
		}},
	}
	for _, f := range fams {
		k, ok := NarrowOp.Impl(f)
		if !ok {
			continue
		}
		t.Logf("family %s", f)
		for _, in := range inputs {
			for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 1000, 4131, 1 << 16} {
				off := r.IntN(8)
				x := make([]float32, n+off)[off:]
				for i := range x {
					x[i] = in.val(i)
				}
				want := make([]uint16, n)
				f32ToF16(want, x)
				buf := make([]uint16, n+off+1)
				got := buf[off : off+n]
				buf[off+n] = 7 // past the end: left alone
				k.F32(got, x)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s %s n=%d: value %d (%#08x) = %#04x, want %#04x", f, in.name, n, i, math.Float32bits(x[i]), got[i], want[i])
					}
				}
				if buf[off+n] != 7 {
					t.Fatalf("%s %s n=%d: wrote past the end", f, in.name, n)
				}
			}
		}
	}
}
