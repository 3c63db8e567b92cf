package ternary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// Every SIMD family compiled in and usable here is compared with the generic
// kernels (the oracle), bit for bit. Under -tags noasm, or on a CPU without
// the features, there is nothing to compare and the tests say so.

// usableFamilies returns the compiled-in families this CPU may run, best
// first.
func usableFamilies(t testing.TB) []cpu.Family {
	out := simdFamilies()
	if len(out) == 0 {
		t.Skipf("no SIMD kernels usable here (asm built: %v, best: %s)", cpu.AsmBuilt(), cpu.Best())
	}
	return out
}

// simdFamilies lists the SIMD families compiled in and usable here, best first.
func simdFamilies() []cpu.Family {
	var out []cpu.Family
	for _, f := range slices.Backward(QuantizeOp.Families()) {
		if f != cpu.Generic {
			out = append(out, f)
		}
	}
	return out
}

// quantizer returns family f's quantizer (registered for f).
// forFamilies runs fn with every usable SIMD family's quantizer, each with
// its own rng seeded (s1, s2).
func forFamilies(t *testing.T, s1, s2 uint64, fn func(f cpu.Family, k *Quantizer, r *rand.Rand)) {
	for _, f := range usableFamilies(t) {
		fn(f, quantizer(f), rand.New(rand.NewPCG(s1, s2)))
	}
}

// misaligned returns n values of the given kind (fill) starting off (0 to
// 7, drawn first) values into their buffer: the kernels see misaligned
// starts.
func misaligned(r *rand.Rand, n int, kind string, scale float32) (x []float32, off int) {
	off = r.IntN(8)
	return fill(r, n+off, kind, scale)[off : off+n], off
}

func quantizer(f cpu.Family) *Quantizer {
	q, ok := QuantizeOp.Impl(f)
	if !ok {
		panic("ternary: no " + string(f) + " quantizer")
	}
	return q
}

var (
	nan32  = float32(math.NaN())
	inf32  = float32(math.Inf(1))
	maxF32 = float32(math.MaxFloat32)
	minSub = math.Float32frombits(1)          // smallest subnormal
	maxSub = math.Float32frombits(0x007fffff) // largest subnormal
)

// specialValues are mixed into the random inputs.
var specialValues = []float32{
	0, float32(math.Copysign(0, -1)), nan32, -nan32, inf32, -inf32,
	minSub, -minSub, maxSub, -maxSub, math.SmallestNonzeroFloat32 * 3,
	maxF32, -maxF32, 1e30, -1e30, 1e-30, -1e-30,
	math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000), // other NaNs
}

// fill returns n values of the kind given: normal data, data with specials
// (finite or not), and values on and next to the quantization thresholds of
// scale.
func fill(r *rand.Rand, n int, kind string, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		switch kind {
		case "wide":
			x[i] *= float32(math.Exp2(float64(r.IntN(200) - 100)))
		case "finite":
			if r.IntN(8) == 0 {
				v := specialValues[r.IntN(len(specialValues))]
				if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
					x[i] = v
				}
			}
		case "special":
			if r.IntN(8) == 0 {
				x[i] = specialValues[r.IntN(len(specialValues))]
			}
		case "ties":
			// ±0.5*scale and its neighbours: where x/scale rounds to 0.5.
			h := scale / 2
			v := math.Float32bits(h)
			v = uint32(int64(v) + int64(r.IntN(7)-3))
			x[i] = math.Float32frombits(v)
			if r.IntN(2) == 0 {
				x[i] = -x[i]
			}
		}
	}
	return x
}

// lengths is 0..300 exhaustively plus large odd sizes.
func lengths() []int {
	var ns []int
	for n := 0; n <= 300; n++ {
		ns = append(ns, n)
	}
	return append(ns, 1023, 4097, 65537, 100003)
}

