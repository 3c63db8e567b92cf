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
			checkLinear(t, k, fmt.Sprintf("case %d", c), M, N, K, x, w, bias, o)
		}
	}
}

// checkLinear runs Linear and compares every output with refLinear.
func checkLinear(t *testing.T, k *Kernels, name string, M, N, K int, x Act, w Weight, bias []float32, o Output) {
	t.Helper()
	out := make([]byte, M*N)
	if _, err := Linear(k, M, N, K, x, w, bias, o, out); err != nil {
		t.Fatal(err)
	}
	want := refLinear(M, N, K, x, w, bias, o)
	for i := range out {
		if out[i] != want[i] {
			t.Fatalf("%s %s (M=%d N=%d K=%d): out[%d,%d] = %d, want %d", k.Family, name, M, N, K, i/N, i%N, out[i], want[i])
		}
	}
}

// TestLinearKPasses: k past dotKBlocks blocks runs the 4-row dot kernels in
// passes whose sums add up (balanced passes, the K % KB tail after them,
// channels past a multiple of 4, rows past a multiple of 4, two tasks of
// channels).
func TestLinearKPasses(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ M, N, K int }{
		{4, 4, dotKBlocks*KB + KB},           // two passes, of 33 and 32 blocks
		{5, 7, 2 * dotKBlocks * KB},          // two full passes
		{8, 70, 3*dotKBlocks*KB + 2*KB + 13}, // four passes and a tail
		{7, 9, 2*dotKBlocks*KB + 1},          // the tail alone past two passes
	} {
		for _, k := range families(t) {
			x := Act{Data: randCodes(r, tc.M*tc.K), Scale: 0.02, Zero: int32(r.IntN(256))}
			w := Weight{Data: randCodes(r, tc.N*tc.K), Scales: []float32{0.003}, Zeros: []int32{int32(r.IntN(256)) - 128}}
			o := Output{Scale: 0.5 + r.Float32()*8, Zero: int32(r.IntN(256))}
			checkLinear(t, k, "k passes", tc.M, tc.N, tc.K, x, w, nil, o)
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
			want := refConv(s, x, w, bias, o)
			for i := range out {
				if out[i] != want[i] {
					t.Fatalf("%s case %d %+v: out[%d] = %d, want %d", k.Family, c, s, i, out[i], want[i])
				}
			}
		}
	}
}

// refConv is Conv2D's int64 reference (refOut per output).
func refConv(s ConvShape, x Act, w Weight, bias []float32, o Output) []byte {
	ho, wo, _ := s.Out()
	out := make([]byte, s.N*s.O*ho*wo)
	g := s.Groups
	cg, og := s.C/g, s.O/g
	for n := 0; n < s.N; n++ {
		for oc := 0; oc < s.O; oc++ {
			gi := oc / og
			zw := int64(w.Zeros[0])
			if len(w.Zeros) > 1 {
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
									a = code(x.Data[((n*s.C+gi*cg+ci)*s.H+ih)*s.W+iw], x.Signed)
								}
								wv := int64(int8(w.Data[((oc*cg+ci)*s.KH+kh)*s.KW+kw]))
								raw += (a - int64(x.Zero)) * (wv - zw)
							}
						}
					}
					out[((n*s.O+oc)*ho+oh)*wo+ow] = refOut(raw, bias, oc, x.Scale, w.Scales, o)
				}
			}
		}
	}
	return out
}

