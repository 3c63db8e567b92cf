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
		s := ParseDisable(tc.in)
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

func TestSelectionPick(t *testing.T) {
	off := ParseDisable("avx2")
	for _, f := range []Family{AVX2, AVX512, AVX512VNNI} {
		if off.Usable(f) {
			t.Errorf("%s usable with avx2 disabled", f)
		}
	}
	if got := off.Pick(AVX512VNNI, AVX512, AVX2); got != Generic {
		t.Errorf("Pick with avx2 disabled = %s", got)
	}
	none := ParseDisable("")
	if !none.Usable(Generic) || !off.Usable(Generic) {
		t.Error("generic must always be usable")
	}
	best := none.Pick(Families...)
	if !AsmBuilt() && best != Generic {
		t.Errorf("no assembly built but best family %s", best)
	}
	if best != Generic && !Detected().supported(best) {
		t.Errorf("picked %s that the CPU does not support", best)
	}
	if got := none.Pick(); got != Generic {
		t.Errorf("Pick() with nothing implemented = %s", got)
	}
	if best512 := ParseDisable("avx512"); best512.Usable(AVX512VNNI) || best512.Usable(AVX512) {
		t.Error("disabling avx512 must disable avx512vnni, which builds on it")
	}
}

// newTestOp makes an op outside the registry, so that tests leave
// cpu.Kernels as the process has it.
func newTestOp(generic string) *Op[string] {
	return &Op[string]{name: "test", impls: map[Family]string{Generic: generic}, fam: Generic, cur: generic}
}

func TestOpSelect(t *testing.T) {
	o := newTestOp("g")
	o.Register(AVX2, "a2")
	o.Register(AVX512VNNI, "vnni")
	tests := []struct {
		disable string
		want    Family
	}{
		{"all", Generic},
		{"avx2", Generic},
		{"avx512", AVX2},
		{"avx512vnni", AVX2},
		{"", AVX512VNNI},
	}
	names := map[Family]string{Generic: "g", AVX2: "a2", AVX512VNNI: "vnni"}
	for _, tc := range tests {
		s := ParseDisable(tc.disable)
		want := tc.want
		for want != Generic && !s.Usable(want) {
			want = map[Family]Family{AVX512VNNI: AVX2, AVX2: Generic}[want]
		}
		impl, f := o.Select(s)
		if f != want || impl != names[want] {
			t.Errorf("disable %q: selected %s (%q), want %s", tc.disable, f, impl, want)
		}
	}
	if _, f := o.Select(startup); o.Family() != f || o.Get() != names[f] {
		t.Errorf("process selection %s (%q), Select(Startup()) %s", o.Family(), o.Get(), f)
	}
	if _, ok := o.Impl(AVX512); ok {
		t.Error("Impl(avx512) found an implementation never registered")
	}
	if fs := o.Families(); fs[0] != Generic || len(fs) > 3 {
		t.Errorf("Families() = %v", fs)
	}
	if fs, impls := o.Families(), o.Impls(); len(impls) != len(fs) {
		t.Errorf("Impls() = %q for families %v", impls, fs)
	} else {
		for i, f := range fs {
			if impls[i] != names[f] {
				t.Errorf("Impls()[%d] = %q, want %s's %q", i, impls[i], f, names[f])
			}
		}
	}
	for name, fn := range map[string]func(){
		"generic":   func() { o.Register(Generic, "x") },
		"twice":     func() { o.Register(AVX2, "x") },
		"same name": func() { NewOp("test_dup", 0); NewOp("test_dup", 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			fn()
		}()
	}
	delete(registered, "test_dup")
}

func TestKernelsAndInUse(t *testing.T) {
	o := NewOp("test_kernel_a", 1)
	defer delete(registered, "test_kernel_a")
	if got, ok := Kernels()["test_kernel_a"]; !ok || got != Generic {
		t.Fatalf("registered op listed as %q (%v)", got, ok)
	}
	o.Register(AVX2, 2)
	want := Pick(AVX2)
	if got := Kernels()["test_kernel_a"]; got != want {
		t.Fatalf("after Register(avx2): %s, want %s", got, want)
	}
	if got := InUse(); rank(got) > rank(want) {
		t.Fatalf("InUse = %s, want %s or better", got, want)
	}
}
