package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bitnet-go/bitnet_go/gokern/ops/conv2d"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The W1.58A8 convolution kernels (conv.cu) on the emulator, compared bit
// for bit with the CPU path (gokern/ops/conv2d, act_bits=8) on random
// shapes: odd sizes, strides, padding, dilation, groups, batches, scale
// blocks, bias or none, and linear layers (the GEMV kernel) of 1..8 and
// more columns.

type convCase struct {
	s         conv2d.Shape
	blockSize int // 0: one scale; -1: one per output channel (K)
	bias      bool
	gridCap   int64
	wOff      int64 // byte offset of the packed weight past 256-byte alignment
	special   string
}

func (c convCase) String() string {
	s := c.s
	return fmt.Sprintf("N%d_C%d_%dx%d_O%d_k%dx%d_g%d_s%d,%d_p%d,%d,%d,%d_d%d,%d_bs%d_bias%v_grid%d_woff%d_%s",
		s.N, s.C, s.H, s.W, s.O, s.KH, s.KW, s.Groups, s.StrideH, s.StrideW, s.PadT, s.PadL, s.PadB, s.PadR,
		s.DilH, s.DilW, c.blockSize, c.bias, c.gridCap, c.wOff, c.special)
}

// convData is one case's random operands and the CPU's result.
type convData struct {
	d         conv2d.Dims
	x, bias   []float32
	packed    []byte
	scales    []float32
	blockSize int
	want      []float32 // the CPU path's W1.58A8 result
	wantF     []float32 // the CPU path's float32-activation result
}

func makeConvData(t *testing.T, c convCase, rng *rand.Rand) convData {
	t.Helper()
	d, err := c.s.Check()
	if err != nil {
		t.Fatal(err)
	}
	cd := convData{d: d, x: make([]float32, d.XLen), blockSize: c.blockSize}
	for i := range cd.x {
		cd.x[i] = float32(rng.NormFloat64()) * 3
	}
	switch c.special {
	case "ties": // values that land on x*a = k + 0.5 exactly: max|x| = 127 gives a = 1
		for i := range cd.x {
			cd.x[i] = float32(rng.IntN(255)-127) + 0.5*float32(rng.IntN(2))
		}
		cd.x[0] = 127
	case "zeros":
		clear(cd.x)
	case "tiny":
		for i := range cd.x {
			cd.x[i] *= 1e-7
		}
	}
	if cd.blockSize < 0 {
		cd.blockSize = d.K
	}
	vals := make([]int8, d.WLen)
	for i := range vals {
		vals[i] = int8(rng.IntN(3) - 1)
	}
	cd.packed = make([]byte, ternary.PackedLen(d.WLen))
	if err := ternary.Pack(vals, cd.packed); err != nil {
		t.Fatal(err)
	}
	cd.scales = make([]float32, ternary.NumBlocks(d.WLen, cd.blockSize))
	for i := range cd.scales {
		cd.scales[i] = float32(rng.Float64()*0.2 + 0.01)
	}
	if c.bias {
		cd.bias = make([]float32, d.O)
		for i := range cd.bias {
			cd.bias[i] = float32(rng.NormFloat64())
		}
	}
	cd.want = make([]float32, d.OutLen)
	w := conv2d.Weights{Packed: cd.packed, Scales: cd.scales, BlockSize: cd.blockSize, QType: ternary.I2S}
	if _, err := conv2d.Conv2DInfo(d, cd.x, w, cd.bias, cd.want, conv2d.Options{ActBits: 8, Algo: conv2d.Naive}); err != nil {
		t.Fatal(err)
	}
	cd.wantF = make([]float32, d.OutLen)
	if _, err := conv2d.Conv2DInfo(d, cd.x, w, cd.bias, cd.wantF, conv2d.Options{Algo: conv2d.Naive}); err != nil {
		t.Fatal(err)
	}
	return cd
}

// closeF reports whether the float32-activation results agree to float32
// rounding, with test_conv.py's tolerances for the CPU float kernels: the
// relative error of the whole output at most 1e-5, each value within
// 1e-4 relative plus 1e-5 absolute. NaN (an output never written) fails.
func closeF(got, want []float32) (int, bool) {
	var num, den float64
	for i := range got {
		dv := float64(got[i]) - float64(want[i])
		if !(math.Abs(dv) <= 1e-4*math.Abs(float64(want[i]))+1e-5) {
			return i, false
		}
		num += dv * dv
		den += float64(want[i]) * float64(want[i])
	}
	return -1, math.Sqrt(num) <= 1e-5*math.Max(math.Sqrt(den), 1e-30)
}

