// A fake libcuda.so.1 for tests on machines without a GPU: the driver API
// calls that cuda/driver (shim_linux.go) makes, over host memory ("device" pointers
// are host addresses), with kernel launches run by the CPU emulator
// (emu.hpp) on the real i2s.cu. Copies, memsets and launches are
// synchronous; streams and events are tokens. Every call checks what a real
// driver would refuse (no current context, pointers outside allocations,
// launch geometry), so the shim's use of the API is tested end to end.
//
// Build (tests_py/test_cuda.py does): g++ -shared -fPIC -std=c++20 -pthread
// -I cuda -I cuda/testdata/emu cuda/testdata/emu/fakecuda.cc
// -o DIR/libcuda.so.1, and put DIR first in LD_LIBRARY_PATH.
#define BNG_EMU 1
#include "i2s.cu"
#include "emu_kernels.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

typedef int CUresult;
enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    NOT_FOUND = 500,
    LAUNCH_FAILED = 719,
};

static const size_t TOTAL = size_t(1) << 30;  // a 1 GiB device
static std::mutex mu;                         // allocations
static std::mutex launch_mu;                  // the emulator runs one launch at a time
static std::map<unsigned long long, size_t> allocs;
static size_t used;
static bool inited;
static int primary_ctx;
static thread_local std::vector<void*> ctx_stack;
static long long live_streams, live_events;

static bool in_alloc(unsigned long long p, size_t size) {
    std::lock_guard<std::mutex> l(mu);
    auto it = allocs.upper_bound(p);
    if (it == allocs.begin()) return false;
    --it;
    return p >= it->first && p + size <= it->first + it->second;
}

#define NEED_CTX                                                   \
    do {                                                           \
        if (!inited) return NOT_INITIALIZED;                       \
        if (ctx_stack.empty() || ctx_stack.back() != &primary_ctx) \
            return INVALID_CONTEXT;                                \
    } while (0)

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

