package main

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/quant"
)

// host builds a decoded host operand over the bytes of data.
func host[T any](name string, d qtensor.DType, shape []int, data []T) *qtensor.Tensor {
	var b []byte
	if len(data) > 0 {
		var z T
		b = unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(z)))
	}
	return &qtensor.Tensor{Name: name, DType: d, Device: qtensor.Device{Kind: qtensor.CPU}, Data: b, NBytes: len(b), Shape: shape, Axis: -1}
}

// TestQuantizeGeneralArguments checks the argument handling of the new
// dtypes in bng_quantize / bng_dequantize (the export bodies; guard turns
// the kind into the status).
func TestQuantizeGeneralArguments(t *testing.T) {
	x := []float32{-1, 0.5, 2, 300, -300, 1.5}
	xt := host("x", qtensor.F32, []int{2, 3}, x)
	out := func(d qtensor.DType, nb int, axis int, scales []float32, zps []int32) *qtensor.Tensor {
		o := host("out", d, []int{2, 3}, make([]byte, nb))
		o.Axis, o.Scales, o.ZeroPoints = axis, scales, zps
		return o
	}
	for _, tc := range []struct {
		name       string
		o          *qtensor.Tensor
		method     int32
		qmin, qmax int32
		runOn      int32
		kind       errs.Kind
		want       string
	}{
		{"ok per channel", out(qtensor.I8, 6, 1, []float32{1, 1, 1}, []int32{0, 1, 2}), quantMethodGiven, 0, 0, 0, 0, ""},
		{"ok int4 per tensor", out(qtensor.I4, 3, -1, []float32{0.5}, nil), quantMethodGiven, 0, 0, 0, 0, ""},
		{"ok binary absmean", out(qtensor.Binary, 1, 0, make([]float32, 2), nil), 0, 0, 0, 0, 0, ""},
		{"method", out(qtensor.U8, 6, -1, []float32{1}, nil), 0, 0, 0, 0, errs.KindValue, "params: method must be 2 (given"},
		{"binary method", out(qtensor.Binary, 1, -1, []float32{1}, nil), 1, 0, 0, 0, errs.KindValue, "method must be 0 (absmean"},
		{"range", out(qtensor.I8, 6, -1, []float32{1}, nil), quantMethodGiven, -200, 0, 0, errs.KindValue, "quant_min and quant_max must satisfy -128 <= quant_min < quant_max <= 127"},
		{"cuda", out(qtensor.U4, 3, -1, []float32{1}, nil), quantMethodGiven, 0, 0, 2, errs.KindType, "out: uint4 quantization runs on the CPU only"},
		{"scales", out(qtensor.I8, 6, 0, []float32{1}, nil), quantMethodGiven, 0, 0, 0, errs.KindValue, "scales must have 2 entries (one per channel along axis 0), got 1"},
		{"bytes", out(qtensor.I4, 4, -1, []float32{1}, nil), quantMethodGiven, 0, 0, 0, errs.KindValue, "out must have 3 bytes for 6 int4 values, got 4"},
		{"scale value", out(qtensor.I8, 6, -1, []float32{-1}, nil), quantMethodGiven, 0, 0, 0, errs.KindValue, "scale must be finite and > 0, got -1"},
		{"zp value", out(qtensor.I4, 3, -1, []float32{1}, []int32{8}), quantMethodGiven, 0, 0, 0, errs.KindValue, "zero_point must be in [quant_min, quant_max] = [-8, 7], got 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := quantizeGeneral(xt, tc.o, tc.method, true, tc.qmin, tc.qmax, tc.runOn)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if errs.KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (kind %v), want kind %v with %q", err, errs.KindOf(err), tc.kind, tc.want)
			}
		})
	}
	// Round trip through dequantizeGeneral: per channel uint8 with zero points.
	q := out(qtensor.U8, 6, 1, []float32{0.5, 1, 2}, []int32{10, 20, 30})
	if err := quantizeGeneral(xt, q, quantMethodGiven, true, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := dequantizeGeneral(q, got); err != nil {
		t.Fatal(err)
	}
	want := []float32{-1, 0, 2, 122.5, -20, 2} // codes 8, 20, 31, 255, 0, 31
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("round trip %v, want %v", got, want)
		}
	}
}