func runConvEmuCase(t *testing.T, c convCase, rng *rand.Rand, float, tc bool) {
	cd := makeConvData(t, c, rng)
	d := &cd.d
	p, err := newConvPlan(d, int64(cd.blockSize), int64(len(cd.scales)), float)
	if err != nil {
		t.Fatal(err)
	}
	var mem emuMem
	b := convBufs{
		x:      mem.alloc(4*int64(d.XLen), 0),
		w:      mem.alloc(int64(len(cd.packed)), c.wOff),
		scales: mem.alloc(4*int64(len(cd.scales)), 0),
		out:    mem.alloc(4*int64(d.OutLen), 0),
		work:   mem.alloc(p.work, 0),
	}
	if cd.bias != nil {
		b.bias = mem.alloc(4*int64(d.O), 0)
		mem.putFloats(b.bias, cd.bias)
	}
	mem.putFloats(b.x, cd.x)
	copy(mem.bytes(b.w, int64(len(cd.packed))), cd.packed)
	mem.putFloats(b.scales, cd.scales)
	for _, check := range []bool{false, true} {
		garbage := make([]float32, d.OutLen)
		for i := range garbage {
			garbage[i] = float32(math.NaN()) // every output must be written
		}
		mem.putFloats(b.out, garbage)
		scan, run := convOps(p, check, b, c.gridCap, tc)
		mem.run(t, append(scan, run...))
		if check {
			if bad := mem.bytes(b.work, 8); bad[0] != 0xff || bad[7] != 0xff {
				t.Fatalf("%v: finite x reported non-finite at %x", c, bad)
			}
		}
		got := mem.floats(b.out, int64(d.OutLen))
		if float {
			if i, ok := closeF(got, cd.wantF); !ok {
				t.Fatalf("%v (float, check=%v): out differs from the CPU's float path (first at %d; -1: the norm)", c, check, i)
			}
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(cd.want[i]) {
				t.Fatalf("%v (gemv=%v): out[%d] = %g (%#x), CPU %g (%#x)", c, p.gemv, i, got[i],
					math.Float32bits(got[i]), cd.want[i], math.Float32bits(cd.want[i]))
			}
		}
	}
}

func shape(n, c, h, w, o, kh, kw, groups, stride, pad, dil int) conv2d.Shape {
	return conv2d.Shape{N: n, C: c, H: h, W: w, O: o, WC: c / groups, KH: kh, KW: kw, Groups: groups,
		StrideH: stride, StrideW: stride, PadT: pad, PadL: pad, PadB: pad, PadR: pad, DilH: dil, DilW: dil}
}

// linear is a linear layer (n rows of k features, o outputs) as a 1x1 convolution.
func linear(n, k, o int) conv2d.Shape { return shape(n, k, 1, 1, o, 1, 1, 1, 1, 0, 1) }

func convEmuCases() []convCase {
	asym := shape(2, 3, 9, 8, 5, 3, 2, 1, 1, 0, 1)
	asym.StrideH, asym.StrideW, asym.PadT, asym.PadL, asym.PadB, asym.PadR, asym.DilH, asym.DilW = 2, 1, 1, 0, 2, 3, 1, 2
	return []convCase{
		{s: shape(1, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1), blockSize: -1, gridCap: 4},
		{s: shape(2, 5, 7, 6, 7, 3, 3, 1, 1, 0, 1), blockSize: 0, bias: true, gridCap: 3},
		{s: shape(3, 4, 9, 11, 70, 3, 3, 1, 2, 1, 1), blockSize: -1, bias: true, gridCap: 2, wOff: 1}, // 2 channel tiles, stride 2
		{s: shape(1, 6, 10, 9, 6, 3, 3, 3, 1, 2, 2), blockSize: 9, bias: true, gridCap: 5},            // groups, dilation, 2 blocks per channel
		{s: shape(2, 4, 6, 7, 4, 3, 3, 4, 1, 1, 1), blockSize: -1, gridCap: 3},                        // depthwise
		{s: shape(1, 8, 12, 12, 5, 1, 1, 1, 1, 0, 1), blockSize: 2, bias: true, gridCap: 3},           // 1x1, 4 blocks
		{s: shape(1, 3, 13, 12, 3, 5, 4, 1, 3, 2, 1), blockSize: 0, gridCap: 2},                       // 156 positions: 3 tiles
		{s: shape(2, 70, 3, 3, 3, 2, 2, 1, 1, 0, 1), blockSize: 35, gridCap: 3},                       // K 280: k steps across blocks
		{s: asym, blockSize: -1, bias: true, gridCap: 3},
		{s: shape(1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1), blockSize: 0, gridCap: 2, special: "ties"},
		{s: shape(2, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1), blockSize: -1, bias: true, gridCap: 2, special: "zeros"},
		{s: shape(1, 2, 4, 4, 3, 3, 3, 1, 1, 1, 1), blockSize: -1, gridCap: 2, special: "tiny"},
		// linear layers: the GEMV kernel (K and blocks multiples of 128)
		{s: linear(1, 128, 5), blockSize: 0, gridCap: 2},
		{s: linear(2, 256, 17), blockSize: -1, bias: true, gridCap: 1},
		{s: linear(3, 384, 9), blockSize: 128, bias: true, gridCap: 2, wOff: 2}, // 3 blocks, unaligned words
		{s: linear(5, 640, 8), blockSize: -1, gridCap: 2},                       // 5 groups: a partial warp step
		{s: linear(8, 128, 3), blockSize: 0, bias: true, gridCap: 1},
		{s: linear(11, 256, 4), blockSize: 256, gridCap: 2}, // 2 launches of 8 and 3 columns
		{s: linear(7, 1024, 6), blockSize: 512, gridCap: 3},
		{s: linear(4, 1024, 5), blockSize: 0, gridCap: 3, special: "ties"},
		// linear shapes whose K or block is not a multiple of 128: bng_linear_gemv_any
		{s: linear(3, 100, 6), blockSize: -1, bias: true, gridCap: 2},
		{s: linear(2, 256, 3), blockSize: 64, gridCap: 2},
		{s: linear(1, 37, 9), blockSize: 0, bias: true, gridCap: 2},        // K odd: unaligned rows and x
		{s: linear(5, 130, 7), blockSize: -1, gridCap: 3, wOff: 1},         // rows across groups, unaligned words
		{s: linear(11, 100, 5), blockSize: 25, bias: true, gridCap: 2},     // 4 blocks of 25, 2 launches
		{s: linear(4, 3, 70), blockSize: 0, gridCap: 4},                    // K 3
		{s: linear(2, 257, 4), blockSize: 257, gridCap: 1, wOff: 3},        // one scale per row, K odd
		{s: linear(6, 384, 5), blockSize: 96, bias: true, gridCap: 2},      // K a multiple of 128, blocks not
		{s: linear(3, 1000, 3), blockSize: 0, gridCap: 2, special: "ties"}, // several warp steps per row
	}
}

