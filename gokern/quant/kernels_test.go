package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// Every family's kernels against the generic ones, bit for bit, on random
// data with special values: lengths 0..100 and a few large ones (odd tails
// for every block size), ties at k+0.5, ±0, NaN and ±Inf at random places
// (the first bad index must match), extreme scales, every clamp range.

// kernelLengths are the lengths every kernel is run at.
var kernelLengths = func() []int {
	var ns []int
	for n := 0; n <= 100; n++ {
		ns = append(ns, n)
	}
	return append(ns, 127, 128, 129, 255, 256, 1000, 4095, 4096, 4097, 10007)
}()

// specialMode says which special values a random vector gets.
type specialMode int

const (
	plain     specialMode = iota // finite values only
	withZeros                    // many ±0 and ties
	withInf                      // some ±Inf
	withNaN                      // some NaN (and ±Inf)
	numModes
)

func (m specialMode) String() string {
	return [...]string{"plain", "zeros", "inf", "nan"}[m]
}

// randVec returns n values of scale about mag: uniform, ties k+0.5 (of
// the unit scale), ±0, and in the modes that have them ±Inf and NaNs (with
// distinct payloads) at random positions.
func randVec(r *rand.Rand, n int, mag float32, mode specialMode) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(8) {
		case 0:
			x[i] = float32(r.IntN(41)-20) + 0.5
		case 1:
			if mode == withZeros || r.IntN(4) == 0 {
				x[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
			} else {
				x[i] = float32(r.IntN(300) - 150)
			}
		default:
			x[i] = float32(r.NormFloat64()) * mag
		}
	}
	if n > 0 {
		k := r.IntN(3)
		if mode >= withInf {
			for j := 0; j <= k; j++ {
				x[r.IntN(n)] = float32(math.Inf(r.IntN(2)*2 - 1))
			}
		}
		if mode == withNaN {
			for j := 0; j <= k; j++ {
				x[r.IntN(n)] = math.Float32frombits(0x7fc00000 | uint32(r.IntN(1<<20)) | uint32(r.IntN(2))<<31)
			}
		}
	}
	return x
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// forSIMD runs fn for every non-generic family of op registered and usable here.
func forSIMD[T any](t *testing.T, op *cpu.Op[T], fn func(t *testing.T, f cpu.Family, k T)) {
	n := 0
	for _, f := range op.Families() {
		if f == cpu.Generic {
			continue
		}
		k, _ := op.Impl(f)
		n++
		t.Run(string(f), func(t *testing.T) { fn(t, f, k) })
	}
	if n == 0 {
		t.Logf("%s: no SIMD family usable here: generic only", op.Name())
	}
}

func TestMinMaxKernelsAgainstGeneric(t *testing.T) {
	forSIMD(t, MinMaxOp, func(t *testing.T, f cpu.Family, k *MinMaxKernels) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, n := range append(kernelLengths, 100000) {
			for mode := range numModes {
				for rep := 0; rep < 3; rep++ {
					x := randVec(r, n, 10, mode)
					if rep == 2 && n > 0 { // all positive: the minimum is a zero of either sign
						for i := range x {
							x[i] = float32(math.Abs(float64(x[i])))
							if r.IntN(3) == 0 && mode == withZeros {
								x[i] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
							}
						}
					}
					gmn, gmx, gnan, ginf := minMaxRunGeneric(x)
					mn, mx, nan, inf := k.Run(x)
					if math.Float32bits(mn) != math.Float32bits(gmn) || math.Float32bits(mx) != math.Float32bits(gmx) || nan != gnan || inf != ginf {
						t.Fatalf("Run n=%d %s: got (%v %v %d %d), generic (%v %v %d %d)", n, mode, mn, mx, nan, inf, gmn, gmx, gnan, ginf)
					}
					// Row onto running values that hold NaN, ±0 and ±Inf themselves.
					a, b := randVec(r, n, 10, mode), randVec(r, n, 10, mode)
					ga, gb := append([]float32(nil), a...), append([]float32(nil), b...)
					gbad := minMaxRowGeneric(x, ga, gb)
					bad := k.Row(x, a, b)
					if bad != gbad || sameBits(a, ga) >= 0 || sameBits(b, gb) >= 0 {
						t.Fatalf("Row n=%d %s: bad %d (generic %d), mn differs at %d, mx at %d", n, mode, bad, gbad, sameBits(a, ga), sameBits(b, gb))
					}
				}
			}
		}
	})
}

// clamps are the ranges tested: int8, uint8, int4, uint4 and reduced
// ones, with the NaN codes the callers use and others.
var clamps = []Clamp{
	{-128, 127, 127}, {-128, 127, 0}, {0, 255, 255}, {0, 255, 0},
	{-8, 7, 7}, {-8, 7, 0}, {0, 15, 15}, {0, 15, 0},
	{-127, 127, 0}, {0, 127, 64}, {3, 9, 3}, {-64, 63, -64},
}