// sameF32 is bit equality, except that any NaN equals any NaN.
func sameF32(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestKernelsReductions(t *testing.T) {
	forFamilies(t, 11, 12, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for _, kind := range []string{"normal", "wide", "finite", "special"} {
			for _, n := range lengths() {
				// misaligned starts: the kernel sees buf[off:off+n]
				x, off := misaligned(r, n, kind, 1)
				ws, wb := absSumGeneric(x)
				gs, gb := k.absSum(x)
				// The float64 sum may differ in its last bits (other
				// order); what must agree is the scale it gives.
				if gb != wb || !sameF32(finishScale(AbsMean, gs, max(n, 1), 0), finishScale(AbsMean, ws, max(n, 1), 0)) {
					t.Fatalf("%s absSum %s n=%d off=%d: (%v, %d), want (%v, %d)", f, kind, n, off, gs, gb, ws, wb)
				}
				if wb >= 0 && math.Float64bits(gs) != math.Float64bits(ws) {
					t.Fatalf("%s absSum %s n=%d: non-finite sum %v, want the generic %v", f, kind, n, gs, ws)
				}
				wm, wb := absMaxGeneric(x)
				gm, gb := k.absMax(x)
				if gb != wb || math.Float32bits(gm) != math.Float32bits(wm) {
					t.Fatalf("%s absMax %s n=%d off=%d: (%v, %d), want (%v, %d)", f, kind, n, off, gm, gb, wm, wb)
				}
			}
		}
	})
}

// scalesToTry covers ordinary, floored, tiny, huge and non-finite scales.
var scalesToTry = []float32{1, 0.7978846, 3, 1e-5, 1e-8, 1.5e-38, 3e38, maxF32, inf32, nan32, 0.1, 123.456}

func TestKernelsQuantRun(t *testing.T) {
	forFamilies(t, 13, 14, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for _, kind := range []string{"normal", "wide", "special", "ties"} {
			for _, n := range lengths() {
				scale := scalesToTry[r.IntN(len(scalesToTry))]
				if kind == "ties" && (scale != scale || scale > 1e38) {
					scale = 0.7978846
				}
				if r.IntN(4) == 0 {
					scale *= float32(r.Float64()*2 + 0.5)
				}
				x, off := misaligned(r, n, kind, scale)
				// pos: group-aligned, inside a group, and near a group end.
				for _, pos := range []int{0, 128, r.IntN(128), 128 + r.IntN(128), 127, 96} {
					size := PackedLen(pos+n) + 32
					want := make([]byte, size)
					for i := range want {
						want[i] = byte(r.Uint32()) // garbage the kernel must keep
					}
					got := slices.Clone(want)
					quantRunGeneric(x, scale, pos, want)
					k.quantRun(x, scale, pos, got)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s quantRun %s n=%d off=%d pos=%d scale=%v: byte %d = %#x, want %#x",
							f, kind, n, off, pos, scale, i, got[i], want[i])
					}
				}
			}
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// TestKernelsThresholds walks x over the float32 values around ±0.5*scale
// for many scales, where the quotient's rounding decides the code.
func TestKernelsThresholds(t *testing.T) {
	forFamilies(t, 15, 16, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for it := 0; it < 2000; it++ {
			scale := math.Float32frombits(0x00800000 + r.Uint32N(0x7e800000)) // any positive normal
			if it < 64 {
				scale = math.Float32frombits(math.Float32bits(1) + uint32(it))
			}
			x := make([]float32, 0, 512)
			h := math.Float32bits(scale / 2)
			for d := -64; d < 64; d++ {
				v := math.Float32frombits(uint32(int64(h) + int64(d)))
				x = append(x, v, -v)
			}
			want := make([]byte, PackedLen(len(x)))
			got := make([]byte, len(want))
			quantRunGeneric(x, scale, 0, want)
			k.quantRun(x, scale, 0, got)
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("%s scale=%v (%#x): byte %d = %#x, want %#x", f, scale, math.Float32bits(scale), i, got[i], want[i])
			}
		}
	})
}