func TestEmulatedConvKernels(t *testing.T) {
	buildHarness(t)
	cases := convEmuCases()
	if testing.Short() {
		cases = cases[:3]
	}
	rng := rand.New(rand.NewPCG(20, 0))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runConvEmuCase(t, c, rng, false, false) })
	}
}

// TestEmulatedConvTensorCoreKernel runs bng_conv_igemm_mma (the int8
// tensor-core products, mma.sync m8n8k16 computed by the emulator from the
// PTX ISA's fragment layout) on the same shapes, bit for bit against the CPU.
func TestEmulatedConvTensorCoreKernel(t *testing.T) {
	buildHarness(t)
	cases := convEmuCases()
	if testing.Short() {
		cases = cases[:3]
	}
	rng := rand.New(rand.NewPCG(23, 0))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runConvEmuCase(t, c, rng, false, true) })
	}
}

// TestEmulatedConvFloatKernel runs bng_conv_fgemm (act_bits=None) on the
// same shapes, against the CPU path's float32 activations.
func TestEmulatedConvFloatKernel(t *testing.T) {
	buildHarness(t)
	cases := convEmuCases()
	if testing.Short() {
		cases = cases[:3]
	}
	rng := rand.New(rand.NewPCG(21, 0))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runConvEmuCase(t, c, rng, true, false) })
	}
}

// TestConvPlanKernels checks which kernel each shape takes.
func TestConvPlanKernels(t *testing.T) {
	for _, c := range convEmuCases() {
		d, err := c.s.Check()
		if err != nil {
			t.Fatal(err)
		}
		bs := c.blockSize
		if bs < 0 {
			bs = d.K
		}
		p, err := newConvPlan(&d, int64(bs), int64(ternary.NumBlocks(d.WLen, bs)), false)
		if err != nil {
			t.Fatal(err)
		}
		wantGemv := c.s.H == 1 && c.s.W == 1 && c.s.KH == 1
		wantAl := wantGemv && d.K%128 == 0 && p.bl%128 == 0
		if p.gemv != wantGemv || p.gemvAl != wantAl {
			t.Errorf("%v: gemv %v (aligned %v), want %v (%v)", c, p.gemv, p.gemvAl, wantGemv, wantAl)
		}
		pf, err := newConvPlan(&d, int64(bs), int64(ternary.NumBlocks(d.WLen, bs)), true)
		if err != nil {
			t.Fatal(err)
		}
		wantF := "cuda_implicit_gemm/fp32"
		if wantGemv && c.s.N <= gemvCols {
			wantF = "cuda_gemv/fp32"
		}
		if pf.kernelName(true) != wantF {
			t.Errorf("%v float: gemv %v, kernel %s, want %s", c, pf.gemv, pf.kernelName(true), wantF)
		}
	}
}

