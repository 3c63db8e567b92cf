// A CPU stand-in for the CUDA features that cuda/i2s.cu uses, so that the
// real kernel source runs on the host in `go test` (cuda/emu_test.go) on
// machines without a GPU. Every CUDA thread is a host thread: a launch runs
// its CTAs one after another with 256 threads, __syncthreads is a barrier of
// the CTA, __shfl_down_sync a barrier of the warp with an exchange buffer (so
// a shuffle or barrier that not every thread reaches deadlocks, and the test
// times out). __shared__ variables become static (one CTA at a time).
// IEEE arithmetic: the harness is built with -ffp-contract=off and without
// fast math, so __fdiv_rn etc. are the plain correctly rounded operations.
#pragma once

#include <atomic>
#include <cmath>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <thread>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct emu_dim3 {
    unsigned x, y, z;
};
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 gridDim, blockDim;

struct alignas(16) float4 {
    float x, y, z, w;
};

struct emu_warp {
    std::barrier<> bar{32};
    unsigned long long buf[32];
};
inline std::barrier<>* emu_cta;
inline emu_warp* emu_warps;

inline void __syncthreads() { emu_cta->arrive_and_wait(); }

template <class T> inline T __shfl_down_sync(unsigned mask, T v, int d) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    if (mask != 0xffffffffu) __builtin_trap();  // the kernels shuffle full warps only
    emu_warp& w = emu_warps[threadIdx.x >> 5];
    const unsigned lane = threadIdx.x & 31;
    std::memcpy(&w.buf[lane], &v, sizeof(T));
    w.bar.arrive_and_wait();
    T r = v;
    if (lane + d < 32) std::memcpy(&r, &w.buf[lane + d], sizeof(T));
    w.bar.arrive_and_wait();
    return r;
}

template <class T> inline T emu_shfl(unsigned mask, T v, unsigned src) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    if (mask != 0xffffffffu) __builtin_trap();
    emu_warp& w = emu_warps[threadIdx.x >> 5];
    std::memcpy(&w.buf[threadIdx.x & 31], &v, sizeof(T));
    w.bar.arrive_and_wait();
    T r;
    std::memcpy(&r, &w.buf[src & 31], sizeof(T));
    w.bar.arrive_and_wait();
    return r;
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int d) { return emu_shfl(mask, v, (threadIdx.x & 31) ^ d); }
template <class T> inline T __shfl_sync(unsigned mask, T v, int src) { return emu_shfl(mask, v, src); }

// mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 from the PTX ISA's fragment
// layout (9.7.14.5): lane 4*g + t holds A's row g, k 4t..4t+3 in a and B's
// column g, k 4t..4t+3 in b (bytes low to high); it gets C's row g, columns
// 2t and 2t+1 in c. A warp-wide exchange like the shuffles.
inline void bng_mma_m8n8k16_s8(int a, int b, int (&c)[2]) {
    emu_warp& w = emu_warps[threadIdx.x >> 5];
    const unsigned lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    w.buf[lane] = (unsigned long long)(unsigned)a | (unsigned long long)(unsigned)b << 32;
    w.bar.arrive_and_wait();
    for (int i = 0; i < 2; ++i) {
        const unsigned col = 2 * t + i;
        int sum = 0;
        for (unsigned k = 0; k < 16; ++k) {
            const signed char av = (signed char)(w.buf[4 * g + (k >> 2)] >> (8 * (k & 3)));
            const signed char bv = (signed char)(w.buf[4 * col + (k >> 2)] >> (32 + 8 * (k & 3)));
            sum += av * bv;
        }
        c[i] += sum;
    }
    w.bar.arrive_and_wait();
}

inline float __ldg(const float* p) { return *p; }
inline float4 __ldg(const float4* p) { return *p; }
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __double2float_rn(double d) { return (float)d; }
inline double __ll2double_rn(long long v) { return (double)v; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int min(int a, int b) { return a < b ? a : b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __int2float_rn(int v) { return (float)v; }  // the default rounding mode: to nearest even
inline int __float2int_rn(float f) { return (int)std::nearbyint(f); }
using std::isfinite;
// __dp4a: the four signed byte products of a and b added to c (wrapping
// int32, as the instruction does).
inline int __dp4a(int a, int b, int c) {
    unsigned r = (unsigned)c;
    for (int i = 0; i < 4; ++i) r += (unsigned)((int)(signed char)(a >> 8 * i) * (int)(signed char)(b >> 8 * i));
    return (int)r;
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
    std::atomic_ref<unsigned> r(*p);
    unsigned old = r.load();
    while (v > old && !r.compare_exchange_weak(old, v)) {
    }
    return old;
}
inline long long min(long long a, long long b) { return a < b ? a : b; }

inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    std::atomic_ref<unsigned long long> r(*p);
    unsigned long long old = r.load();
    while (v < old && !r.compare_exchange_weak(old, v)) {
    }
    return old;
}

// emu_launch runs a kernel: CTAs one after another, each with block host
// threads. Not reentrant (one launch at a time).
template <class Args> inline void emu_launch(void (*fn)(Args), unsigned grid, unsigned block, Args a) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    // Heap-allocated: newer g++ rejects storing a local's address in a global
    // (-Werror=dangling-pointer), though the launch outlives every use.
    auto cta_owner = std::make_unique<std::barrier<>>(block);
    auto warps_owner = std::make_unique<emu_warp[]>(8);
    std::barrier<>& cta = *cta_owner;
    emu_cta = cta_owner.get();
    emu_warps = warps_owner.get();
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t) {
        ts.emplace_back([=, &cta] {
            threadIdx = {t, 0, 0};
            for (unsigned b = 0; b < grid; ++b) {
                blockIdx = {b, 0, 0};
                fn(a);
                cta.arrive_and_wait();
            }
        });
    }
    for (auto& t : ts) t.join();
    emu_cta = nullptr;
    emu_warps = nullptr;
}
