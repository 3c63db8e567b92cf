package conv2d

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/cpu"
	"github.com/bitnet-go/bitnet_go/gokern/gemm"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// envFresh marks the child process of TestKernelsRecordedAtStart.
const envFresh = "BITNET_GO_TEST_FRESH_PROCESS"

// TestKernelsRecordedAtStart: cpu.Kernels lists the convolution's kernel
// ops (conv_gemm, conv_i8, conv_lut, quantize_i2s) from start-up, before any
// convolution runs, as the families selected. Checked in a fresh process
// running this test alone, so that no other test has run a convolution yet.
func TestKernelsRecordedAtStart(t *testing.T) {
	if os.Getenv(envFresh) == "1" {
		got := cpu.Kernels()
		for name, want := range map[string]cpu.Family{"conv_gemm": gemm.KernelOp.Get().Family,
			"conv_lut": gemm.LUT16Op.Get().Family, "conv_i8": gemm.ConvI8Op.Get().Family, "quantize_i2s": ternary.QuantizeOp.Get().Family()} {
			if f, ok := got[name]; !ok || f != want {
				t.Errorf("at start-up cpu.Kernels()[%q] = %q (listed: %v), want %q", name, f, ok, want)
			}
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsRecordedAtStart$", "-test.count=1")
	cmd.Env = append(os.Environ(), envFresh+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fresh process: %v\n%s", err, out)
	}
}

// TestConv2DInfoKernel: the kernel a call reports is the path that ran, for
// each conv_gemm / conv_lut family selected (every BITNET_GO_DISABLE setting
// on an instance); int8 results are the reference's bits whichever ran.
func TestConv2DInfoKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	shape := func(n, c, hw, o, k, groups int) Shape {
		return Shape{N: n, C: c, H: hw, W: hw, O: o, WC: c / groups, KH: k, KW: k, Groups: groups,
			StrideH: 1, StrideW: 1, DilH: 1, DilW: 1}
	}
	const G, A2, A5, V = cpu.Generic, cpu.AVX2, cpu.AVX512, cpu.AVX512VNNI
	fams := func(g, a2, a5, v string) map[cpu.Family]string {
		return map[cpu.Family]string{G: g, A2: a2, A5: a5, V: v}
	}
	every := func(k string) map[cpu.Family]string { return fams(k, k, k, k) }
	// simd: one kernel for every SIMD family; own: each family its own.
	simd := func(g, k string) map[cpu.Family]string { return fams(g, k, k, k) }
	own := func(path string) map[cpu.Family]string {
		return fams(path+"/generic", path+"/avx2", path+"/avx512", path+"/avx512vnni")
	}
	cases := []struct {
		name  string
		s     Shape
		bits  int
		req   Algo
		qtype ternary.QType
		algo  Algo
		want  map[cpu.Family]string // by the conv_gemm family (conv_lut's for LUT)
	}{
		{"im2col f32", shape(1, 8, 9, 8, 3, 1), 0, Im2col, ternary.I2S, Im2col, own("im2col_gemm")},
		{"im2col i8", shape(1, 8, 9, 8, 3, 1), 8, Auto, ternary.I2S, Im2col,
			fams("im2col_gemm/generic", "implicit_gemm/avx2", "implicit_gemm/avx2", "implicit_gemm/avx512vnni")}, // conv_i8
		{"gemv f32", shape(1, 256, 2, 8, 1, 1), 0, Auto, ternary.I2S, Pointwise, simd("gemv/generic", "gemv/avx2")},
		{"gemv i8", shape(2, 128, 1, 8, 1, 1), 8, Auto, ternary.I2S, Pointwise, // op linear_gemv: no avx512 family
			fams("gemv/generic", "gemv/avx2", "gemv/avx2", "gemv/avx512vnni")},
		{"1x1 f32", shape(1, 8, 6, 8, 1, 1), 0, Pointwise, ternary.I2S, Pointwise, own("gemm1x1")}, // auto: implicit_f32 (directf_test.go)
		{"1x1 i8 few pixels", shape(1, 8, 3, 8, 1, 1), 8, Auto, ternary.I2S, Pointwise,
			fams("gemm1x1/generic", "implicit_gemm/avx2", "implicit_gemm/avx2", "implicit_gemm/avx512vnni")}, // conv_i8
		{"direct", shape(1, 4, 7, 4, 3, 1), 0, Direct, ternary.I2S, Direct, every("direct/generic")},
		{"depthwise", shape(1, 4, 7, 4, 3, 4), 8, Auto, ternary.I2S, Depthwise, // by conv_dw's family: channels in the lanes
			fams("depthwise/generic", "depthwise_lanes/avx2", "depthwise_lanes/avx512", "depthwise_lanes/avx512vnni")},
		{"depthwise x2", shape(1, 4, 7, 8, 3, 4), 8, Auto, ternary.I2S, Depthwise, own("depthwise")}, // multiplier 2: per channel
		{"naive", shape(1, 4, 5, 4, 3, 1), 8, Naive, ternary.I2S, Naive, every("naive/generic")},
		{"lut tl1", shape(1, 64, 2, 32, 1, 1), 8, LUT, ternary.TL1, LUT, simd("lut/generic", "lut16/avx2")}, // on request (Auto: TestPreferLUT)
	}
	for _, off := range []string{"", "avx512vnni", "avx512", "avx2"} {
		ks := selectKernels(cpu.ParseDisable(off))
		for _, c := range cases {
			d, err := c.s.Check()
			if err != nil {
				t.Fatal(err)
			}
			tc := newCase(t, rng, c.s, 0, true)
			w := tc.w
			if c.qtype != ternary.I2S {
				w = withQType(t, tc, c.qtype)
			}
			out := make([]float32, d.OutLen)
			info, err := conv2d(&d, tc.x, w, tc.bias, out, Options{ActBits: c.bits, Algo: c.req}, ks)
			if err != nil {
				t.Fatalf("%s disable=%q: %v", c.name, off, err)
			}
			fam := ks.gemm.Family
			switch c.algo {
			case LUT:
				fam = ks.lut.Family
			case Depthwise:
				fam = ks.dw.Family
			}
			if want := c.want[fam]; info.Algo != c.algo || info.Kernel != want {
				t.Errorf("%s disable=%q: ran %v %q, want %v %q", c.name, off, info.Algo, info.Kernel, c.algo, want)
			}
			if c.bits == 8 {
				checkExact(t, c.name+" disable="+off, out, ref8(tc))
			}
		}
	}
	empty := newCase(t, rng, shape(0, 4, 5, 4, 3, 1), 0, false)
	if info, err := Conv2DInfo(empty.d, nil, empty.w, nil, nil, Options{}); err != nil || info != (Info{Algo: Im2col}) {
		t.Errorf("N = 0: %+v, %v", info, err)
	}
}