func TestMinmaxHistogramQParamsCalibrateArguments(t *testing.T) {
	x := []float32{1, -2, 3, 4, 5, -6}
	xt := host("x", qtensor.F32, []int{3, 2}, x)
	xt.Axis = 0
	mn, mx := make([]float32, 3), make([]float32, 3)
	if err := minmaxOp(xt, host("mn", qtensor.F32, []int{3}, mn), host("mx", qtensor.F32, []int{3}, mx), true); err != nil {
		t.Fatal(err)
	}
	if mn[0] != -2 || mx[2] != 5 || mn[2] != -6 {
		t.Fatalf("minmax %v %v", mn, mx)
	}
	err := minmaxOp(xt, host("mn", qtensor.F32, []int{2}, mn[:2]), host("mx", qtensor.F32, []int{3}, mx), true)
	if err == nil || !strings.Contains(err.Error(), "mn and mx must have 3 entries (one per channel along axis 0), got 2 and 3") {
		t.Fatalf("minmax count: %v", err)
	}
	err = minmaxOp(xt, host("mn", qtensor.I32, []int{3}, make([]int32, 3)), host("mx", qtensor.F32, []int{3}, mx), true)
	if errs.KindOf(err) != errs.KindType || !strings.Contains(err.Error(), "mn: dtype must be float32, got int32") {
		t.Fatalf("minmax dtype: %v", err)
	}

	counts := make([]int64, 4)
	ct := host("counts", qtensor.I64, []int{4}, counts)
	if err := histogramOp(host("x", qtensor.F32, []int{6}, x), histParams{absolute: true, lo: 0, hi: 8}, ct); err != nil {
		t.Fatal(err)
	}
	if counts[0] != 1 || counts[1] != 2 || counts[2] != 2 || counts[3] != 1 {
		t.Fatalf("histogram %v", counts)
	}
	if err := histogramOp(host("x", qtensor.F32, []int{6}, x), histParams{lo: 1, hi: 0}, ct); err == nil || !strings.Contains(err.Error(), "lo and hi must be finite with lo < hi") {
		t.Fatalf("histogram range: %v", err)
	}
	if err := histogramOp(host("x", qtensor.F32, []int{6}, x), histParams{lo: 0, hi: 1}, host("counts", qtensor.I32, []int{4}, make([]int32, 4))); errs.KindOf(err) != errs.KindType {
		t.Fatalf("histogram counts dtype: %v", err)
	}

	s, z := make([]float32, 3), make([]int32, 3)
	spec := &quant.QParamsSpec{DType: qtensor.U8, Mapping: quant.MapAffine, Eps: 1.1920929e-07}
	if err := chooseQParamsOp(host("mn", qtensor.F32, []int{3}, mn), host("mx", qtensor.F32, []int{3}, mx), spec,
		host("scales", qtensor.F32, []int{3}, s), host("zero_points", qtensor.I32, []int{3}, z)); err != nil {
		t.Fatal(err)
	}
	if s[0] != float32(3)/255 || s[2] != float32(11)/255 || z[2] != 139 {
		t.Fatalf("qparams %v %v", s, z)
	}
	spec.DType = qtensor.F32
	if err := chooseQParamsOp(host("mn", qtensor.F32, []int{3}, mn), host("mx", qtensor.F32, []int{3}, mx), spec,
		host("scales", qtensor.F32, []int{3}, s), host("zero_points", qtensor.I32, []int{3}, z)); errs.KindOf(err) != errs.KindType || !strings.Contains(err.Error(), "params: dtype must be 17 (int8)") {
		t.Fatalf("qparams dtype: %v", err)
	}

	amax, err := calibrateOp(host("counts", qtensor.I64, []int{4}, []int64{1, 1, 1, 1}), &quant.CalibSpec{Method: quant.CalibPercentile, Percentile: 100, BinWidth: 2})
	if err != nil || amax != 6 {
		t.Fatalf("calibrate %v %v", amax, err)
	}
}
