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

// TestSpecBandThresholds checks the premise of quantizeSpec on the float32
// values next to the thresholds: for any scale in [sLo, sHi], |x| < lo gives
// code 1 and |x| >= hi gives code 0 or 2 by sign, with the generic division.
func TestSpecBandThresholds(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for it := 0; it < 3000; it++ {
		sLo := math.Float32frombits(0x00800000 + r.Uint32N(0x7e000000))
		sHi := sLo
		if it%3 != 0 {
			sHi = math.Float32frombits(math.Float32bits(sLo) + r.Uint32N(1<<uint(r.IntN(22))))
		}
		b := newSpecBand(float64(sLo), float64(sHi))
		scales := []float32{sLo, sHi, math.Float32frombits((math.Float32bits(sLo) + math.Float32bits(sHi)) / 2)}
		for _, s := range scales {
			if !b.contains(s) {
				t.Fatalf("band %+v does not contain %v", b, s)
			}
		}
		for d := -64; d <= 64; d++ {
			for _, th := range []float32{b.lo, b.hi} {
				v := math.Float32frombits(uint32(int64(math.Float32bits(th)) + int64(d)))
				for _, x := range []float32{v, -v} {
					a := float32(math.Abs(float64(x)))
					for _, s := range scales {
						code := codeOf(x, s)
						switch {
						case a < b.lo && code != 1:
							t.Fatalf("x=%v below lo=%v (band %+v) but code(x, %v) = %d", x, b.lo, b, s, code)
						case a >= b.hi && x > 0 && code != 2, a >= b.hi && x < 0 && code != 0:
							t.Fatalf("x=%v at/above hi=%v (band %+v) but code(x, %v) = %d", x, b.hi, b, s, code)
						}
					}
				}
			}
		}
	}
}

func TestKernelsQuantSpec(t *testing.T) {
	forFamilies(t, 23, 24, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for _, kind := range []string{"normal", "wide", "special", "ties"} {
			for _, groups := range []int{0, 1, 2, 3, 5, 8, 17, 64, 300} {
				for rep := 0; rep < 4; rep++ {
					lo := float32(0.3 + 0.2*r.Float64())
					hi := lo * float32(1+0.05*r.Float64())
					switch rep {
					case 1:
						hi = lo
					case 2:
						lo, hi = 0, float32(math.Inf(1))
					}
					off := r.IntN(8)
					buf := fill(r, groups*GroupValues+off, kind, 2*lo)
					if kind == "ties" { // values on and next to ±lo and ±hi
						for i := range buf {
							th := []float32{lo, hi}[r.IntN(2)]
							v := math.Float32frombits(uint32(int64(math.Float32bits(th)) + int64(r.IntN(5)-2)))
							if r.IntN(2) == 0 {
								v = -v
							}
							buf[i] = v
						}
					}
					x := buf[off:]
					for _, capacity := range []int{groups * GroupValues, groups / 3} {
						wantDst := make([]byte, groups*GroupBytes)
						gotDst := make([]byte, groups*GroupBytes)
						for i := range gotDst {
							gotDst[i] = byte(r.Uint32())
						}
						wantEnt := make([]uint64, capacity)
						gotEnt := make([]uint64, capacity)
						o := r.Uint32()
						ws, wn := quantSpecGeneric(x, wantDst, lo, hi, o, wantEnt)
						gs, gn := k.quantSpec(x, gotDst, lo, hi, o, gotEnt)
						// The absmax twin: same codes and entries, max bits.
						wantDst2, gotDst2 := slices.Clone(wantDst), slices.Clone(gotDst)
						wantEnt2, gotEnt2 := slices.Clone(wantEnt), slices.Clone(gotEnt)
						wm, wn2 := quantSpecMaxGeneric(x, wantDst2, lo, hi, o, wantEnt2)
						gm, gn2 := k.quantSpecMax(x, gotDst2, lo, hi, o, gotEnt2)
						if wn2 != wn || gn2 != gn || (wn >= 0 && gm != wm) {
							t.Fatalf("%s %s groups=%d: max variant (%#x, %d), want (%#x, %d)", f, kind, groups, gm, gn2, wm, wn2)
						}
						if wn >= 0 && (firstDiff(wantDst2, wantDst) >= 0 || firstDiff(gotDst2, gotDst) >= 0 ||
							!slices.Equal(wantEnt2[:wn], wantEnt[:wn]) || !slices.Equal(gotEnt2[:gn], gotEnt[:gn])) {
							t.Fatalf("%s %s groups=%d: max variant codes or entries differ", f, kind, groups)
						}
						name := fmt.Sprintf("%s %s groups=%d lo=%v hi=%v cap=%d", f, kind, groups, lo, hi, capacity)
						if gn != wn {
							t.Fatalf("%s: nent %d, want %d", name, gn, wn)
						}
						if wn < 0 {
							continue
						}
						if i := firstDiff(gotDst, wantDst); i >= 0 {
							t.Fatalf("%s: byte %d = %#x, want %#x", name, i, gotDst[i], wantDst[i])
						}
						if !slices.Equal(gotEnt[:gn], wantEnt[:wn]) {
							t.Fatalf("%s: entries %x, want %x", name, gotEnt[:gn], wantEnt[:wn])
						}
						// Each entry names a code 3 and carries its value.
						for _, e := range wantEnt[:wn] {
							i := int(uint32(e) - o)
							b, sh := slot(i)
							if wantDst[b]>>sh&3 != 3 || math.Float32bits(x[i]) != uint32(e>>32) {
								t.Fatalf("%s: entry %x does not match element %d", name, e, i)
							}
						}
						cnt := max(1, len(x))
						if !sameF32(float32(gs/float64(cnt)), float32(ws/float64(cnt))) {
							t.Fatalf("%s: sum %v, want %v", name, gs, ws)
						}
					}
				}
			}
		}
	})
}

