//go:build linux && cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Our own typedefs of the driver API (cuda.h is not needed to build). Handles
// cross into Go as uintptr_t; device pointers as CUdeviceptr.
typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUmodule;
typedef void* CUfunction;
typedef void* CUstream;
typedef void* CUevent;
typedef unsigned long long CUdeviceptr;
typedef int CUjit_option;

static void* bng_h;
static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int*);
static CUresult (*p_cuDeviceGetCount)(int*);
static CUresult (*p_cuDeviceGet)(CUdevice*, int);
static CUresult (*p_cuDeviceGetName)(char*, int, CUdevice);
static CUresult (*p_cuDeviceGetAttribute)(int*, int, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*p_cuCtxPushCurrent)(CUcontext);
static CUresult (*p_cuCtxPopCurrent)(CUcontext*);
static CUresult (*p_cuModuleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**);
static CUresult (*p_cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
static CUresult (*p_cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, unsigned int, CUstream, void**, void**);
static CUresult (*p_cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
static CUresult (*p_cuMemGetInfo)(size_t*, size_t*);
static CUresult (*p_cuStreamCreate)(CUstream*, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuEventCreate)(CUevent*, unsigned int);
static CUresult (*p_cuEventRecord)(CUevent, CUstream);
static CUresult (*p_cuEventSynchronize)(CUevent);
static CUresult (*p_cuEventElapsedTime)(float*, CUevent, CUevent);
static CUresult (*p_cuEventDestroy)(CUevent);
static CUresult (*p_cuPointerGetAttribute)(void*, int, CUdeviceptr);
static CUresult (*p_cuGetErrorName)(CUresult, const char**);
static CUresult (*p_cuGetErrorString)(CUresult, const char**);

// bng_load dlopens the driver and resolves every symbol (the _v2 ABI where
// cuda.h maps a name to it). Called once, under a Go sync.Once.
static int bng_load(char* err, size_t cap) {
	void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		snprintf(err, cap, "%s", e ? e : "dlopen failed");
		return 1;
	}
#define BNG_SYM(p, name)                                                                    \
	do {                                                                                    \
		*(void**)(&p) = dlsym(h, name);                                                     \
		if (!p) {                                                                           \
			snprintf(err, cap, "libcuda.so.1 has no symbol %s (driver too old?)", name);     \
			return 2;                                                                       \
		}                                                                                   \
	} while (0)
	BNG_SYM(p_cuGetErrorName, "cuGetErrorName");
	BNG_SYM(p_cuGetErrorString, "cuGetErrorString");
	BNG_SYM(p_cuInit, "cuInit");
	BNG_SYM(p_cuDriverGetVersion, "cuDriverGetVersion");
	BNG_SYM(p_cuDeviceGetCount, "cuDeviceGetCount");
	BNG_SYM(p_cuDeviceGet, "cuDeviceGet");
	BNG_SYM(p_cuDeviceGetName, "cuDeviceGetName");
	BNG_SYM(p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
	BNG_SYM(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	BNG_SYM(p_cuCtxPushCurrent, "cuCtxPushCurrent_v2");
	BNG_SYM(p_cuCtxPopCurrent, "cuCtxPopCurrent_v2");
	BNG_SYM(p_cuModuleLoadDataEx, "cuModuleLoadDataEx");
	BNG_SYM(p_cuModuleGetFunction, "cuModuleGetFunction");
	BNG_SYM(p_cuLaunchKernel, "cuLaunchKernel");
	BNG_SYM(p_cuMemAlloc, "cuMemAlloc_v2");
	BNG_SYM(p_cuMemFree, "cuMemFree_v2");
	BNG_SYM(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	BNG_SYM(p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	BNG_SYM(p_cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
	BNG_SYM(p_cuMemsetD32Async, "cuMemsetD32Async");
	BNG_SYM(p_cuMemGetInfo, "cuMemGetInfo_v2");
	BNG_SYM(p_cuStreamCreate, "cuStreamCreate");
	BNG_SYM(p_cuStreamDestroy, "cuStreamDestroy_v2");
	BNG_SYM(p_cuStreamSynchronize, "cuStreamSynchronize");
	BNG_SYM(p_cuEventCreate, "cuEventCreate");
	BNG_SYM(p_cuEventRecord, "cuEventRecord");
	BNG_SYM(p_cuEventSynchronize, "cuEventSynchronize");
	BNG_SYM(p_cuEventElapsedTime, "cuEventElapsedTime");
	BNG_SYM(p_cuEventDestroy, "cuEventDestroy_v2");
	BNG_SYM(p_cuPointerGetAttribute, "cuPointerGetAttribute");
#undef BNG_SYM
	bng_h = h;
	return 0;
}

static void bng_error_text(CUresult r, char* name, size_t ncap, char* desc, size_t dcap) {
	const char* s = NULL;
	if (p_cuGetErrorName && p_cuGetErrorName(r, &s) == 0 && s) {
		snprintf(name, ncap, "%s", s);
	} else {
		snprintf(name, ncap, "CUDA_ERROR_%d", (int)r);
	}
	s = NULL;
	if (p_cuGetErrorString && p_cuGetErrorString(r, &s) == 0 && s) {
		snprintf(desc, dcap, "%s", s);
	} else {
		snprintf(desc, dcap, "unknown error");
	}
}

static CUresult bng_cuInit(void) { return p_cuInit(0); }
static CUresult bng_cuDriverGetVersion(int* v) { return p_cuDriverGetVersion(v); }
static CUresult bng_cuDeviceGetCount(int* n) { return p_cuDeviceGetCount(n); }
static CUresult bng_cuDeviceGet(int* d, int ordinal) { return p_cuDeviceGet(d, ordinal); }
static CUresult bng_cuDeviceGetName(char* name, int len, int d) { return p_cuDeviceGetName(name, len, d); }
static CUresult bng_cuDeviceGetAttribute(int* v, int attr, int d) { return p_cuDeviceGetAttribute(v, attr, d); }
static CUresult bng_cuDevicePrimaryCtxRetain(uintptr_t* ctx, CUdevice d) {
	CUcontext c = NULL;
	CUresult r = p_cuDevicePrimaryCtxRetain(&c, d);
	*ctx = (uintptr_t)c;
	return r;
}
static CUresult bng_cuCtxPushCurrent(uintptr_t ctx) { return p_cuCtxPushCurrent((CUcontext)ctx); }
static CUresult bng_cuCtxPopCurrent(void) {
	CUcontext c = NULL;
	return p_cuCtxPopCurrent(&c);
}
// JIT options 5 and 6: CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES.
static CUresult bng_module_load(uintptr_t* mod, const char* image, char* log, size_t logcap) {
	CUjit_option opts[2] = {5, 6};
	void* vals[2] = {log, (void*)(uintptr_t)logcap};
	CUmodule m = NULL;
	CUresult r = p_cuModuleLoadDataEx(&m, image, 2, opts, vals);
	*mod = (uintptr_t)m;
	return r;
}
static CUresult bng_cuModuleGetFunction(uintptr_t* f, uintptr_t mod, const char* name) {
	CUfunction fn = NULL;
	CUresult r = p_cuModuleGetFunction(&fn, (CUmodule)mod, name);
	*f = (uintptr_t)fn;
	return r;
}
// bng_launch launches f with one by-value argument, the struct at args
// (the driver copies it before returning).
static CUresult bng_launch(uintptr_t f, unsigned int grid, unsigned int block, uintptr_t stream, void* args) {
	void* params[1] = {args};
	return p_cuLaunchKernel((CUfunction)f, grid, 1, 1, block, 1, 1, 0, (CUstream)stream, params, NULL);
}
static CUresult bng_cuMemAlloc(CUdeviceptr* p, size_t size) { return p_cuMemAlloc(p, size); }
static CUresult bng_cuMemFree(CUdeviceptr p) { return p_cuMemFree(p); }
static CUresult bng_htod(CUdeviceptr dst, const void* src, size_t size, uintptr_t s) {
	return p_cuMemcpyHtoDAsync(dst, src, size, (CUstream)s);
}
static CUresult bng_dtoh(void* dst, CUdeviceptr src, size_t size, uintptr_t s) {
	return p_cuMemcpyDtoHAsync(dst, src, size, (CUstream)s);
}
static CUresult bng_dtod(CUdeviceptr dst, CUdeviceptr src, size_t size, uintptr_t s) {
	return p_cuMemcpyDtoDAsync(dst, src, size, (CUstream)s);
}
// bng_dtoh_sync copies size bytes to dst and waits for the stream, in one
// call: dst may be Go memory (the driver holds it only during the call).
// *step tells which call failed (0 the copy, 1 the synchronisation).
static CUresult bng_dtoh_sync(void* dst, CUdeviceptr src, size_t size, uintptr_t s, int* step) {
	*step = 0;
	CUresult r = p_cuMemcpyDtoHAsync(dst, src, size, (CUstream)s);
	if (r) return r;
	*step = 1;
	return p_cuStreamSynchronize((CUstream)s);
}
static CUresult bng_memset32(CUdeviceptr p, unsigned int v, size_t n, uintptr_t s) {
	return p_cuMemsetD32Async(p, v, n, (CUstream)s);
}
static CUresult bng_cuMemGetInfo(size_t* free, size_t* total) { return p_cuMemGetInfo(free, total); }
static CUresult bng_stream_create(uintptr_t* s) {
	CUstream st = NULL;
	CUresult r = p_cuStreamCreate(&st, 1); // CU_STREAM_NON_BLOCKING
	*s = (uintptr_t)st;
	return r;
}
static CUresult bng_stream_destroy(uintptr_t s) { return p_cuStreamDestroy((CUstream)s); }
static CUresult bng_stream_sync(uintptr_t s) { return p_cuStreamSynchronize((CUstream)s); }
static CUresult bng_event_create(uintptr_t* e) {
	CUevent ev = NULL;
	CUresult r = p_cuEventCreate(&ev, 0);
	*e = (uintptr_t)ev;
	return r;
}
static CUresult bng_event_record(uintptr_t e, uintptr_t s) { return p_cuEventRecord((CUevent)e, (CUstream)s); }
static CUresult bng_event_sync(uintptr_t e) { return p_cuEventSynchronize((CUevent)e); }
static CUresult bng_event_elapsed(float* ms, uintptr_t a, uintptr_t b) {
	return p_cuEventElapsedTime(ms, (CUevent)a, (CUevent)b);
}
static CUresult bng_event_destroy(uintptr_t e) { return p_cuEventDestroy((CUevent)e); }
// Attribute 9: CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL.
static CUresult bng_ptr_device(int* ordinal, CUdeviceptr p) { return p_cuPointerGetAttribute(ordinal, 9, p); }
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
	"github.com/bitnet-go/bitnet_go/gokern/ternary"
)

// CUresult values we act on.
const (
	cuErrInvalidValue = 1
	cuErrOutOfMemory  = 2
	cuErrNoDevice     = 100
)

// Device attributes we read.
const (
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
)

// cuErr turns a failed call into the error Python raises: RuntimeError
// "cuda: <call> failed: <CUDA_ERROR_NAME>: <description>".
func cuErr(call string, r C.CUresult) error {
	name, desc := errorText(r)
	return errs.Runtime("cuda: %s failed: %s: %s", call, name, desc)
}

func errorText(r C.CUresult) (string, string) {
	var name, desc [256]C.char
	C.bng_error_text(r, &name[0], C.size_t(len(name)), &desc[0], C.size_t(len(desc)))
	return C.GoString(&name[0]), C.GoString(&desc[0])
}

func check(call string, r C.CUresult) error {
	if r != 0 {
		return cuErr(call, r)
	}
	return nil
}

// The driver, loaded once per process.
var drv struct {
	once    sync.Once
	status  Status
	devices []*device
}

func probe() Status {
	drv.once.Do(loadDriver)
	return drv.status
}

func loadDriver() {
	s := &drv.status
	var buf [1024]C.char
	if C.bng_load(&buf[0], C.size_t(len(buf))) != 0 {
		s.Reason = "cuda: no NVIDIA driver: libcuda.so.1 could not be loaded (" + C.GoString(&buf[0]) + ")"
		return
	}
	var v C.int
	if C.bng_cuDriverGetVersion(&v) == 0 {
		s.DriverVersion = int(v)
	}
	if r := C.bng_cuInit(); r != 0 {
		name, desc := errorText(r)
		if r == cuErrNoDevice {
			s.Reason = fmt.Sprintf("cuda: the NVIDIA driver is installed but no CUDA GPU was found (cuInit: %s: %s)", name, desc)
		} else {
			s.Reason = fmt.Sprintf("cuda: cuInit failed: %s: %s", name, desc)
		}
		return
	}
	var n C.int
	if r := C.bng_cuDeviceGetCount(&n); r != 0 {
		s.Reason = cuErr("cuDeviceGetCount", r).Error()
		return
	}
	if n == 0 {
		s.Reason = "cuda: the NVIDIA driver is installed but no CUDA GPU was found (cuDeviceGetCount: 0)"
		return
	}
	for i := 0; i < int(n); i++ {
		d := &device{ord: i, pool: pool{free: map[int64][]uint64{}}}
		if err := d.attributes(); err != nil {
			s.Reason = err.Error()
			drv.devices = nil
			return
		}
		drv.devices = append(drv.devices, d)
	}
	s.DeviceCount, s.Available = int(n), true
}

// device is one GPU: its primary context (shared with PyTorch, CuPy and the
// CUDA runtime in the same process), the module, and the host path's pool.
type device struct {
	ord int

	// Read when the driver is loaded (no context needed).
	dev  C.int
	name string
	sms  int64
	cc   [2]int

	mu      sync.Mutex // guards the lazy initialisation below
	ctxDone bool
	ctxErr  error
	ctx     C.uintptr_t
	modDone bool
	modErr  error
	fn      [numKernels]C.uintptr_t

	pool pool
}

// lookup returns device i (no context).
func lookup(i int) (*device, error) {
	s := probe()
	if !s.Available {
		return nil, errs.Runtime("%s", s.Reason)
	}
	if i < 0 || i >= len(drv.devices) {
		return nil, errs.Value("cuda: device index %d is out of range: %d CUDA device(s) visible", i, len(drv.devices))
	}
	return drv.devices[i], nil
}

// getDevice returns device i with its primary context retained; withModule
// also loads the kernels.
func getDevice(i int, withModule bool) (*device, error) {
	d, err := lookup(i)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.ctxDone {
		d.ctxErr = d.initCtx()
		d.ctxDone = true
	}
	if d.ctxErr != nil {
		return nil, d.ctxErr
	}
	if withModule {
		if !d.modDone {
			d.modErr = d.run(d.loadModule)
			d.modDone = true
		}
		if d.modErr != nil {
			return nil, d.modErr
		}
	}
	return d, nil
}

// attributes reads the device's handle, name and attributes.
func (d *device) attributes() error {
	if r := C.bng_cuDeviceGet(&d.dev, C.int(d.ord)); r != 0 {
		return cuErr("cuDeviceGet", r)
	}
	var name [256]C.char
	if r := C.bng_cuDeviceGetName(&name[0], C.int(len(name)), d.dev); r != 0 {
		return cuErr("cuDeviceGetName", r)
	}
	d.name = C.GoString(&name[0])
	var v C.int
	if r := C.bng_cuDeviceGetAttribute(&v, attrMultiprocessors, d.dev); r != 0 {
		return cuErr("cuDeviceGetAttribute", r)
	}
	d.sms = int64(v)
	for k, a := range []C.int{attrCCMajor, attrCCMinor} {
		if r := C.bng_cuDeviceGetAttribute(&v, a, d.dev); r != 0 {
			return cuErr("cuDeviceGetAttribute", r)
		}
		d.cc[k] = int(v)
	}
	return nil
}

// initCtx retains the device's primary context for the life of the process
// (never released: PyTorch and CuPy share it). Creating it takes device
// memory, so it happens only when a call needs a context.
func (d *device) initCtx() error {
	if r := C.bng_cuDevicePrimaryCtxRetain(&d.ctx, d.dev); r != 0 {
		return cuErr("cuDevicePrimaryCtxRetain", r)
	}
	return nil
}

func (d *device) loadModule() error {
	img := C.CString(ptxSource)
	defer C.free(unsafe.Pointer(img))
	var log [8192]C.char
	var mod C.uintptr_t
	if r := C.bng_module_load(&mod, img, &log[0], C.size_t(len(log))); r != 0 {
		err := cuErr(fmt.Sprintf("cuModuleLoadData (PTX ISA %s, %s, on cuda:%d %s, compute capability %d.%d)",
			EmbeddedPTX().Version, EmbeddedPTX().Target, d.ord, d.name, d.cc[0], d.cc[1]), r)
		if s := C.GoString(&log[0]); s != "" {
			err = errs.Runtime("%s\nJIT log: %s", err, s)
		}
		return err
	}
	for k := range numKernels {
		cs := C.CString(kernelNames[k])
		r := C.bng_cuModuleGetFunction(&d.fn[k], mod, cs)
		C.free(unsafe.Pointer(cs))
		if r != 0 {
			return cuErr("cuModuleGetFunction("+kernelNames[k]+")", r)
		}
	}
	modulesLoaded.Add(1)
	return nil
}

var modulesLoaded atomic.Int64

// run calls fn with the device's primary context current on this OS thread
// (pushed, then popped: the caller's current context is left as it was).
func (d *device) run(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.bng_cuCtxPushCurrent(d.ctx); r != 0 {
		return cuErr("cuCtxPushCurrent", r)
	}
	defer C.bng_cuCtxPopCurrent()
	return fn()
}

// gridCap bounds grids: enough CTAs to fill the GPU several times over.
func (d *device) gridCap() int64 { return max(1, d.sms*32) }

// exec enqueues ops on stream (in the current context).
func (d *device) exec(ops []op, stream C.uintptr_t) error {
	for i := range ops {
		o := &ops[i]
		if !o.launch {
			if r := C.bng_memset32(C.CUdeviceptr(o.ptr), C.uint(o.value), C.size_t(o.count), stream); r != 0 {
				return cuErr("cuMemsetD32Async", r)
			}
			continue
		}
		grid := C.uint(min(int64(o.grid), d.gridCap()))
		if r := C.bng_launch(d.fn[o.k], grid, ctaThreads, stream, unsafe.Pointer(&o.args)); r != 0 {
			return cuErr("cuLaunchKernel("+kernelNames[o.k]+")", r)
		}
	}
	return nil
}

// checkOwner verifies that device pointers belong to this device, so that a
// tensor of another GPU is an error here and not a fault in a kernel.
func (d *device) checkOwner(ptrs ...uint64) error {
	for _, p := range ptrs {
		var ord C.int
		r := C.bng_ptr_device(&ord, C.CUdeviceptr(p))
		if r == cuErrInvalidValue {
			return errs.Value("cuda: address 0x%x is not CUDA device memory", p)
		}
		if r != 0 {
			return cuErr("cuPointerGetAttribute", r)
		}
		if int(ord) != d.ord {
			return errs.Value("cuda: address 0x%x is memory of cuda:%d, but the call runs on cuda:%d", p, int(ord), d.ord)
		}
	}
	return nil
}

// readBad waits for the stream and returns the first non-finite index
// recorded at work (or -1).
func readBad(work uint64, n int64, stream C.uintptr_t) (int64, error) {
	var bad uint64
	if err := dtohSync(unsafe.Pointer(&bad), work, 8, stream); err != nil {
		return 0, err
	}
	if bad >= uint64(n) {
		return -1, nil
	}
	return int64(bad), nil
}

func dtohSync(dst unsafe.Pointer, src uint64, size int64, stream C.uintptr_t) error {
	var step C.int
	if r := C.bng_dtoh_sync(dst, C.CUdeviceptr(src), C.size_t(size), stream, &step); r != 0 {
		if step == 0 {
			return cuErr("cuMemcpyDtoHAsync", r)
		}
		return cuErr("cuStreamSynchronize", r)
	}
	return nil
}

func nonFinite(v float32, idx int64) error {
	return errs.Value("x contains a non-finite value (%v) at flat index %d; pass check_finite=False to quantize anyway", v, idx)
}

func devQuantize(dev int, p plan, m ternary.Method, check bool, b devBufs, stream uint64) error {
	d, err := getDevice(dev, true)
	if err != nil {
		return err
	}
	s := C.uintptr_t(stream)
	return d.run(func() error {
		if err := d.checkOwner(b.x, b.packed, b.scales, b.work); err != nil {
			return err
		}
		if err := d.exec(quantizeOps(p, m, check, b, d.gridCap()), s); err != nil {
			return err
		}
		if !check {
			return nil
		}
		bad, err := readBad(b.work, p.n, s)
		if err != nil || bad < 0 {
			return err
		}
		var v float32
		if err := dtohSync(unsafe.Pointer(&v), b.x+4*uint64(bad), 4, s); err != nil {
			return err
		}
		return nonFinite(v, bad)
	})
}

func hostQuantize(dev int, p plan, m ternary.Method, check bool, x, packed, scales unsafe.Pointer) error {
	d, err := getDevice(dev, true)
	if err != nil {
		return err
	}
	xb := align(4*p.n, 256)
	pb := align(int64(ternary.PackedLen(int(p.n))), 256)
	sb := align(4*p.nb, 256)
	total := xb + pb + sb + p.workBytes()
	return d.run(func() error {
		s, err := d.getStream()
		if err != nil {
			return err
		}
		buf, err := d.getBuf(total, fmt.Sprintf("quantize_i2s of %d values", p.n))
		if err != nil {
			d.putStream(s)
			return err
		}
		b := devBufs{x: buf, packed: buf + uint64(xb), scales: buf + uint64(xb+pb), work: buf + uint64(xb+pb+sb)}
		// A C buffer for the index: the async copy into it completes before
		// the synchronisation below.
		badHost := (*uint64)(C.malloc(8))
		defer C.free(unsafe.Pointer(badHost))
		*badHost = math.MaxUint64
		err = d.enqueueHost(p, m, check, b, x, packed, scales, unsafe.Pointer(badHost), s)
		// Whatever happened, wait for the stream before the buffers go back
		// to the pool and the caller's arrays back to the caller.
		if r := C.bng_stream_sync(s); r != 0 {
			// The context is unusable (a sticky error): keep nothing.
			d.dropStream(s)
			d.dropBuf(buf, total)
			if err == nil {
				err = cuErr("cuStreamSynchronize", r)
			}
			return err
		}
		d.putStream(s)
		d.putBuf(buf, total)
		if err != nil || !check || *badHost >= uint64(p.n) {
			return err
		}
		i := int64(*badHost)
		return nonFinite(unsafe.Slice((*float32)(x), p.n)[i], i)
	})
}

func (d *device) enqueueHost(p plan, m ternary.Method, check bool, b devBufs, x, packed, scales, badHost unsafe.Pointer, s C.uintptr_t) error {
	if r := C.bng_htod(C.CUdeviceptr(b.x), x, C.size_t(4*p.n), s); r != 0 {
		return cuErr("cuMemcpyHtoDAsync", r)
	}
	if err := d.exec(quantizeOps(p, m, check, b, d.gridCap()), s); err != nil {
		return err
	}
	if r := C.bng_dtoh(packed, C.CUdeviceptr(b.packed), C.size_t(ternary.PackedLen(int(p.n))), s); r != 0 {
		return cuErr("cuMemcpyDtoHAsync", r)
	}
	if r := C.bng_dtoh(scales, C.CUdeviceptr(b.scales), C.size_t(4*p.nb), s); r != 0 {
		return cuErr("cuMemcpyDtoHAsync", r)
	}
	if check {
		if r := C.bng_dtoh(badHost, C.CUdeviceptr(b.work), 8, s); r != 0 {
			return cuErr("cuMemcpyDtoHAsync", r)
		}
	}
	return nil
}

func devExec(dev int, ops []op, stream uint64, ptrs []uint64) error {
	d, err := getDevice(dev, true)
	if err != nil {
		return err
	}
	return d.run(func() error {
		if err := d.checkOwner(ptrs...); err != nil {
			return err
		}
		return d.exec(ops, C.uintptr_t(stream))
	})
}

// timeOn records an event, calls enqueue repeat times, records a second
// event, and returns the mean GPU milliseconds per call.
func (d *device) timeOn(s C.uintptr_t, repeat int, enqueue func() error) (float64, error) {
	var ev [2]C.uintptr_t
	for i := range ev {
		if r := C.bng_event_create(&ev[i]); r != 0 {
			for j := 0; j < i; j++ {
				C.bng_event_destroy(ev[j])
			}
			return 0, cuErr("cuEventCreate", r)
		}
	}
	defer C.bng_event_destroy(ev[0])
	defer C.bng_event_destroy(ev[1])
	if r := C.bng_event_record(ev[0], s); r != 0 {
		return 0, cuErr("cuEventRecord", r)
	}
	for range repeat {
		if err := enqueue(); err != nil {
			return 0, err
		}
	}
	if r := C.bng_event_record(ev[1], s); r != 0 {
		return 0, cuErr("cuEventRecord", r)
	}
	if r := C.bng_event_sync(ev[1]); r != 0 {
		return 0, cuErr("cuEventSynchronize", r)
	}
	var ms C.float
	if r := C.bng_event_elapsed(&ms, ev[0], ev[1]); r != 0 {
		return 0, cuErr("cuEventElapsedTime", r)
	}
	return float64(ms) / float64(repeat), nil
}

func devTimeQuantize(dev int, p plan, m ternary.Method, b devBufs, stream uint64, repeat int) (float64, error) {
	d, err := getDevice(dev, true)
	if err != nil {
		return 0, err
	}
	var ms float64
	err = d.run(func() error {
		if err := d.checkOwner(b.x, b.packed, b.scales, b.work); err != nil {
			return err
		}
		ops := quantizeOps(p, m, false, b, d.gridCap())
		var err error
		ms, err = d.timeOn(C.uintptr_t(stream), repeat, func() error { return d.exec(ops, C.uintptr_t(stream)) })
		return err
	})
	return ms, err
}

func devTimeCopy(dev int, dst, src uint64, nbytes int64, stream uint64, repeat int) (float64, error) {
	d, err := getDevice(dev, false)
	if err != nil {
		return 0, err
	}
	var ms float64
	err = d.run(func() error {
		if err := d.checkOwner(dst, src); err != nil {
			return err
		}
		s := C.uintptr_t(stream)
		var err error
		ms, err = d.timeOn(s, repeat, func() error {
			if r := C.bng_dtod(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(nbytes), s); r != 0 {
				return cuErr("cuMemcpyDtoDAsync", r)
			}
			return nil
		})
		return err
	})
	return ms, err
}

func deviceName(i int) (string, error) {
	d, err := lookup(i)
	if err != nil {
		return "", err
	}
	return d.name, nil
}

func memInfo(i int) (int64, int64, error) {
	d, err := getDevice(i, false)
	if err != nil {
		return 0, 0, err
	}
	var free, total int64
	err = d.run(func() error {
		var f, t C.size_t
		if r := C.bng_cuMemGetInfo(&f, &t); r != 0 {
			return cuErr("cuMemGetInfo", r)
		}
		free, total = int64(f), int64(t)
		return nil
	})
	return free, total, err
}

// ---------------------------------------------------------------- pool

// pool keeps the host path's device buffers and streams between calls.
// Buffers are handed out whole to one call at a time and come back only
// after that call's stream has finished with them.
type pool struct {
	mu           sync.Mutex
	free         map[int64][]uint64 // size class -> idle buffers
	idleBytes    int64
	inUse        int
	streams      []C.uintptr_t
	streamsInUse int
	allocs       int64
}

// getBuf returns a buffer of at least size bytes (in the current context).
// When the device is out of memory, the idle buffers are freed and the
// allocation tried once more; then MemoryError with the sizes.
func (d *device) getBuf(size int64, what string) (uint64, error) {
	c := sizeClass(size)
	pl := &d.pool
	pl.mu.Lock()
	if l := pl.free[c]; len(l) > 0 {
		p := l[len(l)-1]
		pl.free[c] = l[:len(l)-1]
		pl.idleBytes -= c
		pl.inUse++
		pl.mu.Unlock()
		return p, nil
	}
	pl.mu.Unlock()
	var p C.CUdeviceptr
	r := C.bng_cuMemAlloc(&p, C.size_t(c))
	if r == cuErrOutOfMemory {
		if err := d.releaseIdle(); err != nil {
			return 0, err
		}
		r = C.bng_cuMemAlloc(&p, C.size_t(c))
	}
	if r == cuErrOutOfMemory {
		var f, t C.size_t
		C.bng_cuMemGetInfo(&f, &t)
		return 0, errs.Memory("cuda: out of memory on cuda:%d (%s): %s needs %s (%d bytes) of device memory; %s free of %s",
			d.ord, d.name, what, human(c), c, human(int64(f)), human(int64(t)))
	}
	if r != 0 {
		return 0, cuErr("cuMemAlloc", r)
	}
	pl.mu.Lock()
	pl.inUse++
	pl.allocs++
	pl.mu.Unlock()
	return uint64(p), nil
}

func (d *device) putBuf(p uint64, size int64) {
	c := sizeClass(size)
	pl := &d.pool
	pl.mu.Lock()
	pl.free[c] = append(pl.free[c], p)
	pl.idleBytes += c
	pl.inUse--
	pl.mu.Unlock()
}

// dropBuf forgets a buffer after a failure of its stream (it may still be in
// use by the GPU; the context is unusable anyway).
func (d *device) dropBuf(uint64, int64) {
	d.pool.mu.Lock()
	d.pool.inUse--
	d.pool.mu.Unlock()
}

func (d *device) getStream() (C.uintptr_t, error) {
	pl := &d.pool
	pl.mu.Lock()
	if n := len(pl.streams); n > 0 {
		s := pl.streams[n-1]
		pl.streams = pl.streams[:n-1]
		pl.streamsInUse++
		pl.mu.Unlock()
		return s, nil
	}
	pl.mu.Unlock()
	var s C.uintptr_t
	if r := C.bng_stream_create(&s); r != 0 {
		return 0, cuErr("cuStreamCreate", r)
	}
	pl.mu.Lock()
	pl.streamsInUse++
	pl.mu.Unlock()
	return s, nil
}

func (d *device) putStream(s C.uintptr_t) {
	d.pool.mu.Lock()
	d.pool.streams = append(d.pool.streams, s)
	d.pool.streamsInUse--
	d.pool.mu.Unlock()
}

func (d *device) dropStream(s C.uintptr_t) {
	C.bng_stream_destroy(s)
	d.pool.mu.Lock()
	d.pool.streamsInUse--
	d.pool.mu.Unlock()
}

// releaseIdle frees the idle buffers and destroys the idle streams (in the
// current context). Buffers in use by a running call are not touched.
func (d *device) releaseIdle() error {
	pl := &d.pool
	pl.mu.Lock()
	free, streams := pl.free, pl.streams
	pl.free, pl.streams, pl.idleBytes = map[int64][]uint64{}, nil, 0
	pl.mu.Unlock()
	var first error
	for _, l := range free {
		for _, p := range l {
			if r := C.bng_cuMemFree(C.CUdeviceptr(p)); r != 0 && first == nil {
				first = cuErr("cuMemFree", r)
			}
		}
	}
	for _, s := range streams {
		if r := C.bng_stream_destroy(s); r != 0 && first == nil {
			first = cuErr("cuStreamDestroy", r)
		}
	}
	return first
}

func emptyCache() error {
	if !probe().Available {
		return nil
	}
	var first error
	for _, d := range drv.devices {
		d.mu.Lock()
		ready := d.ctxDone && d.ctxErr == nil
		d.mu.Unlock()
		if !ready {
			continue
		}
		if err := d.run(d.releaseIdle); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func poolStats() PoolStats {
	var st PoolStats
	if !probe().Available {
		return st
	}
	for _, d := range drv.devices {
		pl := &d.pool
		pl.mu.Lock()
		for _, l := range pl.free {
			st.IdleBuffers += len(l)
		}
		st.IdleBytes += pl.idleBytes
		st.InUseBuffers += pl.inUse
		st.IdleStreams += len(pl.streams)
		st.InUseStreams += pl.streamsInUse
		st.Allocations += pl.allocs
		pl.mu.Unlock()
	}
	st.ModulesLoaded = int(modulesLoaded.Load())
	return st
}

func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