// scalesFor are the quantization scales tested: ordinary, tiny (the
// reciprocal overflows to +Inf, so 0 * inv is NaN), huge, subnormal.
var testScales = []float32{1, 0.1, 0.00214854861, 1.5, 3e-3, 1e-30, 1e30, 1e-45, 1e-39, 7}

func invOf(s float32) float32 { return float32(1) / s }

func TestQuantizeKernelsAgainstGeneric(t *testing.T) {
	forSIMD(t, QuantizeOp, func(t *testing.T, f cpu.Family, k *QuantizeKernels) {
		r := rand.New(rand.NewPCG(3, 4))
		zps := []int32{0, 1, -1, 127, 128, -128, 255, 5, -300, 1 << 20, math.MaxInt32, math.MinInt32}
		for _, n := range kernelLengths {
			for mode := range numModes {
				for _, c := range clamps {
					sc := testScales[r.IntN(len(testScales))]
					mag := float32(r.IntN(4)) * 40 * sc
					x := randVec(r, n, mag, mode)
					zp := zps[r.IntN(len(zps))]
					if r.IntN(2) == 0 {
						zp = c.QMin + r.Int32N(c.QMax-c.QMin+1)
					}
					got, want := make([]byte, n), make([]byte, n)
					gb := quantRunGeneric(x, invOf(sc), zp, c, want)
					b := k.Run(x, invOf(sc), zp, c, got)
					if b != gb || string(got) != string(want) {
						t.Fatalf("Run n=%d %s clamp %v scale %g zp %d: bad %d (generic %d), codes %v, generic %v", n, mode, c, sc, zp, b, gb, got, want)
					}
					inv, zr := make([]float32, n), make([]int32, n)
					for i := range inv {
						inv[i] = invOf(testScales[r.IntN(len(testScales))])
						zr[i] = c.QMin + r.Int32N(c.QMax-c.QMin+1)
						if r.IntN(8) == 0 {
							zr[i] = zps[r.IntN(len(zps))]
						}
					}
					gb = quantRowGeneric(x, inv, zr, c, want)
					b = k.Row(x, inv, zr, c, got)
					if b != gb || string(got) != string(want) {
						t.Fatalf("Row n=%d %s clamp %v: bad %d (generic %d), codes %v, generic %v", n, mode, c, b, gb, got, want)
					}
				}
			}
			codes := make([]byte, n)
			for i := range codes {
				codes[i] = byte(r.Uint32())
			}
			got, want := make([]byte, (n+1)/2), make([]byte, (n+1)/2)
			pack4Generic(codes, want)
			k.Pack4(codes, got)
			if string(got) != string(want) {
				t.Fatalf("Pack4 n=%d: %v, generic %v", n, got, want)
			}
		}
	})
}

func TestDequantizeKernelsAgainstGeneric(t *testing.T) {
	forSIMD(t, DequantizeOp, func(t *testing.T, f cpu.Family, k *DequantizeKernels) {
		r := rand.New(rand.NewPCG(5, 6))
		zps := []int32{0, 1, -1, 127, 128, -128, 255, 5, -300, 1 << 25, math.MaxInt32, math.MinInt32}
		for _, n := range kernelLengths {
			q := make([]byte, n)
			for i := range q {
				q[i] = byte(r.Uint32())
			}
			sc, zp := testScales[r.IntN(len(testScales))], zps[r.IntN(len(zps))]
			scs, zr := make([]float32, n), make([]int32, n)
			for i := range scs {
				scs[i], zr[i] = testScales[r.IntN(len(testScales))], zps[r.IntN(len(zps))]
			}
			for _, tc := range []struct {
				name      string
				run, runG func([]byte, float32, int32, []float32)
				row, rowG func([]byte, []float32, []int32, []float32)
			}{
				{"i8", k.RunI8, dequantRunI8Generic, k.RowI8, dequantRowI8Generic},
				{"u8", k.RunU8, dequantRunU8Generic, k.RowU8, dequantRowU8Generic},
			} {
				got, want := make([]float32, n), make([]float32, n)
				tc.runG(q, sc, zp, want)
				tc.run(q, sc, zp, got)
				if i := sameBits(got, want); i >= 0 {
					t.Fatalf("Run%s n=%d scale %g zp %d: [%d] %v, generic %v", tc.name, n, sc, zp, i, got[i], want[i])
				}
				tc.rowG(q, scs, zr, want)
				tc.row(q, scs, zr, got)
				if i := sameBits(got, want); i >= 0 {
					t.Fatalf("Row%s n=%d: [%d] %v, generic %v", tc.name, n, i, got[i], want[i])
				}
			}
			for _, signed := range []bool{false, true} {
				src := q[:(n+1)/2]
				got, want := make([]byte, n), make([]byte, n)
				unpack4Generic(src, signed, want)
				k.Unpack4(src, signed, got)
				if string(got) != string(want) {
					t.Fatalf("Unpack4 n=%d signed=%v: %v, generic %v", n, signed, got, want)
				}
			}
		}
	})
}