// TestEmulatedCheckCodes runs the scan of a checked convolution on weights
// holding code 3 at random positions (none, one, several; the last value;
// and codes 3 in the padding of a short last group, which are not values):
// the slot at offBadCode must hold the smallest position of a value with
// code 3, as the CPU path reports it.
func TestEmulatedCheckCodes(t *testing.T) {
	buildHarness(t)
	rng := rand.New(rand.NewPCG(22, 0))
	for _, c := range convEmuCases()[:8] {
		cd := makeConvData(t, c, rng)
		d := &cd.d
		n := d.WLen
		for trial := range 5 {
			packed := append([]byte(nil), cd.packed...)
			want := uint64(math.MaxUint64)
			set := func(p int) {
				b, sh := (p>>7)<<5|p&31, 6-2*((p>>5)&3)
				packed[b] |= 3 << sh
				if p < n && uint64(p) < want {
					want = uint64(p)
				}
			}
			switch trial {
			case 1:
				set(rng.IntN(n))
			case 2:
				for range 3 {
					set(rng.IntN(n))
				}
			case 3:
				set(n - 1)
			case 4: // padding only (when the last group is short), then one value
				for p := n; p < (n+127)/128*128; p++ {
					set(p)
				}
				if rng.IntN(2) == 0 {
					set(rng.IntN(n))
				}
			}
			p, err := newConvPlan(d, int64(cd.blockSize), int64(len(cd.scales)), trial%2 == 0)
			if err != nil {
				t.Fatal(err)
			}
			var mem emuMem
			b := convBufs{
				x: mem.alloc(4*int64(d.XLen), 0), w: mem.alloc(int64(len(packed)), c.wOff),
				scales: mem.alloc(4*int64(len(cd.scales)), 0), out: mem.alloc(4*int64(d.OutLen), 0), work: mem.alloc(p.work, 0),
			}
			mem.putFloats(b.x, cd.x)
			copy(mem.bytes(b.w, int64(len(packed))), packed)
			mem.putFloats(b.scales, cd.scales)
			scan, _ := convOps(p, true, b, c.gridCap, trial%3 == 0)
			mem.run(t, scan)
			got := binary.LittleEndian.Uint64(mem.bytes(b.work+offBadCode, 8))
			if got != want {
				t.Fatalf("%v trial %d: first code 3 at %d, want %d", c, trial, got, want)
			}
		}
	}
}

// TestConvKernelByCapability runs Conv2DDevice on the fake driver as GPUs
// of compute capability 7.5, 8.0 and 9.0: the tensor-core implicit GEMM
// from sm_80 on, dp4a before, the same bits either way; linear layers take
// the GEMVs whatever the GPU.
func TestConvKernelByCapability(t *testing.T) {
	f := newFake(t)
	rng := rand.New(rand.NewPCG(24, 0))
	for _, c := range []convCase{
		{s: shape(2, 5, 7, 6, 70, 3, 3, 1, 1, 1, 1), blockSize: -1, bias: true},
		{s: linear(3, 100, 6), blockSize: 0},
	} {
		cd := makeConvData(t, c, rng)
		d := &cd.d
		work := ConvWorkspaceSize(d)
		o := ConvOperands{
			X: f.mem.alloc(4*int64(d.XLen), 0), W: f.mem.alloc(int64(len(cd.packed)), 0),
			Scales: f.mem.alloc(4*int64(len(cd.scales)), 0), Out: f.mem.alloc(4*int64(d.OutLen), 0),
			Work: f.mem.alloc(work, 0), WBytes: int64(len(cd.packed)), NScales: int64(len(cd.scales)),
			BlockSize: int64(cd.blockSize), WorkLen: work,
		}
		if cd.bias != nil {
			o.Bias = f.mem.alloc(4*int64(d.O), 0)
			f.mem.putFloats(o.Bias, cd.bias)
		}
		f.mem.putFloats(o.X, cd.x)
		copy(f.mem.bytes(o.W, o.WBytes), cd.packed)
		f.mem.putFloats(o.Scales, cd.scales)
		for _, cc := range []int{75, 80, 90} {
			f.cc = cc
			kernel, err := Conv2DDevice(0, d, o, 8, true, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.flush()
			want := "cuda_implicit_gemm/dp4a"
			switch {
			case d.H == 1:
				want = "cuda_gemv_unaligned/dp4a"
			case cc >= 80:
				want = "cuda_implicit_gemm/mma_m8n8k16"
			}
			if kernel != want {
				t.Errorf("%v on sm_%d: kernel %s, want %s", c, cc, kernel, want)
			}
			got := f.mem.floats(o.Out, int64(d.OutLen))
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(cd.want[i]) {
					t.Fatalf("%v on sm_%d: out[%d] = %g, CPU %g", c, cc, i, got[i], cd.want[i])
				}
			}
		}
	}
}
