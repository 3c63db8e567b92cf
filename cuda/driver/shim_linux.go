//go:build linux && cgo

package driver

// The C shim: our own typedefs of the driver API, the symbols resolved by
// dlopen/dlsym, and one Go function per driver call returning its CUresult.
// Nothing else in the package uses cgo.

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
// bng_launch launches f with nargs by-value parameters, parameter i being
// the bytes at args+offs[i] (the driver copies them before returning).
#define BNG_MAX_ARGS 32
static CUresult bng_launch(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                           unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, char* args,
                           const size_t* offs, int nargs) {
	void* params[BNG_MAX_ARGS];
	for (int i = 0; i < nargs; i++) params[i] = args + offs[i];
	return p_cuLaunchKernel((CUfunction)f, gx, gy, gz, bx, by, bz, shared, (CUstream)stream, params, NULL);
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
	"unsafe"

	"github.com/bitnet-go/bitnet_go/gokern/errs"
)

// result is a CUresult.
type result int32

// CUresult values we act on.
const (
	errInvalidValue result = 1
	errOutOfMemory  result = 2
	errNoDevice     result = 100
)

// Device attributes we read.
const (
	attrMultiprocessors = 16
	attrCCMajor         = 75
	attrCCMinor         = 76
)

// check turns a failed call into the error Python raises: RuntimeError
// "cuda: <call> failed: <CUDA_ERROR_NAME>: <description>".
func check(call string, r result) error {
	if r == 0 {
		return nil
	}
	name, desc := errorText(r)
	return errs.Runtime("cuda: %s failed: %s: %s", call, name, desc)
}

func errorText(r result) (name, desc string) {
	var n, d [256]C.char
	C.bng_error_text(C.CUresult(r), &n[0], C.size_t(len(n)), &d[0], C.size_t(len(d)))
	return C.GoString(&n[0]), C.GoString(&d[0])
}

// load dlopens the driver and resolves every symbol; "" on success, else why not.
func load() string {
	var buf [1024]C.char
	if C.bng_load(&buf[0], C.size_t(len(buf))) != 0 {
		return C.GoString(&buf[0])
	}
	return ""
}

func cuInit() result { return result(C.bng_cuInit()) }

func cuDriverGetVersion() (int, result) {
	var v C.int
	r := C.bng_cuDriverGetVersion(&v)
	return int(v), result(r)
}

func cuDeviceGetCount() (int, result) {
	var n C.int
	r := C.bng_cuDeviceGetCount(&n)
	return int(n), result(r)
}

func cuDeviceGet(ordinal int) (int32, result) {
	var d C.int
	r := C.bng_cuDeviceGet(&d, C.int(ordinal))
	return int32(d), result(r)
}

func cuDeviceGetName(dev int32) (string, result) {
	var name [256]C.char
	r := C.bng_cuDeviceGetName(&name[0], C.int(len(name)), C.int(dev))
	return C.GoString(&name[0]), result(r)
}

func cuDeviceGetAttribute(attr int, dev int32) (int, result) {
	var v C.int
	r := C.bng_cuDeviceGetAttribute(&v, C.int(attr), C.int(dev))
	return int(v), result(r)
}

func cuDevicePrimaryCtxRetain(dev int32) (uintptr, result) {
	var c C.uintptr_t
	r := C.bng_cuDevicePrimaryCtxRetain(&c, C.CUdevice(dev))
	return uintptr(c), result(r)
}

func cuCtxPushCurrent(ctx uintptr) result { return result(C.bng_cuCtxPushCurrent(C.uintptr_t(ctx))) }

func cuCtxPopCurrent() { C.bng_cuCtxPopCurrent() }

// moduleLoad JIT-compiles a PTX image; log is the JIT's error log.
func moduleLoad(image string) (mod uintptr, log string, r result) {
	img := C.CString(image)
	defer C.free(unsafe.Pointer(img))
	var buf [8192]C.char
	var m C.uintptr_t
	r = result(C.bng_module_load(&m, img, &buf[0], C.size_t(len(buf))))
	return uintptr(m), C.GoString(&buf[0]), r
}