// TestConvQuads runs convs of the channel-quad layout (im2col.go) with many
// tiles: channel counts that do and do not fill quads, strides, dilations,
// asymmetric padding, output rows not a multiple of MR wide, groups; every
// family against refConv, twice (the kept panels), the scratch buffers the
// quad planes are written into filled with other bytes first.
func TestConvQuads(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(31, 32))
	shapes := []ConvShape{
		{N: 1, C: 8, H: 17, W: 19, O: 40, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
		{N: 2, C: 3, H: 30, W: 29, O: 33, KH: 7, KW: 7, Groups: 1, StrideH: 2, StrideW: 2, PadT: 3, PadL: 3, PadB: 3, PadR: 3, DilH: 1, DilW: 1},
		{N: 1, C: 13, H: 16, W: 16, O: 9, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
		{N: 1, C: 10, H: 21, W: 23, O: 20, KH: 1, KW: 1, Groups: 2, StrideH: 2, StrideW: 3, DilH: 1, DilW: 1},
		{N: 1, C: 6, H: 20, W: 26, O: 35, KH: 2, KW: 3, Groups: 1, StrideH: 1, StrideW: 3, PadT: 0, PadL: 2, PadB: 1, PadR: 0, DilH: 2, DilW: 2},
		{N: 1, C: 36, H: 9, W: 9, O: 70, KH: 3, KW: 3, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 1, PadB: 1, PadR: 1, DilH: 1, DilW: 1},
		{N: 1, C: 1, H: 15, W: 18, O: 7, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, PadT: 1, PadL: 0, PadB: 2, PadR: 1, DilH: 1, DilW: 1},
		{N: 2, C: 16, H: 11, W: 37, O: 24, KH: 3, KW: 2, Groups: 2, StrideH: 2, StrideW: 1, PadT: 2, PadL: 1, PadB: 0, PadR: 2, DilH: 1, DilW: 2},
		{N: 1, C: 8, H: 5, W: 48, O: 19, KH: 1, KW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1},
	}
	for ci, s := range shapes {
		for _, signed := range []bool{false, true} {
			K := s.C / s.Groups * s.KH * s.KW
			x := Act{Data: randCodes(r, s.N*s.C*s.H*s.W), Signed: signed, Scale: 0.02, Zero: int32(r.IntN(256))}
			if signed {
				x.Zero -= 128
			}
			w := Weight{Data: randCodes(r, s.O*K), Scales: make([]float32, s.O), Zeros: make([]int32, s.O)}
			for i := range w.Scales {
				w.Scales[i] = 0.001 + r.Float32()*0.02
				w.Zeros[i] = int32(r.IntN(9)) - 4
			}
			o := Output{Scale: 0.5 + r.Float32(), Zero: int32(r.IntN(100)), Signed: signed}
			want := refConv(s, x, w, nil, o)
			for _, k := range families(t) {
				for rep := 0; rep < 2; rep++ {
					ho, wo, _ := s.Out()
					out := make([]byte, s.N*s.O*ho*wo)
					poisonScratch(byte(0xA5 + rep))
					info, err := Conv2D(k, s, x, w, nil, o, out)
					if err != nil {
						t.Fatal(err)
					}
					for i := range out {
						if out[i] != want[i] {
							t.Fatalf("%s shape %d (%s) signed=%v: out[%d] = %d, want %d", k.Family, ci, info.Kernel, signed, i, out[i], want[i])
						}
					}
				}
			}
		}
	}
}

// poisonScratch leaves scratchBytes and scratchInts holding one buffer each,
// every byte v: what a call takes from them must be written before it is
// read.
func poisonScratch(v byte) {
	for range scratchBytes.MaxCount {
		scratchBytes.Get()
	}
	for range scratchInts.MaxCount {
		scratchInts.Get()
	}
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = v
	}
	ints := make([]int32, 1<<18)
	for i := range ints {
		ints[i] = int32(v) * 0x01010101
	}
	scratchBytes.Put(&b)
	scratchInts.Put(&ints)
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

// TestChannelParams: Requant.ChannelParams gives, bit for bit, torch's
// per-channel arithmetic written out one channel at a time (atw = sa*sw,
// mult = atw/so, biasQ = bias/atw, or bias*float32(1/atw) per tensor), and
// no BiasQ without a bias; per tensor and per channel, odd counts.
func TestChannelParams(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name       string
		n, scales  int
		bias, keep bool // keep: r's slices left from a longer call
	}{
		{"per tensor", 37, 1, false, false},
		{"per tensor, bias", 37, 1, true, false},
		{"per channel", 29, 29, false, false},
		{"per channel, bias", 29, 29, true, true},
		{"one channel", 1, 1, true, false},
	} {
		sa, so := rng.Float32()+0.01, rng.Float32()*3+0.01
		sw := make([]float32, tc.scales)
		for i := range sw {
			sw[i] = rng.Float32()*0.1 + 1e-4
		}
		var bias []float32
		if tc.bias {
			bias = make([]float32, tc.n)
			for i := range bias {
				bias[i] = float32(rng.NormFloat64())
			}
		}
		var r Requant
		if tc.keep {
			r.ChannelParams(tc.n+5, sa, make([]float32, tc.n+5), so, make([]float32, tc.n+5))
		}
		r.ChannelParams(tc.n, sa, sw, so, bias)
		if len(r.Mult) != tc.n || len(r.Scale) != tc.n || (bias == nil) != (r.BiasQ == nil) {
			t.Fatalf("%s: lengths %d %d %d", tc.name, len(r.Mult), len(r.Scale), len(r.BiasQ))
		}
		for i := range tc.n {
			s := sw[0]
			if tc.scales > 1 {
				s = sw[i]
			}
			atw := sa * s
			if r.Scale[i] != atw || r.Mult[i] != atw/so {
				t.Errorf("%s: channel %d: scale %v mult %v, want %v %v", tc.name, i, r.Scale[i], r.Mult[i], atw, atw/so)
			}
			if bias == nil {
				continue
			}
			want := bias[i] / atw
			if tc.scales == 1 {
				want = bias[i] * float32(1.0/float64(atw))
			}
			if math.Float32bits(r.BiasQ[i]) != math.Float32bits(want) {
				t.Errorf("%s: channel %d: biasQ %v, want %v", tc.name, i, r.BiasQ[i], want)
			}
		}
	}
}