// Benchmarks: go test -run XXX -bench Kernel ./gokern/quant/ (one thread;
// 16M float32 per call).

const benchN = 16 << 20

func benchFamilies[T any](b *testing.B, op *cpu.Op[T], bytesPer int, fn func(k T)) {
	for _, f := range op.Families() {
		k, _ := op.Impl(f)
		b.Run(string(f), func(b *testing.B) {
			b.SetBytes(int64(bytesPer))
			for i := 0; i < b.N; i++ {
				fn(k)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchN, "ns/elem")
		})
	}
}

func benchData() []float32 {
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, benchN)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func BenchmarkKernelMinMaxRun(b *testing.B) {
	x := benchData()
	benchFamilies(b, MinMaxOp, 4*benchN, func(k *MinMaxKernels) { k.Run(x) })
}

func BenchmarkKernelMinMaxRow(b *testing.B) {
	x := benchData()
	mn, mx := make([]float32, 4096), make([]float32, 4096)
	benchFamilies(b, MinMaxOp, 4*benchN, func(k *MinMaxKernels) {
		for i := 0; i < benchN; i += 4096 {
			k.Row(x[i:i+4096], mn, mx)
		}
	})
}

func BenchmarkKernelQuantizeRun(b *testing.B) {
	x := benchData()
	dst := make([]byte, benchN)
	c := Clamp{-128, 127, 127}
	benchFamilies(b, QuantizeOp, 5*benchN, func(k *QuantizeKernels) { k.Run(x, 37.5, 3, c, dst) })
}

func BenchmarkKernelQuantizeRow(b *testing.B) {
	x := benchData()
	dst := make([]byte, benchN)
	inv, zp := make([]float32, 4096), make([]int32, 4096)
	for i := range inv {
		inv[i], zp[i] = float32(30+i%7), int32(i%5)
	}
	c := Clamp{0, 255, 255}
	benchFamilies(b, QuantizeOp, 5*benchN, func(k *QuantizeKernels) {
		for i := 0; i < benchN; i += 4096 {
			k.Row(x[i:i+4096], inv, zp, c, dst[i:i+4096])
		}
	})
}

func BenchmarkKernelDequantizeRun(b *testing.B) {
	q := make([]byte, benchN)
	for i := range q {
		q[i] = byte(i * 7)
	}
	out := make([]float32, benchN)
	for _, s := range []bool{true, false} {
		b.Run(fmt.Sprintf("signed=%v", s), func(b *testing.B) {
			benchFamilies(b, DequantizeOp, 5*benchN, func(k *DequantizeKernels) {
				if s {
					k.RunI8(q, 0.03, 3, out)
				} else {
					k.RunU8(q, 0.03, 3, out)
				}
			})
		})
	}
}

func TestHistogramKernelsAgainstGeneric(t *testing.T) {
	forSIMD(t, HistogramOp, func(t *testing.T, f cpu.Family, k HistogramKernel) {
		r := rand.New(rand.NewPCG(9, 10))
		ranges := [][2]float32{{0, 4}, {-2.5, 7.25}, {-1e-3, 3e-3}, {0, 1}, {-3e38, 3e38}, {1, 1}, {2, 1}, {-1e30, 1e30}, {0.1, 0.7}}
		for _, n := range append(kernelLengths, 100000) {
			for mode := range numModes {
				lh := ranges[r.IntN(len(ranges))]
				nb := []int{1, 2, 3, 7, 256, 777, 2048}[r.IntN(7)]
				x := randVec(r, n, (lh[1]-lh[0])/2, mode)
				// Values on and next to the bin edges, where the float32
				// operation order decides the bin.
				w := lh[1] - lh[0]
				for i := range x {
					if r.IntN(3) == 0 {
						e := lh[0] + w*float32(r.IntN(nb+1))/float32(nb)
						for s := r.IntN(5) - 2; s != 0; s -= sign(s) {
							e = math.Nextafter32(e, float32(math.Inf(sign(s))))
						}
						x[i] = e
					}
				}
				for _, absolute := range []bool{false, true} {
					if math.IsInf(float64(w), 0) || w == 0 {
						continue // NaN bins: the generic kernel panics; its caller never asks
					}
					got, want := make([]int64, nb), make([]int64, nb)
					gb := histogramGeneric(x, lh[0], lh[1], absolute, want)
					b := k(x, lh[0], lh[1], absolute, got)
					if b != gb {
						t.Fatalf("n=%d %s: bad %d, generic %d", n, mode, b, gb)
					}
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("n=%d %s range %v nb %d abs %v: bin %d: %d, generic %d", n, mode, lh, nb, absolute, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

func sign(s int) int {
	if s < 0 {
		return -1
	}
	return 1
}

func BenchmarkKernelHistogram(b *testing.B) {
	x := benchData()
	counts := make([]int64, 2048)
	benchFamilies(b, HistogramOp, 4*benchN, func(k HistogramKernel) { k(x, -4, 4, false, counts) })
}