// checkAgainstRef compares one per-tensor quantization with the scalar
// reference of ternary_test.go.
func checkAgainstRef(t *testing.T, name string, x []float32, m Method, packed []byte, scales []float32) {
	t.Helper()
	wantQ, wantS := refQuantize(x, 0, m)
	if math.Float32bits(scales[0]) != math.Float32bits(wantS[0]) {
		t.Fatalf("%s: scale %v, want %v", name, scales[0], wantS[0])
	}
	want := refPack(wantQ)
	if i := firstDiff(packed, want); i >= 0 {
		t.Fatalf("%s: byte %d = %#x, want %#x", name, i, packed[i], want[i])
	}
}

// TestQuantizeSpecBands runs the one-pass path with good, wide, missed and
// exact bands, in every usable family: the result never depends on the band.
func TestQuantizeSpecBands(t *testing.T) {
	old := par.Threads()
	defer par.SetThreads(old)
	r := rand.New(rand.NewPCG(25, 26))
	for _, f := range QuantizeOp.Families() {
		q := quantizer(f)
		for _, threads := range []int{1, 2, 3} {
			par.SetThreads(threads)
			for _, n := range []int{1, 100, 128, 129, 1000, 32769, 70001, 300007} {
				for _, kind := range []string{"normal", "wide", "finite", "uneven", "uniform"} {
					x := fill(r, n, kind, 1)
					switch kind {
					case "uneven": // a loud half: the samples disagree
						for i := range x[:n/2] {
							x[i] *= 1000
						}
					case "uniform": // absmax: half of all values wait for the scale
						for i := range x {
							x[i] = float32(2*r.Float64() - 1)
						}
					}
					for _, m := range []Method{AbsMean, AbsMax} {
						_, ws := refQuantize(x, 0, m)
						s := float64(ws[0])
						var good specBand
						var ok bool
						if m == AbsMax {
							good, ok = q.absMaxBand(specSource{f32: x})
						} else {
							good, ok = q.absMeanBand(specSource{f32: x})
						}
						if !ok {
							t.Fatalf("band(n=%d %s %v) failed on finite data", n, kind, m)
						}
						bands := map[string]specBand{
							"sampled":   good,
							"exact":     newSpecBand(s, s),
							"wide":      newSpecBand(s*0.5, s*1.5), // many fix-ups, redone pieces
							"below":     newSpecBand(s*0.5, s*0.9), // missed: full requantization
							"above":     newSpecBand(s*1.1, s*2),
							"unbounded": newSpecBand(s*0.9, math.Inf(1)),
							"tiny":      newSpecBand(float64(absMeanEps), float64(absMeanEps)),
						}
						for bn, b := range bands {
							packed := make([]byte, PackedLen(n))
							for i := range packed {
								packed[i] = byte(r.Uint32())
							}
							scales := []float32{-1}
							if !q.quantizeSpecBand(specSource{f32: x}, m, b, packed, scales) {
								t.Fatalf("quantizeSpecBand failed on finite data")
							}
							checkAgainstRef(t, fmt.Sprintf("%s t%d n=%d %s %v band %s", f, threads, n, kind, m, bn), x, m, packed, scales)
						}
					}
				}
			}
		}
	}
}

