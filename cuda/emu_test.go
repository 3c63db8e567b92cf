package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// The emulator tests run the real kernel source, i2s.cu, on the CPU
// (testdata/emu: one host thread per CUDA thread, barriers for
// __syncthreads and warp shuffles), driven by the same plan and op list as
// the GPU, and compare the bytes with the CPU path (gokern/ternary). They
// check the index arithmetic, tiles, tails, padding, grid-stride loops and
// barrier structure of the kernels where no GPU is available; the GPU tests
// (tests_py/test_cuda.py) check the real thing.

const vbase = 0x100000000000

var harness struct {
	once sync.Once
	path string
	err  error
}

func buildHarness(t *testing.T) string {
	t.Helper()
	// Read the sources g++ compiles, so that `go test` caching notices edits.
	for _, f := range []string{"i2s.cu", "conv.cu", "testdata/emu/emu.hpp", "testdata/emu/emu_kernels.hpp", "testdata/emu/harness.cc"} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	harness.once.Do(func() {
		cxx, err := exec.LookPath("g++")
		if err != nil {
			harness.err = fmt.Errorf("g++ not found")
			return
		}
		dir, err := os.MkdirTemp("", "bng-emu")
		if err != nil {
			harness.err = err
			return
		}
		harness.path = filepath.Join(dir, "harness")
		cmd := exec.Command(cxx, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-pthread",
			"-Wall", "-Wextra", "-Wno-unknown-pragmas", "-Werror",
			"-I", ".", "-I", "testdata/emu", "testdata/emu/harness.cc", "-o", harness.path)
		if out, err := cmd.CombinedOutput(); err != nil {
			harness.err = fmt.Errorf("building the emulator: %v\n%s", err, out)
		}
	})
	if harness.err != nil {
		if strings.HasPrefix(harness.err.Error(), "g++ not found") {
			t.Skip("g++ not found: the CUDA kernels were not run on the CPU emulator")
		}
		t.Fatal(harness.err)
	}
	return harness.path
}

// emuMem is the emulated device memory: allocations in one arena.
type emuMem struct {
	arena []byte
}

// alloc returns the device address of size new bytes at 256-byte alignment
// plus off.
func (m *emuMem) alloc(size, off int64) uint64 {
	start := align(int64(len(m.arena)), 256) + off
	m.arena = append(m.arena, make([]byte, start+size-int64(len(m.arena)))...)
	return vbase + uint64(start)
}

func (m *emuMem) bytes(addr uint64, size int64) []byte {
	o := int64(addr - vbase)
	return m.arena[o : o+size]
}

func (m *emuMem) putFloats(addr uint64, v []float32) {
	b := m.bytes(addr, 4*int64(len(v)))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
}

