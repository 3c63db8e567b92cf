package main

import (
	"math"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cast"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/qtensor"
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