extern "C" {

// Test helpers (not driver API).
unsigned long long fake_alloc(size_t size) {
    std::lock_guard<std::mutex> l(mu);
    void* m = std::aligned_alloc(256, (size + 255) / 256 * 256);
    std::memset(m, 0xa7, size);
    allocs[(unsigned long long)m] = size;
    used += size;
    return (unsigned long long)m;
}
void fake_free(unsigned long long p) {
    std::lock_guard<std::mutex> l(mu);
    auto it = allocs.find(p);
    if (it == allocs.end()) return;
    used -= it->second;
    allocs.erase(it);
    std::free((void*)p);
}
long long fake_live(int what) { return what == 0 ? (long long)allocs.size() : what == 1 ? live_streams : live_events; }

CUresult cuGetErrorName(CUresult r, const char** s) {
    switch (r) {
        case OK: *s = "CUDA_SUCCESS"; return OK;
        case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
        case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
        case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
        case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
        case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return OK;
        case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
        case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
        case LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; return OK;
    }
    *s = nullptr;
    return INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
    const char* n;
    if (cuGetErrorName(r, &n)) return INVALID_VALUE;
    *s = r == OUT_OF_MEMORY ? "out of memory" : "fake driver error";
    return OK;
}
CUresult cuInit(unsigned flags) {
    if (flags) return INVALID_VALUE;
    inited = true;
    return OK;
}
CUresult cuDriverGetVersion(int* v) {
    *v = 13000;
    return OK;
}
CUresult cuDeviceGetCount(int* n) {
    if (!inited) return NOT_INITIALIZED;
    *n = 1;
    return OK;
}
CUresult cuDeviceGet(int* d, int ordinal) {
    if (!inited) return NOT_INITIALIZED;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}
CUresult cuDeviceGetName(char* name, int len, int d) {
    if (d != 0) return INVALID_DEVICE;
    std::snprintf(name, len, "bitnet_go fake CUDA device (CPU emulator)");
    return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
    if (d != 0) return INVALID_DEVICE;
    *v = attr == 16 ? 2 : attr == 75 ? 7 : attr == 76 ? 5 : 0;
    return OK;
}
CUresult cuDevicePrimaryCtxRetain(void** c, int d) {
    if (!inited) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    *c = &primary_ctx;
    return OK;
}
CUresult cuCtxPushCurrent_v2(void* c) {
    if (c != &primary_ctx) return INVALID_CONTEXT;
    ctx_stack.push_back(c);
    return OK;
}
CUresult cuCtxPopCurrent_v2(void** c) {
    if (ctx_stack.empty()) return INVALID_CONTEXT;
    if (c) *c = ctx_stack.back();
    ctx_stack.pop_back();
    return OK;
}
CUresult cuModuleLoadDataEx(void** m, const void* image, unsigned n, int* opts, void** vals) {
    NEED_CTX;
    if (n > 0 && (!opts || !vals)) return INVALID_VALUE;
    const char* s = (const char*)image;
    if (!std::strstr(s, ".version ") || !std::strstr(s, ".target sm_75")) return INVALID_IMAGE;
    for (const emu_kernel& k : emu_kernels)
        if (!std::strstr(s, (std::string(".entry ") + k.name + "(").c_str())) return INVALID_IMAGE;
    *m = &primary_ctx;
    return OK;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
    NEED_CTX;
    if (m != &primary_ctx) return INVALID_VALUE;
    for (const emu_kernel& k : emu_kernels)
        if (std::strcmp(k.name, name) == 0) {
            *f = (void*)&k;
            return OK;
        }
    return NOT_FOUND;
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void* stream, void** params, void** extra) {
    NEED_CTX;
    (void)stream;
    if (!f || gx == 0 || gx > 0x7fffffffu || gy != 1 || gz != 1 || bx != 256 || by != 1 || bz != 1 || shmem != 0 ||
        !params || !params[0] || extra)
        return INVALID_VALUE;
    const emu_kernel* k = (const emu_kernel*)f;
    std::vector<unsigned long long> args((k->args_size + 7) / 8);
    std::memcpy(args.data(), params[0], k->args_size);
    for (unsigned j = 0; j < k->nptrs; ++j)
        if (args[j] && !in_alloc(args[j], 1)) return LAUNCH_FAILED;  // would be an illegal address on a GPU
    std::lock_guard<std::mutex> l(launch_mu);
    k->launch(gx, bx, args.data());
    return OK;
}
CUresult cuMemAlloc_v2(unsigned long long* p, size_t size) {
    NEED_CTX;
    if (size == 0) return INVALID_VALUE;
    {
        std::lock_guard<std::mutex> l(mu);
        if (used + size > TOTAL) return OUT_OF_MEMORY;
    }
    *p = fake_alloc(size);
    return OK;
}
CUresult cuMemFree_v2(unsigned long long p) {
    NEED_CTX;
    if (!in_alloc(p, 1)) return INVALID_VALUE;
    fake_free(p);
    return OK;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t size, void*) {
    NEED_CTX;
    if (!in_alloc(dst, size)) return INVALID_VALUE;
    std::memcpy((void*)dst, src, size);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t size, void*) {
    NEED_CTX;
    if (!in_alloc(src, size)) return INVALID_VALUE;
    std::memcpy(dst, (const void*)src, size);
    return OK;
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t size, void*) {
    NEED_CTX;
    if (!in_alloc(dst, size) || !in_alloc(src, size)) return INVALID_VALUE;
    std::memmove((void*)dst, (const void*)src, size);
    return OK;
}
CUresult cuMemsetD32Async(unsigned long long p, unsigned v, size_t n, void*) {
    NEED_CTX;
    if (p % 4 || !in_alloc(p, 4 * n)) return INVALID_VALUE;
    for (size_t i = 0; i < n; ++i) ((unsigned*)p)[i] = v;
    return OK;
}
CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    NEED_CTX;
    std::lock_guard<std::mutex> l(mu);
    *free = TOTAL - used;
    *total = TOTAL;
    return OK;
}
CUresult cuStreamCreate(void** s, unsigned flags) {
    NEED_CTX;
    if (flags != 1) return INVALID_VALUE;  // the shim asks for CU_STREAM_NON_BLOCKING
    *s = new int(0);
    std::lock_guard<std::mutex> l(mu);
    ++live_streams;
    return OK;
}
CUresult cuStreamDestroy_v2(void* s) {
    if (!s) return INVALID_VALUE;
    delete (int*)s;
    std::lock_guard<std::mutex> l(mu);
    --live_streams;
    return OK;
}
CUresult cuStreamSynchronize(void*) {
    NEED_CTX;
    return OK;
}
CUresult cuEventCreate(void** e, unsigned) {
    NEED_CTX;
    *e = new double(0);
    std::lock_guard<std::mutex> l(mu);
    ++live_events;
    return OK;
}
CUresult cuEventRecord(void* e, void*) {
    NEED_CTX;
    *(double*)e = now_ms();
    return OK;
}
CUresult cuEventSynchronize(void* e) { return e ? OK : INVALID_VALUE; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
    *ms = (float)(*(double*)b - *(double*)a);
    return OK;
}
CUresult cuEventDestroy_v2(void* e) {
    delete (double*)e;
    std::lock_guard<std::mutex> l(mu);
    --live_events;
    return OK;
}
CUresult cuPointerGetAttribute(void* data, int attr, unsigned long long p) {
    if (attr != 9) return INVALID_VALUE;
    if (!in_alloc(p, 1)) return INVALID_VALUE;
    *(int*)data = 0;
    return OK;
}

}  // extern "C"
