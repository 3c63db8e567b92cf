//go:build linux && cgo

package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// libcuda is the driver loaded by the shim, once per process.
type libcuda struct {
	once    sync.Once
	status  Status
	devices []*device
}

var (
	system        Driver = &libcuda{}
	modulesLoaded atomic.Int64
)

func (l *libcuda) Status() Status {
	l.once.Do(l.load)
	return l.status
}

func (l *libcuda) load() {
	s := &l.status
	if why := load(); why != "" {
		s.Reason = "cuda: no NVIDIA driver: libcuda.so.1 could not be loaded (" + why + ")"
		return
	}
	if v, r := cuDriverGetVersion(); r == 0 {
		s.DriverVersion = v
	}
	if r := cuInit(); r != 0 {
		name, desc := errorText(r)
		if r == errNoDevice {
			s.Reason = fmt.Sprintf("cuda: the NVIDIA driver is installed but no CUDA GPU was found (cuInit: %s: %s)", name, desc)
		} else {
			s.Reason = fmt.Sprintf("cuda: cuInit failed: %s: %s", name, desc)
		}
		return
	}
	n, r := cuDeviceGetCount()
	if r != 0 {
		s.Reason = check("cuDeviceGetCount", r).Error()
		return
	}
	if n == 0 {
		s.Reason = "cuda: the NVIDIA driver is installed but no CUDA GPU was found (cuDeviceGetCount: 0)"
		return
	}
	for i := range n {
		d := &device{ord: i, pool: pool{free: map[int64][]uint64{}}, modules: map[string]*module{}}
		if err := d.attributes(); err != nil {
			s.Reason = err.Error()
			l.devices = nil
			return
		}
		l.devices = append(l.devices, d)
	}
	s.DeviceCount, s.Available = n, true
}

func (l *libcuda) Device(i int) (Device, error) {
	s := l.Status()
	if !s.Available {
		return nil, errs.Runtime("%s", s.Reason)
	}
	if i < 0 || i >= len(l.devices) {
		return nil, errs.Value("cuda: device index %d is out of range: %d CUDA device(s) visible", i, len(l.devices))
	}
	return l.devices[i], nil
}

