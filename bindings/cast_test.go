package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// TestCastOp checks bng_cast's dtype pairs and its errors.
func TestCastOp(t *testing.T) {
	src := []uint16{0x3f80, 0xc000, 0x7f80, 0x0001, 0x477f, 0x7fc1}
	f32 := make([]float32, len(src))
	if err := castOp(host("x", qtensor.BF16, []int{2, 3}, src), host("out", qtensor.F32, []int{6}, f32)); err != nil {
		t.Fatal(err)
	}
	f16 := make([]uint16, len(src))
	if err := castOp(host("x", qtensor.BF16, []int{6}, src), host("out", qtensor.F16, []int{6}, f16)); err != nil {
		t.Fatal(err)
	}
	back := make([]uint16, len(src))
	if err := castOp(host("x", qtensor.F32, []int{6}, f32), host("out", qtensor.F16, []int{6}, back)); err != nil {
		t.Fatal(err)
	}
	for i, b := range src {
		if math.Float32bits(f32[i]) != uint32(b)<<16 {
			t.Errorf("bf16 %#04x -> f32 %#08x", b, math.Float32bits(f32[i]))
		}
		if want := cast.F16Bits(f32[i]); f16[i] != want || back[i] != want {
			t.Errorf("bf16 %#04x -> f16 %#04x, via f32 %#04x, want %#04x", b, f16[i], back[i], want)
		}
	}
	for _, c := range []struct {
		name string
		x, o *qtensor.Tensor
		kind errs.Kind
	}{
		{"f16 to f32", host("x", qtensor.F16, []int{6}, src), host("out", qtensor.F32, []int{6}, f32), errs.KindType},
		{"f32 to f32", host("x", qtensor.F32, []int{6}, f32), host("out", qtensor.F32, []int{6}, f32), errs.KindType},
		{"count", host("x", qtensor.BF16, []int{6}, src), host("out", qtensor.F32, []int{5}, f32[:5]), errs.KindValue},
		{"bytes", host("x", qtensor.BF16, []int{6}, src), host("out", qtensor.F16, []int{6}, f32), errs.KindValue},
	} {
		err := castOp(c.x, c.o)
		if err == nil || errs.KindOf(err) != c.kind {
			t.Errorf("%s: got %v, want a %v error", c.name, err, c.kind)
		}
	}
}

// TestQuantizeBF16Op checks bng_quantize's bfloat16 x: the bytes and scale
// of the float32 path, and its errors.
func TestQuantizeBF16Op(t *testing.T) {
	x := []uint16{0x3f80, 0xc000, 0x3c00, 0x0001, 0xbe00, 0x4000, 0x3f00}
	w := make([]float32, len(x))
	for i, b := range x {
		w[i] = math.Float32frombits(uint32(b) << 16)
	}
	out := func() *qtensor.Tensor {
		o := host("out", qtensor.I2S, []int{7}, make([]byte, ternary.PackedLen(7)))
		o.Scales = make([]float32, 1)
		return o
	}
	o1, o2 := out(), out()
	if err := quantizeBF16(host("x", qtensor.BF16, []int{7}, x), o1, ternary.AbsMean, true, 0); err != nil {
		t.Fatal(err)
	}
	if err := ternary.Quantize(w, 0, ternary.AbsMean, true, o2.Data, o2.Scales); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o1.Data, o2.Data) || o1.Scales[0] != o2.Scales[0] {
		t.Fatalf("bfloat16 path %x %g, float32 path %x %g", o1.Data, o1.Scales[0], o2.Data, o2.Scales[0])
	}
	if err := quantizeBF16(host("x", qtensor.BF16, []int{7}, x), out(), ternary.AbsMean, true, 2); errs.KindOf(err) != errs.KindValue {
		t.Errorf("run_on cuda: got %v, want a ValueError", err)
	}
	if err := quantizeBF16(host("x", qtensor.BF16, []int{7}, w), out(), ternary.AbsMean, true, 0); errs.KindOf(err) != errs.KindValue {
		t.Errorf("float32 bytes as bfloat16: got %v, want a ValueError", err)
	}
	bad := append([]uint16(nil), x...)
	bad[3] = 0x7f80
	if err := quantizeBF16(host("x", qtensor.BF16, []int{7}, bad), out(), ternary.AbsMean, true, 0); err == nil || !strings.Contains(err.Error(), "3") {
		t.Errorf("Inf at 3 with check_finite: got %v", err)
	}
}