func (m *emuMem) floats(addr uint64, n int64) []float32 {
	b := m.bytes(addr, 4*n)
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// emuStep is one step of an emulator program: a launch of the kernel name,
// or (name "") a 32-bit memset.
type emuStep struct {
	name  string
	grid  uint32
	args  []byte // the by-value struct bng_args
	ptr   uint64
	value uint32
	count int64
}

// opSteps is the emulator program of ops.
func opSteps(ops []op) []emuStep {
	steps := make([]emuStep, len(ops))
	for i, o := range ops {
		if o.launch {
			steps[i] = emuStep{name: kernelNames[o.k], grid: o.grid, args: append([]byte(nil), o.argBytes()...)}
		} else {
			steps[i] = emuStep{ptr: o.ptr, value: o.value, count: o.count}
		}
	}
	return steps
}

// run executes ops on the emulator and replaces the arena by the result.
func (m *emuMem) run(t *testing.T, ops []op) { m.runSteps(t, opSteps(ops)) }

func (m *emuMem) runSteps(t *testing.T, steps []emuStep) {
	t.Helper()
	bin := buildHarness(t)
	var prog bytes.Buffer
	prog.WriteString("BNGEMU1\x00")
	le := binary.LittleEndian
	_ = binary.Write(&prog, le, uint64(len(m.arena)))
	prog.Write(m.arena)
	_ = binary.Write(&prog, le, uint64(len(steps)))
	for _, o := range steps {
		if o.name != "" {
			_ = binary.Write(&prog, le, uint32(1))
			_ = binary.Write(&prog, le, uint32(len(o.name)))
			prog.WriteString(o.name)
			_ = binary.Write(&prog, le, o.grid)
			_ = binary.Write(&prog, le, uint32(ctaThreads))
			prog.Write(o.args)
		} else {
			_ = binary.Write(&prog, le, uint32(2))
			_ = binary.Write(&prog, le, o.ptr)
			_ = binary.Write(&prog, le, o.value)
			_ = binary.Write(&prog, le, uint64(o.count))
		}
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "prog"), filepath.Join(dir, "out")
	if err := os.WriteFile(in, prog.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(ctx, bin, in, out).CombinedOutput(); err != nil {
		t.Fatalf("emulator: %v (a deadlock means a barrier or shuffle not reached by every thread)\n%s", err, b)
	}
	res, err := os.ReadFile(out)
	if err != nil || len(res) != len(m.arena) {
		t.Fatalf("emulator output: %v (%d bytes)", err, len(res))
	}
	m.arena = res
}

type emuCase struct {
	n, bs   int64
	m       ternary.Method
	gridCap int64
	xOff    int64 // byte offset of x past 256-byte alignment (4: float4 loads off)
	pOff    int64 // byte offset of packed past 256-byte alignment (1: byte stores)
	special string
}

func (c emuCase) String() string {
	return fmt.Sprintf("n=%d/bs=%d/%v/grid=%d/off=%d,%d/%s", c.n, c.bs, c.m, c.gridCap, c.xOff, c.pOff, c.special)
}

func makeInput(c emuCase, rng *rand.Rand) []float32 {
	x := make([]float32, c.n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	switch c.special {
	case "nan":
		x[c.n*2/3] = float32(math.NaN())
		x[c.n-1] = float32(math.Inf(-1))
	case "inf":
		x[c.n/2] = float32(math.Inf(1))
	case "boundary":
		// absmax: the scale is the block's max|x|; put values exactly at the
		// code threshold t of that scale and one ulp below it.
		bs := c.bs
		if bs == 0 {
			bs = c.n
		}
		for s := int64(0); s < c.n; s += bs {
			e := min(s+bs, c.n)
			mx := float32(0)
			for _, v := range x[s:e] {
				mx = max(mx, float32(math.Abs(float64(v))))
			}
			th, ok := ternary.Threshold(mx)
			if !ok {
				continue
			}
			below := math.Nextafter32(th, 0)
			vals := []float32{th, below, -th, -below, mx / 2, -mx / 2}
			for k, v := range vals {
				if p := s + 1 + int64(k); p < e && float32(math.Abs(float64(x[p]))) != mx {
					x[p] = v
				}
			}
		}
	case "zeros":
		clear(x)
	case "tiny":
		for i := range x {
			x[i] *= 1e-30
		}
	}
	return x
}

func runEmuCase(t *testing.T, c emuCase, rng *rand.Rand) {
	x := makeInput(c, rng)
	p, err := newPlan(c.n, c.bs)
	if err != nil {
		t.Fatal(err)
	}
	plen := int64(ternary.PackedLen(int(c.n)))
	var mem emuMem
	b := devBufs{
		x:      mem.alloc(4*c.n, c.xOff),
		packed: mem.alloc(plen, c.pOff),
		scales: mem.alloc(4*p.nb, 0),
		work:   mem.alloc(p.workBytes(), 0),
	}
	mem.putFloats(b.x, x)
	fill := mem.bytes(b.packed, plen)
	for i := range fill {
		fill[i] = 0xa7 // garbage: every byte must be written
	}
	for _, check := range []bool{true, false} {
		mem.run(t, quantizeOps(p, c.m, check, b, c.gridCap))

		wantP := make([]byte, plen)
		wantS := make([]float32, p.nb)
		cpuErr := ternary.Quantize(x, int(c.bs), c.m, check, wantP, wantS)
		if check {
			bad := binary.LittleEndian.Uint64(mem.bytes(b.work, 8))
			want := uint64(math.MaxUint64)
			if cpuErr != nil {
				var idx uint64
				if _, err := fmt.Sscanf(cpuErr.Error()[strings.Index(cpuErr.Error(), "flat index"):], "flat index %d", &idx); err != nil {
					t.Fatalf("%v: CPU error %q", c, cpuErr)
				}
				want = idx
			}
			if bad != want {
				t.Fatalf("%v: first non-finite index %d, CPU %d (%v)", c, bad, want, cpuErr)
			}
			if cpuErr != nil {
				continue // the CPU path returns no result with the error
			}
		} else if cpuErr != nil {
			t.Fatal(cpuErr)
		}
		gotS := mem.floats(b.scales, p.nb)
		for i := range wantS {
			if math.Float32bits(gotS[i]) != math.Float32bits(wantS[i]) {
				t.Fatalf("%v check=%v: scale %d = %g (%#x), CPU %g (%#x)", c, check, i, gotS[i], math.Float32bits(gotS[i]), wantS[i], math.Float32bits(wantS[i]))
			}
		}
		gotP := mem.bytes(b.packed, plen)
		if i := firstDiff(gotP, wantP); i >= 0 {
			t.Fatalf("%v check=%v: packed byte %d = %#02x, CPU %#02x (plan %+v)", c, check, i, gotP[i], wantP[i], p)
		}
	}

	// values() and dequantize() on the device, from the CPU's codes.
	outQ := mem.alloc(c.n, 0)
	outF := mem.alloc(4*c.n, 0)
	mem.run(t, []op{unpackOp(c.n, b.packed, outQ, c.gridCap), dequantizeOp(c.n, c.bs, b.packed, b.scales, outF, c.gridCap)})
	wantQ := make([]int8, c.n)
	if err := ternary.Unpack(mem.bytes(b.packed, plen), wantQ); err != nil {
		t.Fatal(err)
	}
	for i, q := range mem.bytes(outQ, c.n) {
		if int8(q) != wantQ[i] {
			t.Fatalf("%v: unpack[%d] = %d, CPU %d", c, i, int8(q), wantQ[i])
		}
	}
	wantF := make([]float32, c.n)
	if err := ternary.Dequantize(mem.bytes(b.packed, plen), int(c.bs), mem.floats(b.scales, p.nb), wantF); err != nil {
		t.Fatal(err)
	}
	for i, f := range mem.floats(outF, c.n) {
		if math.Float32bits(f) != math.Float32bits(wantF[i]) && !(f != f && wantF[i] != wantF[i]) {
			t.Fatalf("%v: dequantize[%d] = %g, CPU %g", c, i, f, wantF[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestEmulatedKernels(t *testing.T) {
	buildHarness(t)
	mean, amax := ternary.AbsMean, ternary.AbsMax
	cases := []emuCase{
		// fused, one tile
		{n: 1, bs: 0, m: mean, gridCap: 4},
		{n: 5, bs: 0, m: amax, gridCap: 4},
		{n: 31, bs: 0, m: mean, gridCap: 4},
		{n: 100, bs: 0, m: mean, gridCap: 4},
		{n: 129, bs: 32, m: mean, gridCap: 4},
		{n: 1000, bs: 3, m: amax, gridCap: 4},
		{n: 4096, bs: 0, m: mean, gridCap: 4, xOff: 4},
		{n: 3000, bs: 1000, m: mean, gridCap: 4},
		{n: 4000, bs: 1, m: mean, gridCap: 4},
		// fused, many tiles (grid-stride with a small grid)
		{n: 9000, bs: 1, m: amax, gridCap: 3},
		{n: 10000, bs: 3, m: mean, gridCap: 3},
		{n: 10007, bs: 17, m: mean, gridCap: 3},
		{n: 20000, bs: 32, m: mean, gridCap: 3},
		{n: 20001, bs: 64, m: amax, gridCap: 3, xOff: 4},
		{n: 20002, bs: 96, m: mean, gridCap: 3},
		{n: 20003, bs: 100, m: mean, gridCap: 3},
		{n: 20004, bs: 128, m: mean, gridCap: 2},
		{n: 20005, bs: 256, m: amax, gridCap: 3},
		{n: 20006, bs: 1024, m: mean, gridCap: 3},
		{n: 20007, bs: 2048, m: mean, gridCap: 3},
		{n: 20008, bs: 4096, m: amax, gridCap: 3},
		{n: 20009, bs: 384, m: mean, gridCap: 100},
		// warp kernel (bs 32..512): tails, partial steps, small grids,
		// unaligned x and packed
		{n: 64, bs: 32, m: mean, gridCap: 4},
		{n: 511, bs: 128, m: amax, gridCap: 4},
		{n: 1024, bs: 512, m: mean, gridCap: 1},
		{n: 16384, bs: 128, m: mean, gridCap: 2},
		{n: 16385, bs: 128, m: amax, gridCap: 3, xOff: 4, pOff: 1},
		{n: 20100, bs: 32, m: amax, gridCap: 2, pOff: 2},
		{n: 20033, bs: 64, m: mean, gridCap: 5, xOff: 8},
		{n: 20001, bs: 256, m: mean, gridCap: 100},
		{n: 20500, bs: 512, m: amax, gridCap: 3},
		{n: 3000, bs: 1024, m: mean, gridCap: 1},
		{n: 20480, bs: 1024, m: amax, gridCap: 2},
		{n: 20999, bs: 1024, m: mean, gridCap: 3, xOff: 4, pOff: 3},
		{n: 21000, bs: 1024, m: mean, gridCap: 3, special: "nan"},
		{n: 9000, bs: 1024, m: amax, gridCap: 3, special: "boundary"},
		{n: 9000, bs: 32, m: mean, gridCap: 3, special: "nan"},
		{n: 9000, bs: 512, m: amax, gridCap: 3, special: "inf"},
		{n: 9000, bs: 64, m: amax, gridCap: 3, special: "boundary"},
		{n: 9000, bs: 256, m: mean, gridCap: 3, special: "zeros"},
		{n: 9000, bs: 128, m: mean, gridCap: 3, special: "tiny"},
		// two-pass: one scale, and blocks that do not fit a tile
		{n: 4097, bs: 0, m: mean, gridCap: 3},
		{n: 30001, bs: 0, m: amax, gridCap: 2, xOff: 4},
		{n: 30002, bs: 0, m: mean, gridCap: 100},
		{n: 20003, bs: 33, m: mean, gridCap: 3},
		{n: 20004, bs: 1000, m: amax, gridCap: 3},
		{n: 20005, bs: 5000, m: mean, gridCap: 3},
		{n: 270000, bs: 135000, m: mean, gridCap: 6}, // 66 chunks per block: one CTA per block
		// non-finite input, exact thresholds, degenerate scales
		{n: 20001, bs: 128, m: mean, gridCap: 3, special: "nan"},
		{n: 20001, bs: 0, m: mean, gridCap: 3, special: "nan"},
		{n: 20001, bs: 1000, m: amax, gridCap: 3, special: "nan"},
		{n: 5000, bs: 0, m: amax, gridCap: 3, special: "inf"},
		{n: 3001, bs: 96, m: amax, gridCap: 3, special: "inf"},
		{n: 20000, bs: 128, m: amax, gridCap: 3, special: "boundary"},
		{n: 20000, bs: 1000, m: amax, gridCap: 3, special: "boundary"},
		{n: 20000, bs: 0, m: amax, gridCap: 3, special: "boundary"},
		{n: 5000, bs: 0, m: mean, gridCap: 3, special: "zeros"},
		{n: 5000, bs: 32, m: amax, gridCap: 3, special: "tiny"},
	}
	if testing.Short() {
		cases = cases[:8]
	}
	rng := rand.New(rand.NewPCG(6, 0))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) { runEmuCase(t, c, rng) })
	}
}
