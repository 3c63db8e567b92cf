package quant

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/par"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
)

var (
	nan  = float32(math.NaN())
	inf  = float32(math.Inf(1))
	negZ = float32(math.Copysign(0, -1))
)

// refCode is an independent statement of the quantization formula: the
// float32 product, rounded half to even in float64, plus the zero point,
// clamped.
func refCode(x, scale float32, zp, qmin, qmax, nanCode int32) int32 {
	t := float32(x * float32(float32(1)/scale))
	if t != t {
		return nanCode
	}
	v := math.RoundToEven(float64(t)) + float64(zp)
	return int32(math.Max(float64(qmin), math.Min(float64(qmax), v)))
}

// codesOf unpacks dst into int32 codes.
func codesOf(d qtensor.DType, dst []byte, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		switch d {
		case qtensor.I8:
			out[i] = int32(int8(dst[i]))
		case qtensor.U8:
			out[i] = int32(dst[i])
		case qtensor.I4:
			c := int32(dst[i/2]>>(4*uint(i&1))) & 15
			if c >= 8 {
				c -= 16
			}
			out[i] = c
		case qtensor.U4:
			out[i] = int32(dst[i/2]>>(4*uint(i&1))) & 15
		}
	}
	return out
}

func TestQuantizeHandChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      qtensor.DType
		x      []float32
		scale  float32
		zp     int32
		want   []int32
		qr     [2]int32 // custom range, or zeros
		groups []int    // block size (0: per tensor)
	}{
		{"ties to even", qtensor.I8, []float32{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5}, 1, 0, []int32{0, 2, 2, 0, -2, -2, 4}, [2]int32{}, nil},
		{"ties with zp", qtensor.U8, []float32{0.5, 1.5, 2.5}, 1, 3, []int32{3, 5, 5}, [2]int32{}, nil},
		{"negative zero", qtensor.I8, []float32{negZ, 0}, 0.1, -5, []int32{-5, -5}, [2]int32{}, nil},
		{"reciprocal not division", qtensor.I8, []float32{0.273939937}, 0.00214854861, 0, []int32{127}, [2]int32{}, nil},
		{"clamp and inf", qtensor.I8, []float32{1e30, -1e30, inf, -inf}, 1, -3, []int32{127, -128, 127, -128}, [2]int32{}, nil},
		{"nan per tensor zp<=127", qtensor.U8, []float32{nan}, 1, 127, []int32{255}, [2]int32{}, nil},
		{"nan per tensor zp>=128", qtensor.U8, []float32{nan}, 1, 128, []int32{0}, [2]int32{}, nil},
		{"nan per tensor int8", qtensor.I8, []float32{nan}, 1, -128, []int32{127}, [2]int32{}, nil},
		{"nan per block", qtensor.U8, []float32{nan, nan, nan}, 1, 200, []int32{0, 0, 0}, [2]int32{}, []int{2}},
		{"nan per block custom range", qtensor.I8, []float32{nan}, 1, 5, []int32{3}, [2]int32{3, 9}, []int{1}},
		{"int4 odd count", qtensor.I4, []float32{-9, -8, 7, 8, 0.5}, 1, 0, []int32{-8, -8, 7, 7, 0}, [2]int32{}, nil},
		{"uint4", qtensor.U4, []float32{-1, 0, 7.5, 100}, 1, 1, []int32{0, 1, 9, 15}, [2]int32{}, nil},
		{"custom range", qtensor.U8, []float32{-100, 100}, 1, 64, []int32{0, 127}, [2]int32{0, 127}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := 0
			if tc.groups != nil {
				bs = tc.groups[0]
			}
			g, err := NewGroups([]int{len(tc.x)}, -1, bs)
			if err != nil {
				t.Fatal(err)
			}
			qmin, qmax, err := QRange(tc.d, tc.qr[0], tc.qr[1])
			if err != nil {
				t.Fatal(err)
			}
			s := &Spec{DType: tc.d, Groups: g, QMin: qmin, QMax: qmax}
			for range g.Count {
				s.Scales = append(s.Scales, tc.scale)
				s.ZeroPoints = append(s.ZeroPoints, tc.zp)
			}
			dst := make([]byte, PackedLen(tc.d, len(tc.x)))
			if err := Quantize(tc.x, s, false, dst); err != nil {
				t.Fatal(err)
			}
			got := codesOf(tc.d, dst, len(tc.x))
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("codes %v, want %v", got, tc.want)
				}
			}
			if len(tc.x)%2 == 1 && (tc.d == qtensor.I4 || tc.d == qtensor.U4) && dst[len(dst)-1]>>4 != 0 {
				t.Fatalf("odd count: last high nibble %x, want 0", dst[len(dst)-1]>>4)
			}
		})
	}
}

