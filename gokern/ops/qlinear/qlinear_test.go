package qlinear

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/par"
)

// families returns every registered family's kernels usable here.
func families(t *testing.T) []*Kernels {
	t.Helper()
	var out []*Kernels
	for _, f := range KernelOp.Families() {
		if k, ok := KernelOp.Impl(f); ok {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		t.Fatal("no kernels")
	}
	return out
}

// refOut is the plain int64 reference of one output (package comment).
func refOut(raw int64, bias []float32, n int, sa float32, sw []float32, o Output) byte {
	s := sw[0]
	if len(sw) > 1 {
		s = sw[n]
	}
	atw := sa * s
	rf := float32(int32(raw))
	if bias != nil {
		if len(sw) == 1 {
			rf += bias[n] * float32(1/float64(atw))
		} else {
			rf += bias[n] / atw
		}
	}
	v := math.RoundToEven(float64(rf*(atw/o.Scale))) + float64(o.Zero)
	lo, hi := 0.0, 255.0
	if o.Signed {
		lo, hi = -128, 127
	}
	if o.Relu {
		lo = math.Max(lo, float64(o.Zero))
	}
	return byte(int32(math.Max(lo, math.Min(hi, v))))
}

func code(b byte, signed bool) int64 {
	if signed {
		return int64(int8(b))
	}
	return int64(b)
}

func randCodes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

func TestLinearMatchesReference(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range families(t) {
		for c := 0; c < 40; c++ {
			M, N, K := 1+r.IntN(9), 1+r.IntN(21), 1+r.IntN(200)
			if c%7 == 0 {
				K = 64 * (1 + r.IntN(3))
			}
			signed := c%3 == 1
			perChan := c%2 == 0
			x := Act{Data: randCodes(r, M*K), Signed: signed, Scale: 0.01 + r.Float32(), Zero: int32(r.IntN(256))}
			if signed {
				x.Zero -= 128
			}
			nq := 1
			if perChan {
				nq = N
			}
			w := Weight{Data: randCodes(r, N*K), Scales: make([]float32, nq), Zeros: make([]int32, nq)}
			for i := range w.Scales {
				w.Scales[i] = 0.001 + r.Float32()*0.1
				w.Zeros[i] = int32(r.IntN(256)) - 128
			}
			var bias []float32
			if c%4 != 3 {
				bias = make([]float32, N)
				for i := range bias {
					bias[i] = float32(r.NormFloat64() * 3)
				}
			}
			o := Output{Scale: 0.05 + r.Float32(), Zero: int32(r.IntN(256)), Signed: signed, Relu: c%5 == 0}
			if signed {
				o.Zero -= 128
			}
			out := make([]byte, M*N)
			if _, err := Linear(k, M, N, K, x, w, bias, o, out); err != nil {
				t.Fatal(err)
			}
			for m := 0; m < M; m++ {
				for n := 0; n < N; n++ {
					zw := int64(w.Zeros[0])
					if perChan {
						zw = int64(w.Zeros[n])
					}
					var raw int64
					for i := 0; i < K; i++ {
						raw += (code(x.Data[m*K+i], signed) - int64(x.Zero)) * (int64(int8(w.Data[n*K+i])) - zw)
					}
					if want := refOut(raw, bias, n, x.Scale, w.Scales, o); out[m*N+n] != want {
						t.Fatalf("%s case %d (M=%d N=%d K=%d): out[%d,%d] = %d, want %d", k.Family, c, M, N, K, m, n, out[m*N+n], want)
					}
				}
			}
		}
	}
}

func TestConvMatchesReference(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range families(t) {
		for c := 0; c < 20; c++ {
			g := 1 + r.IntN(3)
			s := ConvShape{N: 1 + r.IntN(2), C: g * (1 + r.IntN(4)), H: 3 + r.IntN(20), W: 3 + r.IntN(20), O: g * (1 + r.IntN(6)),
				KH: 1 + r.IntN(3), KW: 1 + r.IntN(3), Groups: g, StrideH: 1 + r.IntN(2), StrideW: 1 + r.IntN(2),
				PadT: r.IntN(2), PadL: r.IntN(2), PadB: r.IntN(2), PadR: r.IntN(2), DilH: 1 + r.IntN(2), DilW: 1}
			ho, wo, err := s.Out()
			if err != nil {
				continue
			}
			signed := c%3 == 2
			x := Act{Data: randCodes(r, s.N*s.C*s.H*s.W), Signed: signed, Scale: 0.02, Zero: int32(r.IntN(256))}
			if signed {
				x.Zero -= 128
			}
			cg := s.C / g
			K := cg * s.KH * s.KW
			nq := 1
			if c%2 == 0 {
				nq = s.O
			}
			w := Weight{Data: randCodes(r, s.O*K), Scales: make([]float32, nq), Zeros: make([]int32, nq)}
			for i := range w.Scales {
				w.Scales[i] = 0.001 + r.Float32()*0.05
				w.Zeros[i] = int32(r.IntN(256)) - 128
			}
			bias := make([]float32, s.O)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			o := Output{Scale: 0.3, Zero: int32(r.IntN(100)), Signed: signed}
			out := make([]byte, s.N*s.O*ho*wo)
			if _, err := Conv2D(k, s, x, w, bias, o, out); err != nil {
				t.Fatal(err)
			}
			og := s.O / g
			for n := 0; n < s.N; n++ {
				for oc := 0; oc < s.O; oc++ {
					gi := oc / og
					zw := int64(w.Zeros[0])
					if nq > 1 {
						zw = int64(w.Zeros[oc])
					}
					for oh := 0; oh < ho; oh++ {
						for ow := 0; ow < wo; ow++ {
							var raw int64
							for ci := 0; ci < cg; ci++ {
								for kh := 0; kh < s.KH; kh++ {
									for kw := 0; kw < s.KW; kw++ {
										ih, iw := oh*s.StrideH-s.PadT+kh*s.DilH, ow*s.StrideW-s.PadL+kw*s.DilW
										a := int64(x.Zero)
										if ih >= 0 && ih < s.H && iw >= 0 && iw < s.W {
											a = code(x.Data[((n*s.C+gi*cg+ci)*s.H+ih)*s.W+iw], signed)
										}
										wv := int64(int8(w.Data[((oc*cg+ci)*s.KH+kh)*s.KW+kw]))
										raw += (a - int64(x.Zero)) * (wv - zw)
									}
								}
							}
							got := out[((n*s.O+oc)*ho+oh)*wo+ow]
							if want := refOut(raw, bias, oc, x.Scale, w.Scales, o); got != want {
								t.Fatalf("%s case %d %+v: out[%d,%d,%d,%d] = %d, want %d", k.Family, c, s, n, oc, oh, ow, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestKernelsMatchGeneric compares every family's micro-kernels with the
// generic ones on random codes (every value, full int8 range).
func TestKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range families(t) {
		for _, kb := range []int{1, 2, 3, 7} {
			lda, ldw := kb*KB+r.IntN(3)*KB, kb*KB+KB
			a := randCodes(r, 4*lda)
			w := asInt8(randCodes(r, 8*ldw))
			var got, want [16]int32
			k.Dot4x4(kb, a, lda, w, ldw, &got)
			dot4x4Generic(kb, a, lda, w, ldw, &want)
			if got != want {
				t.Fatalf("%s Dot4x4 kb=%d: %v, want %v", k.Family, kb, got, want)
			}
			var g8, w8 [8]int32
			k.Dot1x8(kb, a, w, ldw, &g8)
			dot1x8Generic(kb, a, w, ldw, &w8)
			if g8 != w8 {
				t.Fatalf("%s Dot1x8 kb=%d: %v, want %v", k.Family, kb, g8, w8)
			}
		}
		// extremes: 255 x -128 everywhere (VPMADDUBSW would saturate)
		a := make([]byte, 4*KB)
		w := make([]int8, 8*KB)
		for i := range a {
			a[i] = 255
		}
		for i := range w {
			w[i] = -128
		}
		var got [16]int32
		k.Dot4x4(1, a, KB, w, KB, &got)
		for _, v := range got {
			if v != -255*128*KB {
				t.Fatalf("%s: extreme codes give %d, want %d", k.Family, v, -255*128*KB)
			}
		}
	}
}

func TestChooseDynamic(t *testing.T) {
	for _, c := range []struct {
		mn, mx float32
		rr     bool
	}{{-1, 1, false}, {0, 0, false}, {-3, 0.5, true}, {1e-7, 2e-7, false}} {
		s, zp := ChooseDynamic(c.mn, c.mx, c.rr)
		if !(s > 0) || zp < 0 || zp > 255 {
			t.Fatalf("%v: scale %v zero point %d", c, s, zp)
		}
	}
	_ = fmt.Sprint(cpu.Generic)
}
