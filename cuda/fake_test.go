package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/cuda/driver"
	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// fakeDriver is a driver.Driver over the emulator (emu_test.go): one device
// whose memory is an emuMem arena. Launches and memsets queue up and run on
// the emulator when a copy or synchronisation needs their result, so the
// operations of this package (checks, launch order, workspace, read-back,
// pool use, messages) run as on a GPU, without one and without cgo.
type fakeDriver struct {
	t       *testing.T
	mem     emuMem
	pending []emuStep
	sms     int64
	cc      int // compute capability, major*10 + minor (0: 7.5)
	launchs int
}

// withDriver runs the package's operations on d until the test ends.
func withDriver(t *testing.T, d driver.Driver) {
	old := drv
	drv = d
	t.Cleanup(func() { drv = old })
}

func newFake(t *testing.T) *fakeDriver {
	buildHarness(t)
	f := &fakeDriver{t: t, sms: 1} // gridCap 32: grid-stride loops run
	withDriver(t, f)
	return f
}

func (f *fakeDriver) Status() driver.Status {
	return driver.Status{Available: true, DriverVersion: 13000, DeviceCount: 1}
}

func (f *fakeDriver) Device(i int) (driver.Device, error) {
	if i != 0 {
		return nil, errs.Value("cuda: device index %d is out of range: 1 CUDA device(s) visible", i)
	}
	return f, nil
}

func (f *fakeDriver) EmptyCache() error                  { return nil }
func (f *fakeDriver) Pool() driver.PoolStats             { return driver.PoolStats{} }
func (f *fakeDriver) Ordinal() int                       { return 0 }
func (f *fakeDriver) Name() string                       { return "fake" }
func (f *fakeDriver) Multiprocessors() int64             { return f.sms }
func (f *fakeDriver) ComputeCapability() (int, int)      { return f.cc / 10, f.cc % 10 }
func (f *fakeDriver) Do(fn func(driver.Ctx) error) error { return fn(f) }

func (f *fakeDriver) Module(_, image string, entries []string) ([]driver.Function, error) {
	fns := make([]driver.Function, len(entries))
	for i, e := range entries {
		if !strings.Contains(image, ".entry "+e+"(") {
			return nil, errs.Runtime("no entry %s", e)
		}
		fns[i] = driver.Function{Handle: uint64(i + 1), Name: e}
	}
	return fns, nil
}

func (f *fakeDriver) Launch(fn driver.Function, grid, block driver.Dim3, shared uint32, _ driver.Stream, args ...[]byte) error {
	if grid.X == 0 || grid.X > uint32(f.sms*32) || grid.Y != 1 || grid.Z != 1 || block != (driver.Dim3{X: ctaThreads, Y: 1, Z: 1}) ||
		shared != 0 || len(args) != 1 || (len(args[0]) != int(unsafe.Sizeof(kargs{})) && len(args[0]) != int(unsafe.Sizeof(convArgs{}))) {
		f.t.Fatalf("launch of %s: grid %v block %v shared %d args %d", fn.Name, grid, block, shared, len(args))
	}
	f.launchs++
	f.pending = append(f.pending, emuStep{name: fn.Name, grid: grid.X, args: append([]byte(nil), args[0]...)})
	return nil
}

func (f *fakeDriver) MemsetD32(dst uint64, v uint32, count int64, _ driver.Stream) error {
	f.pending = append(f.pending, emuStep{ptr: dst, value: v, count: count})
	return nil
}

// flush runs what is enqueued.
func (f *fakeDriver) flush() {
	if len(f.pending) > 0 {
		f.mem.runSteps(f.t, f.pending)
		f.pending = nil
	}
}

func (f *fakeDriver) host(p unsafe.Pointer, n int64) []byte { return unsafe.Slice((*byte)(p), n) }

func (f *fakeDriver) CopyHtoD(dst uint64, src unsafe.Pointer, n int64, _ driver.Stream) error {
	f.flush()
	copy(f.mem.bytes(dst, n), f.host(src, n))
	return nil
}

func (f *fakeDriver) CopyDtoH(dst unsafe.Pointer, src uint64, n int64, _ driver.Stream) error {
	f.flush()
	copy(f.host(dst, n), f.mem.bytes(src, n))
	return nil
}

func (f *fakeDriver) CopyDtoD(dst, src uint64, n int64, _ driver.Stream) error {
	f.flush()
	copy(f.mem.bytes(dst, n), f.mem.bytes(src, n))
	return nil
}

func (f *fakeDriver) ReadSync(dst unsafe.Pointer, src uint64, n int64, s driver.Stream) error {
	return f.CopyDtoH(dst, src, n, s)
}

func (f *fakeDriver) Sync(driver.Stream) error { f.flush(); return nil }

func (f *fakeDriver) CheckPointers(ptrs ...uint64) error {
	for _, p := range ptrs {
		if p < vbase || p >= vbase+uint64(len(f.mem.arena)) {
			return errs.Value("cuda: address 0x%x is not CUDA device memory", p)
		}
	}
	return nil
}

func (f *fakeDriver) MemInfo() (int64, int64, error) { return 1 << 30, 1 << 30, nil }

func (f *fakeDriver) Scratch(size int64, _ string, fn func(uint64, driver.Stream) error) error {
	err := fn(f.mem.alloc(size, 0), 7)
	f.flush()
	return err
}

func (f *fakeDriver) Time(s driver.Stream, repeat int, enqueue func() error) (float64, error) {
	for range repeat {
		if err := enqueue(); err != nil {
			return 0, err
		}
	}
	f.flush()
	return 0.5, nil
}