// randomCase makes a shape, an axis/block grouping and data with ties,
// zeros and a few non-finite values.
func randomCase(r *rand.Rand) (shape []int, axis, bs int, x []float32) {
	rank := 1 + r.IntN(3)
	shape = make([]int, rank)
	n := 1
	for i := range shape {
		shape[i] = 1 + r.IntN(23)
		if r.IntN(5) == 0 {
			shape[i] = 1 + r.IntN(300)
		}
		n *= shape[i]
	}
	axis = -1
	switch r.IntN(3) {
	case 0:
		axis = r.IntN(rank)
	case 1:
		bs = 1 + r.IntN(n+5)
		if r.IntN(2) == 0 {
			bs = 1 + r.IntN(40)
		}
	}
	x = make([]float32, n)
	for i := range x {
		switch r.IntN(10) {
		case 0:
			x[i] = float32(r.IntN(41)-20) + 0.5 // ties at scale 1
		case 1:
			x[i] = 0
		default:
			x[i] = float32(r.NormFloat64() * 30)
		}
	}
	return shape, axis, bs, x
}

// forRandomCases calls fn on n cases of randomCase (PCG seeds s1, s2), par's
// minimum work at 1 (so that they split into chunks). Case it gets a NaN
// where it%nanEvery == 0 and a -Inf where it%infEvery == 0, at random places.
func forRandomCases(t *testing.T, s1, s2 uint64, n, nanEvery, infEvery int,
	fn func(r *rand.Rand, shape []int, axis, bs int, x []float32, g Groups)) {
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(s1, s2))
	for it := range n {
		shape, axis, bs, x := randomCase(r)
		if it%nanEvery == 0 {
			x[r.IntN(len(x))] = nan
		}
		if it%infEvery == 0 {
			x[r.IntN(len(x))] = -inf
		}
		g, err := NewGroups(shape, axis, bs)
		if err != nil {
			t.Fatal(err)
		}
		fn(r, shape, axis, bs, x, g)
	}
}

