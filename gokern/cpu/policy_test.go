package cpu

import (
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	tests := []struct {
		id   CPUID
		want Kind
	}{
		{CPUID{"AMD", 25, 17}, "amd-zen4"}, // EPYC Genoa
		{CPUID{"AMD", 25, 0x61}, "amd-zen4"},
		{CPUID{"AMD", 25, 1}, "amd-zen3"}, // EPYC Milan
		{CPUID{"AMD", 25, 0x21}, "amd-zen3"},
		{CPUID{"AMD", 23, 0x31}, "amd-zen2"},
		{CPUID{"AMD", 26, 2}, "amd-zen5"},
		{CPUID{"AMD", 21, 2}, KindUnknown},
		{CPUID{"Intel", 6, 0x55}, "intel-skylake-server"},
		{CPUID{"Intel", 6, 0x6a}, "intel-icelake-server"},
		{CPUID{"Intel", 6, 0x8f}, "intel-sapphirerapids"},
		{CPUID{"Intel", 6, 0x01}, KindUnknown},
		{CPUID{"Intel", 15, 0x55}, KindUnknown},
		{CPUID{"VIA", 6, 0x55}, KindUnknown},
		{CPUID{}, KindUnknown},
	}
	for _, tc := range tests {
		if got := KindOf(tc.id); got != tc.want {
			t.Errorf("KindOf(%v) = %s, want %s", tc.id, got, tc.want)
		}
	}
	if k := DetectedKind(); k != KindOf(DetectedID()) || k == "" {
		t.Errorf("DetectedKind() = %q for %v", k, DetectedID())
	}
}

func TestParseDispatch(t *testing.T) {
	for _, tc := range []struct{ in, mode, ignored string }{
		{"", DispatchMeasured, ""},
		{"measured", DispatchMeasured, ""},
		{" Best-First ", DispatchBestFirst, ""},
		{"fastest", DispatchMeasured, "fastest"},
	} {
		p, ignored := parseDispatch(tc.in, "amd-zen4")
		if p.mode != tc.mode || ignored != tc.ignored || p.kind != "amd-zen4" {
			t.Errorf("parseDispatch(%q) = %+v, %q", tc.in, p, ignored)
		}
	}
}

// TestPolicyChoose: the dispatch policy on fake CPUs (features, kinds and a
// measurement table of its own) under BITNET_GO_DISABLE settings.
func TestPolicyChoose(t *testing.T) {
	all := []Family{AVX512VNNI, AVX512, AVX2}
	avx512cpu := Features{AVX2: true, FMA: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}
	avx2cpu := Features{AVX2: true, FMA: true}
	table := map[Kind]map[string]Measured{
		"amd-zen4": {
			"conv_gemm":    {Fastest: AVX2, Timed: []Family{AVX512VNNI, AVX512, AVX2, Generic}},
			"conv_fast512": {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX512, AVX2, Generic}},
			"conv_partial": {Fastest: AVX512VNNI, Timed: []Family{AVX512VNNI, AVX2, Generic}},
			"quant":        {Fastest: Generic, Timed: []Family{AVX2, Generic}},
		},
	}
	tests := []struct {
		name    string
		mode    string
		kind    Kind
		ft      Features
		asm     bool
		disable string
		op      string
		impl    []Family
		want    Family
		why     string // a part of the reason
	}{
		{"measured fastest avx2", "", "amd-zen4", avx512cpu, true, "", "conv_gemm", all, AVX2, "measured fastest on amd-zen4"},
		{"measured avx2, vnni off", "", "amd-zen4", avx512cpu, true, "avx512vnni", "conv_gemm", all, AVX2, "measured fastest"},
		{"measured avx2, avx2 off", "", "amd-zen4", avx512cpu, true, "avx2", "conv_gemm", all, Generic, "not usable here"},
		{"measured vnni", "", "amd-zen4", avx512cpu, true, "", "conv_fast512", all, AVX512VNNI, "measured fastest"},
		{"measured vnni, vnni off", "", "amd-zen4", avx512cpu, true, "avx512vnni", "conv_fast512", all, AVX512, "not usable here"},
		// avx512 was not timed for this op: the fallback skips it
		{"measured vnni, vnni off, avx512 untimed", "", "amd-zen4", avx512cpu, true, "avx512vnni", "conv_partial", all, AVX2, "timed there"},
		{"measured generic", "", "amd-zen4", avx512cpu, true, "", "quant", []Family{AVX2}, Generic, "measured fastest"},
		{"measured, no asm", "", "amd-zen4", avx512cpu, false, "", "conv_fast512", all, Generic, "not usable"},
		{"measured vnni, cpu without it", "", "amd-zen4", avx2cpu, true, "", "conv_fast512", all, AVX2, "not usable"},
		// an op never timed on this kind: no AVX-512 default
		{"unmeasured op", "", "amd-zen4", avx512cpu, true, "", "new_op", all, AVX2, "not measured on amd-zen4"},
		{"unmeasured op, avx512 only", "", "amd-zen4", avx512cpu, true, "", "new_op", []Family{AVX512VNNI}, Generic, "not measured"},
		{"unknown kind", "", KindUnknown, avx512cpu, true, "", "conv_gemm", all, AVX2, "not measured on unknown"},
		{"unmeasured kind", "", "intel-icelake-server", avx512cpu, true, "", "conv_fast512", all, AVX2, "AVX-512 ones only after"},
		{"unmeasured kind, avx2 off", "", "intel-icelake-server", avx512cpu, true, "avx2", "conv_gemm", all, Generic, "not measured"},
		{"unmeasured kind, avx2 cpu", "", KindUnknown, avx2cpu, true, "", "conv_gemm", all, AVX2, "not measured"},
		{"unmeasured kind, no cpu features", "", KindUnknown, Features{}, true, "", "conv_gemm", all, Generic, "not measured"},
		// best-first: the order BITNET_GO_DISABLE settings are written against
		{"best-first", DispatchBestFirst, "amd-zen4", avx512cpu, true, "", "conv_gemm", all, AVX512VNNI, "best-first"},
		{"best-first, vnni off", DispatchBestFirst, "amd-zen4", avx512cpu, true, "avx512vnni", "conv_gemm", all, AVX512, "best-first"},
		{"best-first, avx512 off", DispatchBestFirst, "amd-zen4", avx512cpu, true, "avx512", "conv_gemm", all, AVX2, "best-first"},
		{"best-first, all off", DispatchBestFirst, "amd-zen4", avx512cpu, true, "all", "conv_gemm", all, Generic, "best-first"},
		{"best-first, unknown kind", DispatchBestFirst, KindUnknown, avx512cpu, true, "", "new_op", all, AVX512VNNI, "best-first"},
	}
	for _, tc := range tests {
		p, _ := parseDispatch(tc.mode, tc.kind)
		p.table = table
		s := ParseDisable(tc.disable)
		got, why := p.choose(tc.op, tc.impl, func(f Family) bool { return s.usableOn(tc.ft, tc.asm, f) })
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: chose %s (%q), want %s (%q)", tc.name, got, why, tc.want, tc.why)
		}
	}
}

