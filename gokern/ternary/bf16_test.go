package ternary

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/cpu"
)

// TestQuantizeBF16 checks QuantizeBF16 against Quantize of the widened
// values on every family (generic included): random bfloat16 bit patterns
// mixed with NaN, ±Inf, subnormals and ±0, odd sizes and block sizes, both
// methods, with and without the finiteness check.
func TestQuantizeBF16(t *testing.T) {
	fams := append([]cpu.Family{cpu.Generic}, simdFamilies()...)
	specials := []uint16{0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x0001, 0x807f, 0x7f7f}
	for _, f := range fams {
		q := generic
		if f != cpu.Generic {
			q = quantizer(f)
		}
		r := rand.New(rand.NewPCG(11, uint64(len(f))))
		for _, n := range []int{1, 5, 127, 129, 1000, 4099, 70001, specMinValues + 37} {
			for _, bs := range []int{0, 128, 256, 96, 7} {
				for _, m := range []Method{AbsMean, AbsMax} {
					for _, special := range []bool{false, true} {
						x := make([]uint16, n)
						for i := range x {
							// normal-ish values (bf16 of N(0, 0.02)), sometimes any pattern
							v := float32(r.NormFloat64() * 0.02)
							x[i] = uint16(math.Float32bits(v) >> 16)
							if special && r.IntN(50) == 0 {
								x[i] = specials[r.IntN(len(specials))]
							} else if special && r.IntN(50) == 0 {
								x[i] = uint16(r.Uint32())
							}
						}
						w := make([]float32, n)
						for i, b := range x {
							w[i] = math.Float32frombits(uint32(b) << 16)
						}
						nb := NumBlocks(n, bs)
						for _, check := range []bool{false, true} {
							p1, s1 := make([]byte, PackedLen(n)), make([]float32, nb)
							p2, s2 := make([]byte, PackedLen(n)), make([]float32, nb)
							e1 := q.QuantizeBF16(x, bs, m, check, p1, s1)
							e2 := q.Quantize(w, bs, m, check, p2, s2)
							if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
								t.Fatalf("%s n=%d bs=%d m=%d check=%v: error %v, float32 path %v", f, n, bs, m, check, e1, e2)
							}
							if e1 != nil {
								continue
							}
							if !bytes.Equal(p1, p2) {
								t.Fatalf("%s n=%d bs=%d m=%d: packed bytes differ from the float32 path", f, n, bs, m)
							}
							for i := range s1 {
								if math.Float32bits(s1[i]) != math.Float32bits(s2[i]) {
									t.Fatalf("%s n=%d bs=%d m=%d: scale %d = %g, float32 path %g", f, n, bs, m, i, s1[i], s2[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestQuantizeBF16Errors(t *testing.T) {
	if err := QuantizeBF16(nil, 0, AbsMean, true, nil, nil); err == nil {
		t.Fatal("empty x accepted")
	}
	x := make([]uint16, 130)
	if err := QuantizeBF16(x, 0, AbsMean, true, make([]byte, 3), make([]float32, 1)); err == nil {
		t.Fatal("short packed accepted")
	}
	if err := QuantizeBF16(x, -1, AbsMean, true, make([]byte, PackedLen(130)), make([]float32, 1)); err == nil {
		t.Fatal("negative block size accepted")
	}
}

// TestQuantizeBF16Spec runs the one-pass path of QuantizeBF16 (pieces
// widened in cache) on small tensors (specMinValues lowered) whose data
// takes each of its branches: a band that holds the scale, pieces with too
// many fix-ups (uniform data, absmax), a scale outside the band (a value
// far larger than the samples saw), NaN; each against Quantize of the
// widened tensor, on every SIMD family.
func TestQuantizeBF16Spec(t *testing.T) {
	old := specMinValues
	specMinValues = 1 << 10
	defer func() { specMinValues = old }()
	r := rand.New(rand.NewPCG(12, 13))
	for _, f := range simdFamilies() {
		q := quantizer(f)
		for _, n := range []int{1 << 10, 3*specPiece*GroupValues + 77, 5*specPiece*GroupValues + 128, 200001} {
			for _, kind := range []string{"normal", "uniform", "outlier", "nan"} {
				for _, m := range []Method{AbsMean, AbsMax} {
					x := make([]uint16, n)
					for i := range x {
						v := float32(r.NormFloat64() * 0.02)
						if kind == "uniform" {
							v = float32(r.Float64()*2 - 1)
						}
						x[i] = uint16(math.Float32bits(v) >> 16)
					}
					switch kind {
					case "outlier": // a value between the sampled runs, far larger: the mean leaves the band
						runs, l := sampleRuns(n)
						i := runStart(n, l, 0, runs) + l
						x[i] = uint16(math.Float32bits(float32(1e6*float64(n))) >> 16)
					case "nan":
						x[r.IntN(n)] = 0x7fc0
					}
					w := make([]float32, n)
					for i, b := range x {
						w[i] = math.Float32frombits(uint32(b) << 16)
					}
					for _, check := range []bool{false, true} {
						p1, s1 := make([]byte, PackedLen(n)), make([]float32, 1)
						p2, s2 := make([]byte, PackedLen(n)), make([]float32, 1)
						e1 := q.QuantizeBF16(x, 0, m, check, p1, s1)
						e2 := q.Quantize(w, 0, m, check, p2, s2)
						if (e1 == nil) != (e2 == nil) || (e1 != nil && e1.Error() != e2.Error()) {
							t.Fatalf("%s n=%d %s m=%d check=%v: error %v, float32 path %v", f, n, kind, m, check, e1, e2)
						}
						if e1 != nil {
							continue
						}
						if !bytes.Equal(p1, p2) || math.Float32bits(s1[0]) != math.Float32bits(s2[0]) {
							t.Fatalf("%s n=%d %s m=%d check=%v: bytes or scale (%g, %g) differ from the float32 path", f, n, kind, m, check, s1[0], s2[0])
						}
					}
				}
			}
		}
	}
}

// BenchmarkQuantizeBF16 quantizes a 2048x5632 bfloat16 weight (one scale,
// absmean: a checkpoint's MLP projection) and, for comparison, its float32
// widening.
func BenchmarkQuantizeBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 2048 * 5632
	x := make([]uint16, n)
	w := make([]float32, n)
	for i := range x {
		x[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
		w[i] = math.Float32frombits(uint32(x[i]) << 16)
	}
	packed, scales := make([]byte, PackedLen(n)), make([]float32, 1)
	b.Run("bf16", func(b *testing.B) {
		b.SetBytes(int64(2 * n))
		for b.Loop() {
			if err := QuantizeBF16(x, 0, AbsMean, true, packed, scales); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("widen+f32", func(b *testing.B) { // the path of a tensor widened whole
		b.SetBytes(int64(2 * n))
		for b.Loop() {
			if err := cast.BF16ToF32(w, x); err != nil {
				b.Fatal(err)
			}
			if err := Quantize(w, 0, AbsMean, true, packed, scales); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("f32", func(b *testing.B) {
		b.SetBytes(int64(2 * n))
		for b.Loop() {
			if err := Quantize(w, 0, AbsMean, true, packed, scales); err != nil {
				b.Fatal(err)
			}
		}
	})
}