// TestOpsOnFakeDriver runs the exported operations on the fake driver and
// compares with the CPU path (gokern/ternary): results, the non-finite
// error, and the pointer checks.
func TestOpsOnFakeDriver(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 0))
	cases := []struct {
		n, bs int64
		m     ternary.Method
		nan   int64 // index of a NaN, or -1
	}{
		{1, 0, ternary.AbsMean, -1},
		{5000, 0, ternary.AbsMax, -1}, // two-pass
		{20001, 128, ternary.AbsMean, -1},
		{9000, 1000, ternary.AbsMax, -1},
		{4000, 3, ternary.AbsMean, 3999},
		{9000, 0, ternary.AbsMean, 7000},
		{9000, 128, ternary.AbsMax, 12},
	}
	for _, c := range cases {
		f := newFake(t)
		x := make([]float32, c.n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		if c.nan >= 0 {
			x[c.nan] = float32(math.NaN())
		}
		plen, nb := int64(ternary.PackedLen(int(c.n))), int64(ternary.NumBlocks(int(c.n), int(c.bs)))
		wantP, wantS := make([]byte, plen), make([]float32, nb)
		cpuErr := ternary.Quantize(x, int(c.bs), c.m, true, wantP, wantS)
		if (cpuErr != nil) != (c.nan >= 0) {
			t.Fatalf("n=%d: CPU %v", c.n, cpuErr)
		}

		// host memory in and out
		gotP, gotS := make([]byte, plen), make([]float32, nb)
		err := QuantizeHost(0, unsafe.Pointer(&x[0]), c.n, c.bs, c.m, true, unsafe.Pointer(&gotP[0]), plen, unsafe.Pointer(&gotS[0]), nb)
		if !sameResult(err, cpuErr) || (err == nil && (firstDiff(gotP, wantP) >= 0 || !sameFloats(gotS, wantS))) {
			t.Fatalf("n=%d bs=%d: QuantizeHost: %v, CPU %v", c.n, c.bs, err, cpuErr)
		}

		// device memory
		ws, err := WorkspaceSize(c.n, c.bs)
		if err != nil {
			t.Fatal(err)
		}
		xd, pd, sd, wd := f.mem.alloc(4*c.n, 0), f.mem.alloc(plen, 0), f.mem.alloc(4*nb, 0), f.mem.alloc(ws, 0)
		f.mem.putFloats(xd, x)
		err = QuantizeDevice(0, xd, pd, sd, wd, c.n, c.bs, c.m, true, plen, nb, ws, 0)
		if !sameResult(err, cpuErr) {
			t.Fatalf("n=%d bs=%d: QuantizeDevice: %v, CPU %v", c.n, c.bs, err, cpuErr)
		}
		if err != nil {
			continue
		}
		if firstDiff(f.mem.bytes(pd, plen), wantP) >= 0 || !sameFloats(f.mem.floats(sd, nb), wantS) {
			t.Fatalf("n=%d bs=%d: QuantizeDevice differs from the CPU", c.n, c.bs)
		}

		// values() and dequantize()
		qd, fd := f.mem.alloc(c.n, 0), f.mem.alloc(4*c.n, 0)
		if err := UnpackDevice(0, pd, plen, qd, c.n, 0); err != nil {
			t.Fatal(err)
		}
		if err := DequantizeDevice(0, pd, plen, c.bs, sd, nb, fd, c.n, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(0); err != nil {
			t.Fatal(err)
		}
		wantQ, wantF := make([]int8, c.n), make([]float32, c.n)
		if ternary.Unpack(wantP, wantQ) != nil || ternary.Dequantize(wantP, int(c.bs), wantS, wantF) != nil {
			t.Fatal("CPU unpack")
		}
		if firstDiff(f.mem.bytes(qd, c.n), unsafe.Slice((*byte)(unsafe.Pointer(&wantQ[0])), c.n)) >= 0 || !sameFloats(f.mem.floats(fd, c.n), wantF) {
			t.Fatalf("n=%d bs=%d: unpack or dequantize differs from the CPU", c.n, c.bs)
		}

		// timers: repeat launches, then the copy
		before := f.launchs
		if ms, err := TimeQuantize(0, xd, pd, sd, wd, c.n, c.bs, c.m, plen, nb, ws, 0, 3); err != nil || ms != 0.5 {
			t.Fatalf("TimeQuantize: %v %v", ms, err)
		}
		if per := len(quantizeOps(mustPlan(t, c.n, c.bs), c.m, false, devBufs{}, 32)); f.launchs-before != 3*per {
			t.Fatalf("TimeQuantize launched %d kernels, want 3*%d", f.launchs-before, per)
		}
		if _, err := TimeCopy(0, fd, xd, 4*c.n, 0, 2); err != nil || !sameFloats(f.mem.floats(fd, c.n), x) {
			t.Fatalf("TimeCopy: %v", err)
		}

		// pointers that are not device memory, and another device
		host := make([]float32, c.n)
		hp := uint64(uintptr(unsafe.Pointer(&host[0])))
		if err := QuantizeDevice(0, hp, pd, sd, wd, c.n, c.bs, c.m, true, plen, nb, ws, 0); err == nil ||
			!strings.Contains(err.Error(), "is not CUDA device memory") {
			t.Fatalf("host pointer: %v", err)
		}
		if err := UnpackDevice(1, pd, plen, qd, c.n, 0); errs.KindOf(err) != errs.KindValue || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("device 1: %v", err)
		}
	}
}

func mustPlan(t *testing.T, n, bs int64) plan {
	p, err := newPlan(n, bs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sameResult: both succeeded, or both failed with the same message.
func sameResult(err, want error) bool {
	if err == nil || want == nil {
		return err == nil && want == nil
	}
	return err.Error() == want.Error() && errs.KindOf(err) == errs.KindOf(want)
}

func sameFloats(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}