// TestQuantizeSpecPath goes through Quantize with the one-pass path enabled
// for small tensors, including non-finite input (which the path hands back to
// the two-pass code for the error index).
func TestQuantizeSpecPath(t *testing.T) {
	oldMin := specMinValues
	specMinValues = 1
	defer func() { specMinValues = oldMin }()
	r := rand.New(rand.NewPCG(27, 28))
	for _, m := range []Method{AbsMean, AbsMax} {
		for _, n := range []int{1, 127, 5000, 70001, 1 << 18} {
			x := fill(r, n, "normal", 1)
			packed, scales := quantize(t, x, 0, m)
			checkAgainstRef(t, fmt.Sprintf("%v n=%d", m, n), x, m, packed, scales)
			for _, bad := range []float32{nan32, inf32, -inf32} {
				y := slices.Clone(x)
				i := r.IntN(n)
				y[i] = bad
				err := Quantize(y, 0, m, true, make([]byte, PackedLen(n)), make([]float32, 1))
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("flat index %d", i)) {
					t.Fatalf("%v n=%d %v at %d: err %v", m, n, bad, i, err)
				}
				// Unchecked: same as the two-pass result.
				p1, s1 := make([]byte, PackedLen(n)), make([]float32, 1)
				if err := Quantize(y, 0, m, false, p1, s1); err != nil {
					t.Fatal(err)
				}
				specMinValues = 1 << 62
				p2, s2 := make([]byte, PackedLen(n)), make([]float32, 1)
				if err := Quantize(y, 0, m, false, p2, s2); err != nil {
					t.Fatal(err)
				}
				specMinValues = 1
				if !sameF32(s1[0], s2[0]) || firstDiff(p1, p2) >= 0 {
					t.Fatalf("%v n=%d %v at %d: one-pass and two-pass results differ", m, n, bad, i)
				}
			}
		}
	}
}

func TestKernelsFixCodes(t *testing.T) {
	forFamilies(t, 29, 30, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		for _, count := range []int{0, 1, 5, 31, 32, 33, 100, 5000} {
			for _, scale := range scalesToTry {
				groups := 1 + r.IntN(200)
				base := GroupValues * r.IntN(4)
				packed := make([]byte, PackedLen(base+groups*GroupValues))
				for i := range packed {
					packed[i] = byte(r.Uint32())
				}
				// Entries as quantSpec makes them: by group, offsets below
				// the groups' end; values near ±scale/2 and specials.
				ent := make([]uint64, count)
				for i := range ent {
					g := i * groups / max(count, 1)
					off := g*GroupValues + r.IntN(GroupValues)
					v := scale / 2 * float32(1+1e-7*float64(r.IntN(5)-2))
					switch r.IntN(6) {
					case 0:
						v = -v
					case 1:
						v = specialValues[r.IntN(len(specialValues))]
					}
					ent[i] = uint64(math.Float32bits(v))<<32 | uint64(off)
				}
				want := slices.Clone(packed)
				fixCodesGeneric(want, ent, base, scale)
				k.fixCodes(packed, ent, base, scale)
				if i := firstDiff(packed, want); i >= 0 {
					t.Fatalf("%s count=%d scale=%v: byte %d = %#x, want %#x", f, count, scale, i, packed[i], want[i])
				}
			}
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: fixCodes accepted an entry past the packed tensor", f)
				}
			}()
			k.fixCodes(make([]byte, 32), []uint64{200}, 0, 1)
		}()
	})
}

// FuzzQuantizeSpecBand: the one-pass path against the scalar reference for
// arbitrary sizes, magnitudes and bands (lo and hi bound the scale as
// fractions of the true one; a band that misses it must still give the
// right result).
func FuzzQuantizeSpecBand(f *testing.F) {
	f.Add(uint32(1000), int64(1), 0.99, 1.01, false)
	f.Add(uint32(129), int64(2), 0.5, 2.0, true)
	f.Add(uint32(70000), int64(3), 1.1, 1.2, false)
	f.Fuzz(func(t *testing.T, n32 uint32, seed int64, lo, hi float64, absmax bool) {
		m := AbsMean
		if absmax {
			m = AbsMax
		}
		n := int(n32%100000) + 1
		if !(lo > 0 && lo <= hi && hi < 1e6) {
			t.Skip()
		}
		r := rand.New(rand.NewPCG(uint64(seed), 31))
		x := fill(r, n, "normal", 1)
		e := float64(r.IntN(60) - 30)
		for i := range x {
			x[i] *= float32(math.Exp2(e))
		}
		_, ws := refQuantize(x, 0, m)
		s := float64(ws[0])
		packed := make([]byte, PackedLen(n))
		scales := make([]float32, 1)
		if !QuantizeOp.Get().quantizeSpecBand(specSource{f32: x}, m, newSpecBand(s*lo, s*hi), packed, scales) {
			t.Fatal("quantizeSpecBand failed on finite data")
		}
		checkAgainstRef(t, fmt.Sprintf("%v n=%d band [%v, %v]", m, n, lo, hi), x, m, packed, scales)
	})
}