func cuModuleGetFunction(mod uintptr, name string) (uint64, result) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.uintptr_t
	r := C.bng_cuModuleGetFunction(&f, C.uintptr_t(mod), cs)
	return uint64(f), result(r)
}

// maxArgs is BNG_MAX_ARGS.
const maxArgs = 32

func cuLaunchKernel(f uint64, grid, block Dim3, shared uint32, s Stream, args [][]byte) result {
	if len(args) > maxArgs {
		return result(errInvalidValue)
	}
	var offs [maxArgs]C.size_t
	var buf []byte
	if len(args) == 1 {
		buf = args[0]
	} else {
		for i, a := range args {
			offs[i] = C.size_t(len(buf))
			buf = append(buf, a...)
		}
	}
	var p *C.char
	if len(buf) > 0 {
		p = (*C.char)(unsafe.Pointer(&buf[0]))
	}
	return result(C.bng_launch(C.uintptr_t(f), C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.uint(shared), C.uintptr_t(s),
		p, &offs[0], C.int(len(args))))
}

func cuMemAlloc(size int64) (uint64, result) {
	var p C.CUdeviceptr
	r := C.bng_cuMemAlloc(&p, C.size_t(size))
	return uint64(p), result(r)
}

func cuMemFree(p uint64) result { return result(C.bng_cuMemFree(C.CUdeviceptr(p))) }

func cuMemcpyHtoDAsync(dst uint64, src unsafe.Pointer, n int64, s Stream) result {
	return result(C.bng_htod(C.CUdeviceptr(dst), src, C.size_t(n), C.uintptr_t(s)))
}

func cuMemcpyDtoHAsync(dst unsafe.Pointer, src uint64, n int64, s Stream) result {
	return result(C.bng_dtoh(dst, C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(s)))
}

func cuMemcpyDtoDAsync(dst, src uint64, n int64, s Stream) result {
	return result(C.bng_dtod(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(s)))
}

// dtohSync copies and waits for s in one C call (dst may be Go memory: the
// driver holds it only during the call); step tells which failed (0 the
// copy, 1 the synchronisation).
func dtohSync(dst unsafe.Pointer, src uint64, n int64, s Stream) (step int, r result) {
	var st C.int
	r = result(C.bng_dtoh_sync(dst, C.CUdeviceptr(src), C.size_t(n), C.uintptr_t(s), &st))
	return int(st), r
}

func cuMemsetD32Async(p uint64, v uint32, count int64, s Stream) result {
	return result(C.bng_memset32(C.CUdeviceptr(p), C.uint(v), C.size_t(count), C.uintptr_t(s)))
}

func cuMemGetInfo() (free, total int64, r result) {
	var f, t C.size_t
	r = result(C.bng_cuMemGetInfo(&f, &t))
	return int64(f), int64(t), r
}

// cuStreamCreate creates a CU_STREAM_NON_BLOCKING stream.
func cuStreamCreate() (Stream, result) {
	var s C.uintptr_t
	r := C.bng_stream_create(&s)
	return Stream(s), result(r)
}

func cuStreamDestroy(s Stream) result { return result(C.bng_stream_destroy(C.uintptr_t(s))) }

func cuStreamSynchronize(s Stream) result { return result(C.bng_stream_sync(C.uintptr_t(s))) }

func cuEventCreate() (uintptr, result) {
	var e C.uintptr_t
	r := C.bng_event_create(&e)
	return uintptr(e), result(r)
}

func cuEventRecord(e uintptr, s Stream) result {
	return result(C.bng_event_record(C.uintptr_t(e), C.uintptr_t(s)))
}

func cuEventSynchronize(e uintptr) result { return result(C.bng_event_sync(C.uintptr_t(e))) }

func cuEventElapsedTime(a, b uintptr) (float32, result) {
	var ms C.float
	r := C.bng_event_elapsed(&ms, C.uintptr_t(a), C.uintptr_t(b))
	return float32(ms), result(r)
}

func cuEventDestroy(e uintptr) { C.bng_event_destroy(C.uintptr_t(e)) }

// pointerDevice returns the ordinal of the device that owns p.
func pointerDevice(p uint64) (int, result) {
	var ord C.int
	r := C.bng_ptr_device(&ord, C.CUdeviceptr(p))
	return int(ord), result(r)
}