// TestQuantizeEachFamilyDisabled runs Quantize with all families disabled
// (generic), then with the best ones disabled in turn, and checks that every
// family agrees bit for bit with the generic result (NaN scales only as NaN).
func TestQuantizeEachFamilyDisabled(t *testing.T) {
	fams := usableFamilies(t)
	old := par.Threads()
	defer par.SetThreads(old)
	oldMin := specMinValues
	specMinValues = 4096 // the one-pass path too
	defer func() { specMinValues = oldMin }()
	r := rand.New(rand.NewPCG(17, 18))
	type result struct {
		packed []byte
		scales []float32
		err    string
	}
	run := func(q *Quantizer, x []float32, bs int, m Method, check bool) result {
		p := make([]byte, PackedLen(len(x)))
		s := make([]float32, NumBlocks(len(x), bs))
		err := q.Quantize(x, bs, m, check, p, s)
		res := result{packed: p, scales: s}
		if err != nil {
			res.err = err.Error()
		}
		return res
	}
	for _, threads := range []int{1, 2, 3} {
		par.SetThreads(threads)
		for _, n := range []int{1, 7, 128, 129, 300, 4097, 70001, 1 << 18} {
			for _, bs := range []int{0, 1, 32, 100, 128, 384, 1000, 1 << 17} {
				for _, kind := range []string{"normal", "wide", "special"} {
					for _, m := range []Method{AbsMean, AbsMax} {
						x := fill(r, n, kind, 1)
						check := kind != "special" || r.IntN(2) == 0
						// Disable the families one at a time, best first,
						// down to the generic code, and compare each
						// with the generic result.
						q, _ := QuantizeOp.Select(cpu.ParseDisable("all"))
						if q.Family() != cpu.Generic {
							t.Fatalf("family %s with all disabled", q.Family())
						}
						want := run(q, x, bs, m, check)
						for i := range fams {
							var off []string
							for _, g := range fams[:i] {
								off = append(off, string(g))
							}
							q, _ := QuantizeOp.Select(cpu.ParseDisable(strings.Join(off, ",")))
							if q.Family() != fams[i] {
								t.Fatalf("disabled %v: family %s, want %s", off, q.Family(), fams[i])
							}
							got := run(q, x, bs, m, check)
							name := fmt.Sprintf("t%d n=%d bs=%d %s %v check=%v family %s", threads, n, bs, kind, m, check, fams[i])
							if got.err != want.err {
								t.Fatalf("%s: error %q, want %q", name, got.err, want.err)
							}
							if i := firstDiff(got.packed, want.packed); i >= 0 {
								t.Fatalf("%s: byte %d = %#x, want %#x", name, i, got.packed[i], want.packed[i])
							}
							for i := range want.scales {
								if !sameF32(got.scales[i], want.scales[i]) {
									t.Fatalf("%s: scale %d = %v, want %v", name, i, got.scales[i], want.scales[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkQuantize: 16M values, per-tensor absmean and absmax and blocks
// of 256, each family, GB/s of float32 input
// (go test -run '^$' -bench Quantize ./gokern/ternary).
func BenchmarkQuantize(b *testing.B) {
	const n = 16 << 20
	x := fill(rand.New(rand.NewPCG(1, 1)), n, "normal", 1)
	packed := make([]byte, PackedLen(n))
	fams := QuantizeOp.Families()
	cases := []struct {
		bs int
		m  Method
	}{{0, AbsMean}, {0, AbsMax}, {256, AbsMean}}
	for _, tc := range cases {
		for _, f := range fams {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%v/bs%d/%s/t%d", tc.m, tc.bs, f, threads), func(b *testing.B) {
					q := quantizer(f)
					old := par.Threads()
					par.SetThreads(threads)
					defer par.SetThreads(old)
					scales := make([]float32, NumBlocks(n, tc.bs))
					b.SetBytes(4 * n)
					for b.Loop() {
						if err := q.Quantize(x, tc.bs, tc.m, true, packed, scales); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

func TestKernelsQuantBlocks(t *testing.T) {
	forFamilies(t, 19, 20, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for _, bs := range []int{1, 3, 8, 16, 24, 32, 64, 96, 128, 200, 256, 384, 1024} {
			unit := lcm(bs, GroupValues, 1<<30)
			for _, kind := range []string{"normal", "wide", "special"} {
				for _, m := range []Method{AbsMean, AbsMax} {
					for rep := 0; rep < 6; rep++ {
						blocks := r.IntN(40)
						n := blocks * bs
						if rep%2 == 1 && bs > 1 {
							n += 1 + r.IntN(bs-1) // a short last block
						}
						pos := unit * r.IntN(3)
						x := fill(r, n, kind, 1)
						size := PackedLen(pos + n)
						want := make([]byte, size)
						for i := range want {
							want[i] = byte(r.Uint32())
						}
						got := slices.Clone(want)
						nb := NumBlocks(pos+n, bs)
						if n == 0 {
							nb = pos / bs
						}
						ws := make([]float32, nb)
						gs := make([]float32, nb)
						wb := quantBlocksGeneric(x, bs, pos, m, want, ws)
						gb := k.quantBlocks(x, bs, pos, m, got, gs)
						name := fmt.Sprintf("%s bs=%d %s %v n=%d pos=%d", f, bs, kind, m, n, pos)
						if gb != wb {
							t.Fatalf("%s: bad index %d, want %d", name, gb, wb)
						}
						for i := range ws {
							if !sameF32(gs[i], ws[i]) {
								t.Fatalf("%s: scale %d = %v, want %v", name, i, gs[i], ws[i])
							}
						}
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s: byte %d = %#x, want %#x", name, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}