// TestKernelsQuantSpecBF16 checks the bfloat16 twins of the one-pass
// kernels: against the same family's float32 kernels on the widened values
// (codes, entries and reduction bit for bit: the same order) and against
// the generic bfloat16 kernels (codes and entries; the sum to float32
// rounding), on odd group counts, both entry capacities (full or not),
// values on and next to ±lo and ±hi, NaN, Inf and subnormals.
func TestKernelsQuantSpecBF16(t *testing.T) {
	forFamilies(t, 25, 26, func(f cpu.Family, k *Quantizer, r *rand.Rand) {
		specials := []uint16{0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001, 0x807f}
		for _, groups := range []int{0, 1, 2, 3, 5, 17, 64, 257} {
			for rep := 0; rep < 6; rep++ {
				// lo and hi bfloat16 values, so that x can sit on them.
				lo := math.Float32frombits(uint32(math.Float32bits(float32(0.3+0.2*r.Float64()))) &^ 0xffff)
				hi := math.Float32frombits(math.Float32bits(lo) + uint32(r.IntN(8))<<16)
				if rep == 5 {
					lo, hi = 0, float32(math.Inf(1))
				}
				off := r.IntN(8)
				buf := make([]uint16, groups*GroupValues+off)
				for i := range buf {
					v := float32(r.NormFloat64()) * 2 * lo
					switch r.IntN(8) {
					case 0, 1:
						th := []float32{lo, hi}[r.IntN(2)]
						v = math.Float32frombits(uint32(int64(math.Float32bits(th)) + int64(r.IntN(5)-2)<<16))
						if r.IntN(2) == 0 {
							v = -v
						}
					}
					buf[i] = uint16(math.Float32bits(v) >> 16)
					if rep == 4 && r.IntN(40) == 0 {
						buf[i] = specials[r.IntN(len(specials))]
					}
				}
				x := buf[off:]
				w := widen(x)
				for _, capacity := range []int{groups * GroupValues, groups / 3} {
					name := fmt.Sprintf("%s groups=%d rep=%d cap=%d", f, groups, rep, capacity)
					o := r.Uint32()
					type res struct {
						dst []byte
						ent []uint64
						red uint64 // sum bits or max bits
						n   int
					}
					run := func(bf func(dst []byte, ent []uint64) (uint64, int)) res {
						dst, ent := make([]byte, groups*GroupBytes), make([]uint64, capacity)
						red, n := bf(dst, ent)
						return res{dst, ent, red, n}
					}
					for _, mx := range []bool{false, true} {
						got := run(func(d []byte, e []uint64) (uint64, int) {
							if mx {
								m, n := k.quantSpecMaxBF16(x, d, lo, hi, o, e)
								return uint64(m), n
							}
							s, n := k.quantSpecBF16(x, d, lo, hi, o, e)
							return math.Float64bits(s), n
						})
						same := run(func(d []byte, e []uint64) (uint64, int) {
							if mx {
								m, n := k.quantSpecMax(w, d, lo, hi, o, e)
								return uint64(m), n
							}
							s, n := k.quantSpec(w, d, lo, hi, o, e)
							return math.Float64bits(s), n
						})
						want := run(func(d []byte, e []uint64) (uint64, int) {
							if mx {
								m, n := quantSpecMaxBF16Generic(x, d, lo, hi, o, e)
								return uint64(m), n
							}
							s, n := quantSpecBF16Generic(x, d, lo, hi, o, e)
							return math.Float64bits(s), n
						})
						if got.n != same.n || got.n != want.n {
							t.Fatalf("%s max=%v: nent %d, float32 kernel %d, generic %d", name, mx, got.n, same.n, want.n)
						}
						if got.n < 0 {
							continue
						}
						if got.red != same.red {
							t.Fatalf("%s max=%v: reduction %#x, float32 kernel %#x", name, mx, got.red, same.red)
						}
						if mx && got.red != want.red {
							t.Fatalf("%s: max bits %#x, generic %#x", name, got.red, want.red)
						}
						cnt := max(1, len(x))
						gs, ws := math.Float64frombits(got.red), math.Float64frombits(want.red)
						if !mx && !sameF32(float32(gs/float64(cnt)), float32(ws/float64(cnt))) {
							t.Fatalf("%s: sum %v, generic %v", name, gs, ws)
						}
						for _, other := range []res{same, want} {
							if i := firstDiff(got.dst, other.dst); i >= 0 {
								t.Fatalf("%s max=%v: byte %d = %#x, want %#x", name, mx, i, got.dst[i], other.dst[i])
							}
							if !slices.Equal(got.ent[:got.n], other.ent[:got.n]) {
								t.Fatalf("%s max=%v: entries differ", name, mx)
							}
						}
					}
				}
			}
		}
	})
}