func TestQuantizeRandomAgainstReference(t *testing.T) {
	forRandomCases(t, 1, 2, 300, 7, 7, func(r *rand.Rand, shape []int, axis, bs int, x []float32, g Groups) {
		for _, d := range []qtensor.DType{qtensor.I8, qtensor.U8, qtensor.I4, qtensor.U4} {
			qmin, qmax, _ := Range(d)
			s := &Spec{DType: d, Groups: g, QMin: qmin, QMax: qmax}
			for range g.Count {
				sc := float32(math.Exp(r.NormFloat64()))
				if r.IntN(3) == 0 {
					sc = 1
				}
				s.Scales = append(s.Scales, sc)
				s.ZeroPoints = append(s.ZeroPoints, qmin+int32(r.IntN(int(qmax-qmin+1))))
			}
			for _, fam := range QuantizeOp.Families() {
				k, _ := QuantizeOp.Impl(fam)
				dst := make([]byte, PackedLen(d, len(x)))
				if err := k.Quantize(x, s, false, dst); err != nil {
					t.Fatal(err)
				}
				got := codesOf(d, dst, len(x))
				nanC := NaNCode(d, g.PerTensor(), s.ZeroPoints[0], qmin, qmax)
				for i, v := range x {
					gi := g.Of(i)
					if w := refCode(v, s.Scales[gi], s.ZeroPoints[gi], qmin, qmax, nanC); got[i] != w {
						t.Fatalf("%s %s shape %v axis %d bs %d: x[%d]=%v scale %v zp %d: got %d, want %d",
							fam, d, shape, axis, bs, i, v, s.Scales[gi], s.ZeroPoints[gi], got[i], w)
					}
				}
				// Dequantize: scale * (q - zp), correctly rounded.
				out := make([]float32, len(x))
				if err := Dequantize(dst, s, out); err != nil {
					t.Fatal(err)
				}
				for i := range out {
					gi := g.Of(i)
					if w := float32(s.Scales[gi] * float32(got[i]-s.ZeroPoints[gi])); out[i] != w {
						t.Fatalf("dequantize %s [%d]: got %v, want %v", d, i, out[i], w)
					}
				}
			}
		}
	})
}

