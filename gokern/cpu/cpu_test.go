package cpu

import (
	"reflect"
	"testing"
)

func TestParseDisable(t *testing.T) {
	tests := []struct {
		in      string
		off     []Family
		unknown []string
	}{
		{"", nil, nil},
		{"avx2", []Family{AVX2}, nil},
		{" AVX512 , avx512vnni", []Family{AVX512, AVX512VNNI}, nil},
		{"all", []Family{AVX2, AVX512, AVX512VNNI}, nil},
		{"sse9,avx2", []Family{AVX2}, []string{"sse9"}},
	}
	for _, tc := range tests {
		s := parseDisable(tc.in)
		if len(s.disabled) != len(tc.off) {
			t.Errorf("%q: disabled %v, want %v", tc.in, s.disabled, tc.off)
		}
		for _, f := range tc.off {
			if !s.disabled[f] {
				t.Errorf("%q: %s not disabled", tc.in, f)
			}
		}
		if !reflect.DeepEqual(s.unknown, tc.unknown) {
			t.Errorf("%q: unknown %v, want %v", tc.in, s.unknown, tc.unknown)
		}
	}
}

func TestSupported(t *testing.T) {
	all := Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}
	tests := []struct {
		name string
		ft   Features
		want map[Family]bool
	}{
		{"none", Features{}, map[Family]bool{Generic: true}},
		{"avx2 without fma", Features{AVX2: true}, map[Family]bool{Generic: true}},
		{"avx2", Features{AVX2: true, FMA: true}, map[Family]bool{AVX2: true, Generic: true}},
		{"avx-vnni only", Features{AVX2: true, FMA: true, AVXVNNI: true}, map[Family]bool{AVX2: true, Generic: true}},
		{"all", all, map[Family]bool{AVX512VNNI: true, AVX512: true, AVX2: true, Generic: true}},
	}
	for _, tc := range tests {
		for _, f := range Families {
			if got := tc.ft.supported(f); got != tc.want[f] {
				t.Errorf("%s: supported(%s) = %v", tc.name, f, got)
			}
		}
	}
}

func TestOverrideAndPick(t *testing.T) {
	defer Override("")
	Override("avx2")
	for _, f := range []Family{AVX2, AVX512, AVX512VNNI} {
		if Usable(f) {
			t.Errorf("%s usable with avx2 disabled", f)
		}
	}
	if got := Pick(AVX512VNNI, AVX512, AVX2); got != Generic {
		t.Errorf("Pick with avx2 disabled = %s", got)
	}
	Override("")
	if !Usable(Generic) {
		t.Error("generic must always be usable")
	}
	best := Best()
	if !AsmBuilt() && best != Generic {
		t.Errorf("no assembly built but best family %s", best)
	}
	if best != Generic && !Detected().supported(best) {
		t.Errorf("picked %s that the CPU does not support", best)
	}
	if got := Pick(); got != Generic {
		t.Errorf("Pick() with nothing implemented = %s", got)
	}
}

func TestRecordAndInUse(t *testing.T) {
	Record("test_kernel_a", Generic)
	if got := Kernels()["test_kernel_a"]; got != Generic {
		t.Fatalf("recorded %s", got)
	}
	Record("test_kernel_b", AVX2)
	if got := InUse(); rank(got) > rank(AVX2) {
		t.Fatalf("InUse = %s, want avx2 or better", got)
	}
	kmu.Lock()
	delete(kernels, "test_kernel_a")
	delete(kernels, "test_kernel_b")
	kmu.Unlock()
}