func (l *libcuda) EmptyCache() error {
	if !l.Status().Available {
		return nil
	}
	var first error
	for _, d := range l.devices {
		d.mu.Lock()
		ready := d.ctxDone && d.ctxErr == nil
		d.mu.Unlock()
		if !ready {
			continue
		}
		if err := d.Do(func(Ctx) error { return d.releaseIdle() }); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (l *libcuda) Pool() PoolStats {
	var st PoolStats
	if !l.Status().Available {
		return st
	}
	for _, d := range l.devices {
		d.pool.addTo(&st)
	}
	st.ModulesLoaded = int(modulesLoaded.Load())
	return st
}

// device is one GPU: handle and attributes (read when the driver is
// loaded), its primary context and modules (on first use), and its pool.
type device struct {
	ord  int
	dev  int32
	name string
	sms  int64
	cc   [2]int

	mu      sync.Mutex // guards the lazy state below
	ctxDone bool
	ctxErr  error
	ctx     uintptr
	modules map[string]*module

	pool pool
}

type module struct {
	fns []Function
	err error
}

func (d *device) Ordinal() int                          { return d.ord }
func (d *device) Name() string                          { return d.name }
func (d *device) Multiprocessors() int64                { return d.sms }
func (d *device) ComputeCapability() (major, minor int) { return d.cc[0], d.cc[1] }

func (d *device) attributes() error {
	var r result
	if d.dev, r = cuDeviceGet(d.ord); r != 0 {
		return check("cuDeviceGet", r)
	}
	if d.name, r = cuDeviceGetName(d.dev); r != 0 {
		return check("cuDeviceGetName", r)
	}
	v, r := cuDeviceGetAttribute(attrMultiprocessors, d.dev)
	if r != 0 {
		return check("cuDeviceGetAttribute", r)
	}
	d.sms = int64(v)
	for k, a := range []int{attrCCMajor, attrCCMinor} {
		if d.cc[k], r = cuDeviceGetAttribute(a, d.dev); r != 0 {
			return check("cuDeviceGetAttribute", r)
		}
	}
	return nil
}

func (d *device) Do(fn func(Ctx) error) error {
	d.mu.Lock()
	if !d.ctxDone {
		var r result
		d.ctx, r = cuDevicePrimaryCtxRetain(d.dev)
		d.ctxErr, d.ctxDone = check("cuDevicePrimaryCtxRetain", r), true
	}
	err := d.ctxErr
	d.mu.Unlock()
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := cuCtxPushCurrent(d.ctx); r != 0 {
		return check("cuCtxPushCurrent", r)
	}
	defer cuCtxPopCurrent()
	return fn(ctx{d})
}

// ctx implements Ctx; its methods run in Do, with d's context current.
type ctx struct{ d *device }

func (c ctx) Module(name, image string, entries []string) ([]Function, error) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.modules[name]
	if m == nil {
		m = &module{}
		m.fns, m.err = d.loadModule(name, image, entries)
		d.modules[name] = m
	}
	return m.fns, m.err
}

func (d *device) loadModule(name, image string, entries []string) ([]Function, error) {
	mod, log, r := moduleLoad(image)
	if r != 0 {
		err := check(fmt.Sprintf("cuModuleLoadData (%s, on cuda:%d %s, compute capability %d.%d)",
			name, d.ord, d.name, d.cc[0], d.cc[1]), r)
		if log != "" {
			err = errs.Runtime("%s\nJIT log: %s", err, log)
		}
		return nil, err
	}
	fns := make([]Function, len(entries))
	for i, e := range entries {
		h, r := cuModuleGetFunction(mod, e)
		if r != 0 {
			return nil, check("cuModuleGetFunction("+e+")", r)
		}
		fns[i] = Function{Handle: h, Name: e}
	}
	modulesLoaded.Add(1)
	return fns, nil
}

func (c ctx) Launch(f Function, grid, block Dim3, shared uint32, s Stream, args ...[]byte) error {
	return check("cuLaunchKernel("+f.Name+")", cuLaunchKernel(f.Handle, grid, block, shared, s, args))
}

func (c ctx) MemsetD32(dst uint64, value uint32, count int64, s Stream) error {
	return check("cuMemsetD32Async", cuMemsetD32Async(dst, value, count, s))
}

func (c ctx) CopyHtoD(dst uint64, src unsafe.Pointer, n int64, s Stream) error {
	return check("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync(dst, src, n, s))
}

func (c ctx) CopyDtoH(dst unsafe.Pointer, src uint64, n int64, s Stream) error {
	return check("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync(dst, src, n, s))
}

func (c ctx) CopyDtoD(dst, src uint64, n int64, s Stream) error {
	return check("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(dst, src, n, s))
}

func (c ctx) ReadSync(dst unsafe.Pointer, src uint64, n int64, s Stream) error {
	step, r := dtohSync(dst, src, n, s)
	if step == 0 {
		return check("cuMemcpyDtoHAsync", r)
	}
	return check("cuStreamSynchronize", r)
}

func (c ctx) Sync(s Stream) error { return check("cuStreamSynchronize", cuStreamSynchronize(s)) }

func (c ctx) CheckPointers(ptrs ...uint64) error {
	for _, p := range ptrs {
		ord, r := pointerDevice(p)
		if r == errInvalidValue {
			return errs.Value("cuda: address 0x%x is not CUDA device memory", p)
		}
		if r != 0 {
			return check("cuPointerGetAttribute", r)
		}
		if ord != c.d.ord {
			return errs.Value("cuda: address 0x%x is memory of cuda:%d, but the call runs on cuda:%d", p, ord, c.d.ord)
		}
	}
	return nil
}

func (c ctx) MemInfo() (free, total int64, err error) {
	free, total, r := cuMemGetInfo()
	return free, total, check("cuMemGetInfo", r)
}

func (c ctx) Time(s Stream, repeat int, enqueue func() error) (float64, error) {
	var ev [2]uintptr
	for i := range ev {
		e, r := cuEventCreate()
		if r != 0 {
			for j := range i {
				cuEventDestroy(ev[j])
			}
			return 0, check("cuEventCreate", r)
		}
		ev[i] = e
	}
	defer cuEventDestroy(ev[0])
	defer cuEventDestroy(ev[1])
	if r := cuEventRecord(ev[0], s); r != 0 {
		return 0, check("cuEventRecord", r)
	}
	for range repeat {
		if err := enqueue(); err != nil {
			return 0, err
		}
	}
	if r := cuEventRecord(ev[1], s); r != 0 {
		return 0, check("cuEventRecord", r)
	}
	if r := cuEventSynchronize(ev[1]); r != 0 {
		return 0, check("cuEventSynchronize", r)
	}
	ms, r := cuEventElapsedTime(ev[0], ev[1])
	if r != 0 {
		return 0, check("cuEventElapsedTime", r)
	}
	return float64(ms) / float64(repeat), nil
}