func TestQuantizeErrors(t *testing.T) {
	g1, _ := NewGroups([]int{4}, -1, 0)
	g2, _ := NewGroups([]int{2, 2}, 1, 0)
	x := []float32{1, 2, nan, inf}
	for _, tc := range []struct {
		name string
		s    Spec
		dst  int
		chk  bool
		want string
	}{
		{"zero scale", Spec{DType: qtensor.I8, Groups: g1, Scales: []float32{0}, QMin: -128, QMax: 127}, 4, false, "scale must be finite and > 0, got 0"},
		{"nan scale", Spec{DType: qtensor.I8, Groups: g2, Scales: []float32{1, nan}, QMin: -128, QMax: 127}, 4, false, "scale[1] must be finite and > 0, got NaN"},
		{"inf scale", Spec{DType: qtensor.I8, Groups: g1, Scales: []float32{inf}, QMin: -128, QMax: 127}, 4, false, "scale must be finite and > 0, got +Inf"},
		{"zp range", Spec{DType: qtensor.U8, Groups: g1, Scales: []float32{1}, ZeroPoints: []int32{256}, QMin: 0, QMax: 255}, 4, false, "zero_point must be in [quant_min, quant_max] = [0, 255], got 256"},
		{"zp custom range", Spec{DType: qtensor.U8, Groups: g1, Scales: []float32{1}, ZeroPoints: []int32{200}, QMin: 0, QMax: 127}, 4, false, "zero_point must be in [quant_min, quant_max] = [0, 127], got 200"},
		{"scale count", Spec{DType: qtensor.I8, Groups: g2, Scales: []float32{1}, QMin: -128, QMax: 127}, 4, false, "scales must have 2 entries (one per channel along axis 1), got 1"},
		{"zp count", Spec{DType: qtensor.I8, Groups: g2, Scales: []float32{1, 1}, ZeroPoints: []int32{0}, QMin: -128, QMax: 127}, 4, false, "zero_points must have 2 entries"},
		{"bytes", Spec{DType: qtensor.I4, Groups: g1, Scales: []float32{1}, QMin: -8, QMax: 7}, 3, false, "out must have 2 bytes for 4 int4 values, got 3"},
		{"check finite", Spec{DType: qtensor.I8, Groups: g1, Scales: []float32{1}, QMin: -128, QMax: 127}, 4, true, "x contains a non-finite value (NaN) at flat index 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Quantize(x, &tc.s, tc.chk, make([]byte, tc.dst))
			if err == nil || !strings.Contains(err.Error(), tc.want) || errs.KindOf(err) != errs.KindValue {
				t.Fatalf("err = %v, want ValueError with %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ qmin, qmax int32 }{{-129, 0}, {0, 128}, {5, 5}, {7, 3}} {
		if _, _, err := QRange(qtensor.I8, tc.qmin, tc.qmax); err == nil || !strings.Contains(err.Error(), "quant_min and quant_max") {
			t.Errorf("QRange(%d, %d) err = %v", tc.qmin, tc.qmax, err)
		}
	}
}

func TestCheckFiniteFirstIndexAcrossChunks(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	x := make([]float32, 10*unit+3)
	x[9*unit+5], x[3*unit+7] = inf, nan
	g, _ := NewGroups([]int{len(x)}, -1, 100)
	s := &Spec{DType: qtensor.U4, Groups: g, QMin: 0, QMax: 15}
	for range g.Count {
		s.Scales = append(s.Scales, 1)
	}
	err := Quantize(x, s, true, make([]byte, PackedLen(qtensor.U4, len(x))))
	if err == nil || !strings.Contains(err.Error(), "at flat index 3079") {
		t.Fatalf("err = %v", err)
	}
}

func TestBinary(t *testing.T) {
	defer par.SetMinWork(par.SetMinWork(1))
	x := []float32{1, -1, negZ, 0, nan, -3, 2, -0.5, 4, -4, 0.25}
	g, _ := NewGroups([]int{len(x)}, -1, 4)
	s := &Spec{DType: qtensor.Binary, Groups: g, Scales: make([]float32, g.Count)}
	dst := make([]byte, 2)
	if err := QuantizeBinary(x, s, true, false, dst); err != nil {
		t.Fatal(err)
	}
	// bits: 1 0 1 1 | 0 0 1 0 | 1 0 1 -> byte0 = 0b01001101, byte1 = 0b101
	if dst[0] != 0x4D || dst[1] != 0x05 {
		t.Fatalf("bits %08b %08b", dst[0], dst[1])
	}
	if s.Scales[0] != 0.5 || math.Float32bits(s.Scales[1]) != CanonicalNaN || s.Scales[2] != float32((4.0+4+0.25)/3) {
		t.Fatalf("scales %v", s.Scales)
	}
	out := make([]float32, len(x))
	s.Scales[1] = 2
	if err := Dequantize(dst, s, out); err != nil {
		t.Fatal(err)
	}
	want := []float32{0.5, -0.5, 0.5, 0.5, -2, -2, 2, -2, 2.75, -2.75, 2.75}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("dequantized %v, want %v", out, want)
		}
	}
	// A group of zeros gets scale 0; per channel along axis 0 of [3, 5].
	y := []float32{0, 0, 0, 0, 0, 1, -2, 3, -4, 5, 0.1, 0.2, 0.3, 0.4, 0.5}
	g2, _ := NewGroups([]int{3, 5}, 0, 0)
	s2 := &Spec{DType: qtensor.Binary, Groups: g2, Scales: make([]float32, 3)}
	if err := QuantizeBinary(y, s2, true, false, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	if s2.Scales[0] != 0 || s2.Scales[1] != 3 || s2.Scales[2] != float32(1.5/5) {
		t.Fatalf("per-channel scales %v", s2.Scales)
	}
	if err := QuantizeBinary(x, s, false, true, dst); err == nil || !strings.Contains(err.Error(), "flat index 4") {
		t.Fatalf("check_finite err = %v", err)
	}
	// Large blocks: pieces added in order, independent of threads.
	big := make([]float32, 3*pieceLen+17)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range big {
		big[i] = float32(r.NormFloat64())
	}
	gb, _ := NewGroups([]int{len(big)}, -1, 0)
	var first float32
	for _, th := range []int{1, 3} {
		old := par.Threads()
		_ = par.SetThreads(th)
		sb := &Spec{DType: qtensor.Binary, Groups: gb, Scales: make([]float32, 1)}
		if err := QuantizeBinary(big, sb, true, false, make([]byte, PackedLen(qtensor.Binary, len(big)))); err != nil {
			t.Fatal(err)
		}
		_ = par.SetThreads(old)
		if th == 1 {
			first = sb.Scales[0]
		} else if sb.Scales[0] != first {
			t.Fatalf("scale depends on threads: %v vs %v", sb.Scales[0], first)
		}
	}
}

func TestMinMax(t *testing.T) {
	forRandomCases(t, 5, 6, 200, 3, 5, func(_ *rand.Rand, shape []int, axis, bs int, x []float32, g Groups) {
		wmn, wmx := filled(g.Count, inf), filled(g.Count, -inf)
		hasNaN := make([]bool, g.Count)
		first := -1
		for i, v := range x {
			gi := g.Of(i)
			if v != v {
				hasNaN[gi] = true
			} else {
				wmn[gi], wmx[gi] = min(wmn[gi], v), max(wmx[gi], v)
			}
			if first < 0 && !qtensor.Finite(v) {
				first = i
			}
		}
		for _, fam := range MinMaxOp.Families() {
			k, _ := MinMaxOp.Impl(fam)
			mn, mx := make([]float32, g.Count), make([]float32, g.Count)
			if err := k.MinMax(x, &g, false, mn, mx); err != nil {
				t.Fatal(err)
			}
			for i := range mn {
				if hasNaN[i] {
					if mn[i] == mn[i] || mx[i] == mx[i] {
						t.Fatalf("group %d with NaN: %v %v", i, mn[i], mx[i])
					}
				} else if mn[i] != wmn[i] || mx[i] != wmx[i] {
					t.Fatalf("%s shape %v axis %d bs %d group %d: %v %v, want %v %v", fam, shape, axis, bs, i, mn[i], mx[i], wmn[i], wmx[i])
				}
			}
			err := k.MinMax(x, &g, true, mn, mx)
			if (first >= 0) != (err != nil) || (err != nil && !strings.Contains(err.Error(), "flat index "+strconv.Itoa(first)+";")) {
				t.Fatalf("check_finite: err %v, first %d", err, first)
			}
		}
	})
	g, _ := NewGroups([]int{0}, -1, 0)
	if err := MinMax(nil, &g, false, make([]float32, 1), make([]float32, 1)); err == nil || !strings.Contains(err.Error(), "at least one element") {
		t.Fatalf("empty: %v", err)
	}
}

func TestHistogram(t *testing.T) {
	x := []float32{0, 1, 2, 3, 4, 4.0001, -0.001, nan, inf, 1.9999999, 2.0000002}
	counts := []int64{10, 0, 0, 0}
	if err := Histogram(x, 0, 4, false, false, counts); err != nil {
		t.Fatal(err)
	}
	// bins [0,1) [1,2) [2,3) [3,4]; 4 goes to the last bin; added to 10.
	want := []int64{11, 2, 2, 2}
	for i := range want {
		if counts[i] != want[i] {
			t.Fatalf("counts %v, want %v", counts, want)
		}
	}
	abs := make([]int64, 2)
	if err := Histogram([]float32{-1, 1, -0.5, negZ}, 0, 1, true, false, abs); err != nil || abs[0] != 1 || abs[1] != 3 {
		t.Fatalf("absolute: %v %v", abs, err)
	}
	if err := Histogram(x, 0, 4, false, true, counts); err == nil || !strings.Contains(err.Error(), "flat index 7") {
		t.Fatalf("check_finite: %v", err)
	}
	for _, lh := range [][2]float32{{1, 1}, {2, 1}, {0, inf}, {nan, 1}, {-3e38, 3e38}} {
		if err := Histogram(x, lh[0], lh[1], false, false, counts); err == nil || !strings.Contains(err.Error(), "lo and hi") && !strings.Contains(err.Error(), "hi - lo") {
			t.Fatalf("lo/hi %v: %v", lh, err)
		}
	}
	// Every family against the generic kernel on random data, multi-chunk.
	defer par.SetMinWork(par.SetMinWork(1))
	r := rand.New(rand.NewPCG(7, 8))
	y := make([]float32, 20*unit+5)
	for i := range y {
		y[i] = float32(r.NormFloat64() * 3)
	}
	ref := make([]int64, 777)
	histogramGeneric(y, -2.5, 7.25, true, ref)
	for _, fam := range cpu.Families {
		k, ok := HistogramOp.Impl(fam)
		if !ok {
			continue
		}
		got := make([]int64, 777)
		if err := HistogramWith(k, y, -2.5, 7.25, true, false, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != ref[i] {
				t.Fatalf("%s bin %d: %d, want %d", fam, i, got[i], ref[i])
			}
		}
		// (v-lo)*nbins overflows float32 for every v > 0 here: the last bin
		// (was a panic).
		big := make([]float32, 100)
		for i := range big {
			big[i] = float32(i) * 3e36
		}
		over := make([]int64, 2048)
		if err := HistogramWith(k, big, 0, 3e38, false, true, over); err != nil || over[2047] != 99 || over[0] != 1 {
			t.Fatalf("%s overflowing product: %v, first bin %d, last bin %d", fam, err, over[0], over[2047])
		}
	}
}

func TestChooseQParams(t *testing.T) {
	eps := float32(1.1920929e-07)
	for _, tc := range []struct {
		name       string
		mn, mx     float32
		d          qtensor.DType
		m          Mapping
		qmin, qmax int32
		scale      float32
		zp         int32
	}{
		{"affine int8", -1, 3, qtensor.I8, MapAffine, 0, 0, float32(4) / 255, -128 - int32(math.RoundToEven(float64(float32(-1)/(float32(4)/255))))},
		{"affine all zeros", 0, 0, qtensor.U8, MapAffine, 0, 0, eps, 0},
		{"affine min==max>0", 3, 3, qtensor.I8, MapAffine, 0, 0, float32(3) / 255, -128},
		{"affine min==max<0", -3, -3, qtensor.U8, MapAffine, 0, 0, float32(3) / 255, 255},
		{"symmetric int8 127.5", -2, 1, qtensor.I8, MapSymmetric, 0, 0, float32(2) / 127.5, 0},
		{"symmetric uint8 default", -2, 1, qtensor.U8, MapSymmetric, 0, 0, float32(2) / 127.5, 128},
		{"symmetric uint8 custom", -2, 1, qtensor.U8, MapSymmetric, 0, 255, float32(2) / 127.5, 127},
		{"symmetric uint4 zp 0", -2, 1, qtensor.U4, MapSymmetric, 0, 0, float32(2) / 7.5, 0},
		{"empty observer", inf, -inf, qtensor.I8, MapAffine, 0, 0, 1, 0},
		{"ao symmetric uint8", -2, 1, qtensor.U8, MapAOSymmetric, 0, 0, float32(2) / 127.5, 128},
		{"ao symmetric int8 [-127,127]", -2, 1, qtensor.I8, MapAOSymmetric, -127, 127, float32(2) / 127, 0},
		{"ao symmetric [-10,5] truncates", -2, 1, qtensor.I8, MapAOSymmetric, -10, 5, float32(2) / 7.5, -2},
		{"ao no clipping int4", -2, 1, qtensor.I4, MapAOSymmetricNoClippingError, 0, 0, float32(-2) / -8, 0},
		{"ao no clipping int4 max side", -1, 7, qtensor.I4, MapAOSymmetricNoClippingError, 0, 0, 1, 0},
		{"ao no clipping uint4", -1, 3, qtensor.U4, MapAOSymmetricNoClippingError, 0, 0, float32(3) / 15, 8},
		{"ao asymmetric uint4", -1, 2, qtensor.U4, MapAOAsymmetric, 0, 0, float32(3) / 15, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, z := make([]float32, 1), make([]int32, 1)
			err := ChooseQParams([]float32{tc.mn}, []float32{tc.mx}, &QParamsSpec{DType: tc.d, Mapping: tc.m, QMin: tc.qmin, QMax: tc.qmax, Eps: eps}, s, z)
			if err != nil {
				t.Fatal(err)
			}
			if s[0] != tc.scale || z[0] != tc.zp {
				t.Fatalf("got (%v, %d), want (%v, %d)", s[0], z[0], tc.scale, tc.zp)
			}
		})
	}
	for _, tc := range []struct {
		mn, mx float32
		p      QParamsSpec
		want   string
	}{
		{2, 1, QParamsSpec{DType: qtensor.I8, Eps: eps}, "min = 2 is greater than max = 1"},
		{nan, 1, QParamsSpec{DType: qtensor.I8, Eps: eps}, "must be finite"},
		{-inf, 1, QParamsSpec{DType: qtensor.I8, Eps: eps}, "must be finite"},
		{0, 1, QParamsSpec{DType: qtensor.I8, Eps: 0}, "eps must be finite and > 0"},
		{0, 1, QParamsSpec{DType: qtensor.I8, Eps: eps, Mapping: 9}, "mapping must be"},
		{0, 1, QParamsSpec{DType: qtensor.I8, Eps: eps, QMin: 1, QMax: 300}, "quant_min and quant_max"},
		{0, 1, QParamsSpec{DType: qtensor.I8, Eps: eps, QMin: -8, QMax: 0, Mapping: MapAOSymmetricNoClippingError}, "quant_max must be > 0"},
		{0, 1, QParamsSpec{DType: qtensor.F32, Eps: eps}, "dtype must be"},
	} {
		err := ChooseQParams([]float32{tc.mn}, []float32{tc.mx}, &tc.p, make([]float32, 1), make([]int32, 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v %+v: err %v, want %q", tc.mn, tc.mx, tc.p, err, tc.want)
		}
	}
	// one per group: the message names the group
	p := QParamsSpec{DType: qtensor.U8, Eps: eps}
	for _, tc := range []struct {
		mn, mx []float32
		want   string
	}{
		{[]float32{0, nan, 0}, []float32{1, 1, 1}, "min[1] and max[1] must be finite (or +inf and -inf for a group that saw no values), got NaN and 1"},
		{[]float32{0, 0, 3}, []float32{1, 1, 2}, "min[2] = 3 is greater than max[2] = 2"},
	} {
		err := ChooseQParams(tc.mn, tc.mx, &p, make([]float32, 3), make([]int32, 3))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v %v: err %v, want %q", tc.mn, tc.mx, err, tc.want)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		d      qtensor.DType
		values []int8
		bytes  []byte
	}{
		{qtensor.I4, []int8{-8, 7, -1}, []byte{0x78, 0x0F}},
		{qtensor.U4, []int8{1, 15, 3, 0}, []byte{0xF1, 0x03}},
		{qtensor.Binary, []int8{1, -1, 1, 1, -1, -1, -1, -1, 1}, []byte{0x0D, 0x01}},
		{qtensor.I8, []int8{-128, 5}, []byte{0x80, 5}},
	} {
		f, err := qtensor.Lookup(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := f.PackedLen(len(tc.values), 1)
		dst := make([]byte, n)
		if err := f.Pack(tc.values, 1, dst); err != nil {
			t.Fatal(err)
		}
		if string(dst) != string(tc.bytes) {
			t.Fatalf("%s: packed %x, want %x", tc.d, dst, tc.bytes)
		}
		back := make([]int8, len(tc.values))
		if err := f.Unpack(dst, 1, back); err != nil || string(toBytes(back)) != string(toBytes(tc.values)) {
			t.Fatalf("%s: unpacked %v (%v)", tc.d, back, err)
		}
	}
	f, _ := qtensor.Lookup(qtensor.I4)
	if err := f.Pack([]int8{8}, 1, make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "values[0] must be in [-8, 7] for int4, got 8") {
		t.Fatalf("pack range: %v", err)
	}
	if n, err := f.(interface {
		NumScales([]int, int, int) (int, error)
	}).NumScales([]int{3, 5}, -1, 4); err != nil || n != 4 {
		t.Fatalf("NumScales = %d, %v", n, err)
	}
}

func toBytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// TestCheckScaleAndZeroPoint: the one scale and zero point check every op
// uses, its message naming owner+what.
func TestCheckScaleAndZeroPoint(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for no error
	}{
		{"scale ok", CheckScale("x", "'s scale", 0.25), ""},
		{"smallest subnormal ok", CheckScale("x", "'s scale", math.SmallestNonzeroFloat32), ""},
		{"zero scale", CheckScale("x", "'s scale", 0), "x's scale must be finite and > 0, got 0"},
		{"negative scale", CheckScale("scale[2]", "", -1), "scale[2] must be finite and > 0, got -1"},
		{"nan scale", CheckScale("out", "'s scale", nan), "out's scale must be finite and > 0, got NaN"},
		{"inf scale", CheckScale("out", "'s scale", inf), "out's scale must be finite and > 0, got +Inf"},
		{"u8 lowest", CheckZeroPoint("out", "'s zero point", 0, qtensor.U8), ""},
		{"u8 highest", CheckZeroPoint("out", "'s zero point", 255, qtensor.U8), ""},
		{"u8 above", CheckZeroPoint("out", "'s zero point", 256, qtensor.U8), "out's zero point must be in uint8's range [0, 255], got 256"},
		{"u8 below", CheckZeroPoint("out", "'s zero point", -1, qtensor.U8), "out's zero point must be in uint8's range [0, 255], got -1"},
		{"i8 lowest", CheckZeroPoint("w", "'s zero point", -128, qtensor.I8), ""},
		{"i8 below", CheckZeroPoint("w", "'s zero point", -129, qtensor.I8), "w's zero point must be in int8's range [-128, 127], got -129"},
		{"i4 above", CheckZeroPoint("zero_point", "", 8, qtensor.I4), "zero_point must be in int4's range [-8, 7], got 8"},
		{"u4 highest", CheckZeroPoint("zero_point", "", 15, qtensor.U4), ""},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || tc.err.Error() != tc.want || errs.KindOf(tc.err) != errs.KindValue):
			t.Errorf("%s: err = %v, want ValueError %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestDequantizeZeroPointErrors: a zero point outside the dtype's codes is
// a ValueError naming it as the Python API does.
func TestDequantizeZeroPointErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    qtensor.DType
		axis int // -1: per tensor; 0: per channel of a 2 x 2 tensor
		zps  []int32
		want string // "" for no error
	}{
		{"u8 per tensor", qtensor.U8, -1, []int32{256}, "zero_point must be in uint8's range [0, 255], got 256"},
		{"i8 per channel", qtensor.I8, 0, []int32{0, -129}, "zero_point[1] must be in int8's range [-128, 127], got -129"},
		{"i4 per tensor", qtensor.I4, -1, []int32{8}, "zero_point must be in int4's range [-8, 7], got 8"},
		{"u4 in range", qtensor.U4, -1, []int32{15}, ""},
	} {
		n := 4
		g, err := NewGroups([]int{2, 2}, tc.axis, 0)
		if err != nil {
			t.Fatal(err)
		}
		s := &Spec{DType: tc.d, Groups: g, ZeroPoints: tc.zps}
		for range g.Count {
			s.Scales = append(s.Scales, 0.5)
		}
		err = Dequantize(make([]byte, PackedLen(tc.d, n)), s, make([]float32, n))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || errs.KindOf(err) != errs.KindValue):
			t.Errorf("%s: err = %v, want ValueError %q", tc.name, err, tc.want)
		}
	}
}
