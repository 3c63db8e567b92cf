package qtensor

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

func TestCheckShape(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  string // "" = ok
	}{
		{nil, ""},
		{[]int{0}, ""},
		{[]int{3, 0, 1 << 62}, ""}, // zero elements: no overflow
		{[]int{2, 3}, ""},
		{[]int{-1}, "dimension 0 must be non-negative"},
		{[]int{1 << 31, 1 << 30}, "more than"},
		{make([]int, MaxDims+1), "rank must be at most"},
	} {
		err := CheckShape("x", tc.shape)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckShape(%v) = %v, want %q", tc.shape, err, tc.want)
		}
	}
}

func TestContiguous(t *testing.T) {
	for _, tc := range []struct {
		shape, strides []int
		want           bool
	}{
		{[]int{2, 3}, nil, true},
		{[]int{2, 3}, []int{3, 1}, true},
		{[]int{2, 3}, []int{1, 2}, false},
		{[]int{2, 1, 3}, []int{3, 99, 1}, true}, // a size-1 dimension's stride is free
		{[]int{4}, []int{2}, false},
	} {
		tt := Tensor{Shape: tc.shape, Strides: tc.strides}
		if got := tt.Contiguous(); got != tc.want {
			t.Errorf("Contiguous(%v, %v) = %v, want %v", tc.shape, tc.strides, got, tc.want)
		}
	}
}

func TestView(t *testing.T) {
	buf := make([]float32, 6)
	data := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 24)
	host := Device{Kind: CPU}
	for _, tc := range []struct {
		name string
		t    Tensor
		d    DType
		kind errs.Kind
		want string
	}{
		{"ok", Tensor{Name: "x", DType: F32, Device: host, Data: data, NBytes: 24, Shape: []int{2, 3}}, F32, 0, ""},
		{"dtype", Tensor{Name: "x", DType: I8, Device: host, Data: data, NBytes: 24, Shape: []int{2, 3}}, F32, errs.KindType, "dtype must be float32, got int8"},
		{"bytes", Tensor{Name: "x", DType: F32, Device: host, Data: data[:20], NBytes: 20, Shape: []int{2, 3}}, F32, errs.KindValue, "do not hold 6"},
		{"strides", Tensor{Name: "x", DType: F32, Device: host, Data: data, NBytes: 24, Shape: []int{2, 3}, Strides: []int{1, 2}}, F32, errs.KindValue, "not C-contiguous"},
		{"device", Tensor{Name: "x", DType: F32, Device: Device{Kind: CUDA, ID: 1}, NBytes: 24, Shape: []int{2, 3}}, F32, errs.KindValue, "got cuda:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := View[float32](&tc.t, tc.d)
			if tc.want == "" {
				if err != nil || len(got) != 6 || &got[0] != &buf[0] {
					t.Fatalf("View = %d values, %v", len(got), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || errs.KindOf(err) != tc.kind {
				t.Fatalf("View err = %v (kind %v), want %q (kind %v)", err, errs.KindOf(err), tc.want, tc.kind)
			}
		})
	}
}

type fakeFormat struct{ name string }

func (f fakeFormat) Name() string                                          { return f.name }
func (fakeFormat) PackedLen(n, rows int) (int, error)                      { return n, nil }
func (fakeFormat) Pack([]int8, int, []byte) error                          { return nil }
func (fakeFormat) Unpack([]byte, int, []int8) error                        { return nil }
func (fakeFormat) Dequantize([]byte, int, int, []float32, []float32) error { return nil }

func TestRegistry(t *testing.T) {
	saved := registry
	t.Cleanup(func() { registry = saved })
	registry = map[DType]Format{}
	Register(TL1, fakeFormat{"b"})
	Register(I2S, fakeFormat{"a"})
	if f, err := Lookup(I2S); err != nil || f.Name() != "a" {
		t.Fatalf("Lookup(I2S) = %v, %v", f, err)
	}
	_, err := Lookup(DType(9))
	if err == nil || err.Error() != "qtype must be 0 (a) or 1 (b), got 9" {
		t.Fatalf("Lookup(9) err = %v", err)
	}
	if I2S.String() != "a" || F32.String() != "float32" || DType(99).String() != "unknown" {
		t.Fatalf("String: %s %s %s", I2S, F32, DType(99))
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a dtype twice did not panic")
		}
	}()
	Register(I2S, fakeFormat{"again"})
}