// TestMeasurementsWellFormed: every table entry names a family timed in its
// run, generic among them, and a kind KindOf can return.
func TestMeasurementsWellFormed(t *testing.T) {
	known := map[Kind]bool{}
	for _, k := range amdKinds {
		known[k.kind] = true
	}
	for _, k := range intelKinds {
		known[k] = true
	}
	for kind, ops := range Measurements {
		if !known[kind] {
			t.Errorf("kind %q: KindOf never returns it", kind)
		}
		for op, m := range ops {
			timed := map[Family]bool{}
			for _, f := range m.Timed {
				if rank(f) == len(Families) {
					t.Errorf("%s/%s: timed unknown family %q", kind, op, f)
				}
				timed[f] = true
			}
			if !timed[m.Fastest] || !timed[Generic] {
				t.Errorf("%s/%s: fastest %s, timed %v", kind, op, m.Fastest, m.Timed)
			}
		}
	}
}

// TestOpSelectUnderPolicy: an op selects by the policy a selection carries;
// the process's choice is the start-up policy's and reports why.
func TestOpSelectUnderPolicy(t *testing.T) {
	o := newTestOp("g")
	o.Register(AVX2, "a2")
	o.Register(AVX512VNNI, "vnni")
	bestFirst := ParseDisable("").WithDispatch(DispatchBestFirst, DetectedKind())
	_, f1 := o.Select(bestFirst)
	_, f2 := o.Select(ParseDisable(""))
	if f1 != f2 {
		t.Errorf("best-first %s, no policy %s", f1, f2)
	}
	// "test" is measured on no kind: never an AVX-512 family by default
	_, f := o.Select(ParseDisable("").WithDispatch(DispatchMeasured, DetectedKind()))
	if avx512(f) {
		t.Errorf("unmeasured op selected %s", f)
	}
	if _, _, why := o.selectWhy(startup); o.Reason() != why || why == "" {
		t.Errorf("Reason() %q, start-up selection's %q", o.Reason(), why)
	}
	mode, kind, _ := Dispatch()
	if mode != DispatchMeasured && mode != DispatchBestFirst || kind != DetectedKind() {
		t.Errorf("Dispatch() = %s, %s", mode, kind)
	}
}

func TestKernelReasonsAndFamilies(t *testing.T) {
	o := NewOp("test_kernel_b", 1)
	defer delete(registered, "test_kernel_b")
	o.Register(AVX2, 2)
	if why := KernelReasons()["test_kernel_b"]; why != o.Reason() || why == "" {
		t.Errorf("reason %q, op's %q", why, o.Reason())
	}
	fams := KernelFamilies()["test_kernel_b"]
	if len(fams) == 0 || fams[0] != Generic || len(fams) != len(o.Families()) {
		t.Errorf("families %v, op's %v", fams, o.Families())
	}
}
