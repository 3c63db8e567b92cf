// I2_S quantization kernels of bitnet_go (see DESIGN.md, "Formats").
//
// Compiled to PTX by cuda/build_ptx.sh (NVRTC, compute_75, --fmad=false,
// --prec-div=true, --ftz=false: no fast math anywhere) and embedded in the Go
// library; the host side is cuda/quantize.go, which computes the launch plan
// (cuda/plan.go) and fills struct bng_args. The same source is compiled for
// the CPU by the emulator test (cuda/testdata/emu), with BNG_EMU defined.
//
// Bit-exactness with the CPU path (gokern/ternary):
//   - absmean: every |x| is converted to float64 exactly and added in float64
//     (__dadd_rn); the block's sum is divided by its count in float64
//     (__ddiv_rn) and rounded once to float32 (__double2float_rn), then
//     floored at float32(1e-5). DESIGN.md's contract is that this float32
//     does not depend on the summation order (a float64 sum of float32
//     magnitudes is exact, or off by far less than half a float32 ulp, for
//     any realistic block); the order here is fixed, so results are also
//     identical from run to run and from GPU to GPU.
//   - absmax: max|x| over non-NaN elements (a maximum has no order), floored
//     at float32(1e-8).
//   - codes: +1 when the float32 division x/scale is > 0.5, -1 when < -0.5,
//     else 0. As in ternary.Threshold, the division is replaced by comparisons
//     with t, the smallest float32 with t/scale > 0.5 (computed here with
//     __fdiv_rn): x/scale > 0.5 iff x >= t, and x/scale < -0.5 iff x <= -t,
//     because IEEE division rounds monotonically and symmetrically. A scale
//     that is not positive and finite gets t = NaN, so every code is 1, as
//     dividing gives.
//   - packing: byte b of 128-value group g holds values g*128 + b + 32*k at
//     shift 6 - 2*k (k = 0..3); positions past n get code 1.
//
// Layout of the work: 256 threads (8 warps) per CTA, grid-stride loops over
// tiles / chunks / bytes, so the grid size never changes a result.
//   warp:      one pass, bs = 32, 64, ..., 1024 (see "warp" below): each warp
//              reduces and encodes 512-value steps from registers; no shared
//              memory, no barriers.
//   fused:     one pass, other bs. A tile (a whole number of blocks and of 128-value
//              groups, at most 4096 values) is staged in shared memory; its
//              blocks are reduced (warp shuffles), then every thread builds
//              whole output bytes from shared memory.
//   partials:  first pass of the two-pass plan (one scale per tensor, or
//              blocks that do not fit a tile): one warp per chunk of at most
//              2048 values of one block -> one float64 partial per chunk.
//   finish:    one warp (or one CTA when a block has many chunks) per block
//              sums its partials in a fixed order -> scale and threshold.
//   encode:    one thread per output byte, reading x again.
//   unpack / dequantize: TernaryTensor.values() / dequantize() on the GPU.
// Non-finite inputs: every kernel that reads x records the smallest index of
// a NaN/Inf with a 64-bit atomicMin into *bad (when bad is not 0).

#ifdef BNG_EMU
#include "emu.hpp"
#endif

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned char u8;

#define BNG_THREADS 256
#define BNG_WARPS 8
#define BNG_TILE_MAX 4096
#define BNG_SMALL_BLOCKS 256
#define BNG_FULL_MASK 0xffffffffu
#define BNG_FLAG_X_ALIGNED16 1ull
#define BNG_FLAG_WIDE 2ull
#define BNG_INF_BITS 0x7f800000u
#define BNG_NO_BAD 0xffffffffffffffffull

// Kernel argument block, passed by value; the same layout as kargs in
// cuda/plan.go (16 fields of 8 bytes, no padding).
struct bng_args {
    u64 x;        // const float*: input values (quantize)
    u64 packed;   // u8*: I2_S codes (written by quantize, read by unpack/dequantize)
    u64 scales;   // float*: one scale per block
    u64 out;      // signed char* (unpack) or float* (dequantize)
    u64 bad;      // u64*: smallest index of a non-finite x (0: not tracked)
    u64 partial;  // double*: one partial per chunk (two-pass plan)
    u64 thr;      // float*: one code threshold per block (two-pass plan)
    i64 n;        // number of values
    i64 bs;       // values per block (n when the tensor has one scale)
    i64 nb;       // number of blocks
    i64 tile;     // fused: values per tile; partials: values per chunk
    i64 wpb;      // fused, blocks of >= 32 values: warps per block
    i64 cpb;      // two-pass: chunks per block
    i64 nchunks;  // two-pass: chunks in all (nb * cpb)
    u64 magic;    // fused: ceil(2^32 / bs) for 2 <= bs <= 4096 (i / bs == umulhi(i, magic))
    u64 flags;    // BNG_FLAG_*
};
static_assert(sizeof(bng_args) == 128, "bng_args must match kargs in cuda/plan.go");

// |v| as float bits; >= BNG_INF_BITS means NaN or Inf.
__device__ __forceinline__ u32 abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

__device__ __forceinline__ void note_bad(u32 a, u64 i, u64& bad) {
    if (a >= BNG_INF_BITS && i < bad) bad = i;
}

__device__ __forceinline__ void flush_bad(const bng_args& a, u64 bad) {
    if (bad != BNG_NO_BAD && a.bad != 0) atomicMin((u64*)a.bad, bad);
}

// Per-thread accumulators: M = 0 absmean (float64 sum of |x|), M = 1 absmax
// (float32 max of |x| over non-NaN x). get() is exact in both cases.
template <int M> struct Acc;
template <> struct Acc<0> {
    double v;
    __device__ Acc() : v(0.0) {}
    __device__ __forceinline__ void add(u32 a) { v = __dadd_rn(v, (double)__uint_as_float(a)); }
    __device__ __forceinline__ double get() const { return v; }
};
template <> struct Acc<1> {
    float v;
    __device__ Acc() : v(0.0f) {}
    __device__ __forceinline__ void add(u32 a) {
        if (a <= BNG_INF_BITS) {  // NaN takes no part in the maximum
            const float f = __uint_as_float(a);
            v = f > v ? f : v;
        }
    }
    __device__ __forceinline__ double get() const { return (double)v; }
};

// combine merges two partial results (0.0 is the identity of both).
template <int M> __device__ __forceinline__ double combine(double a, double b) {
    if (M == 0) return __dadd_rn(a, b);
    return b > a ? b : a;
}

// warp_reduce: lane 0 gets the combination of the 32 lanes' values, always
// in the same tree order. Every lane of the warp must call it.
template <int M> __device__ __forceinline__ double warp_reduce(double v) {
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) v = combine<M>(v, __shfl_down_sync(BNG_FULL_MASK, v, d));
    return v;
}

// scale_of turns a block's reduction into its scale (gokern/ternary finishScale).
template <int M> __device__ __forceinline__ float scale_of(double acc, i64 count) {
    if (M == 0) {
        const float g = __double2float_rn(__ddiv_rn(acc, __ll2double_rn(count)));
        const float eps = __uint_as_float(0x3727c5acu);  // float32(1e-5)
        if (g != g) return __uint_as_float(0x7fc00000u);  // one NaN: ternary.CanonicalNaN
        return g < eps ? eps : g;
    }
    const float m = __double2float_rn(acc);
    const float eps = __uint_as_float(0x322bcc77u);  // float32(1e-8)
    return m < eps ? eps : m;
}

// thr_of returns the smallest float32 t > 0 with t/scale > 0.5 (the same
// search as ternary.Threshold), or NaN when scale is not positive and finite.
__device__ __forceinline__ float thr_of(float scale) {
    if (!(scale > 0.0f) || __float_as_uint(scale) >= BNG_INF_BITS) return __uint_as_float(0x7fc00000u);
    float t = __fmul_rn(scale, 0.5f);
    while (t > 0.0f && __fdiv_rn(t, scale) > 0.5f) t = __uint_as_float(__float_as_uint(t) - 1u);
    while (!(__fdiv_rn(t, scale) > 0.5f)) t = __uint_as_float(__float_as_uint(t) + 1u);
    return t;
}

// code_of is the 2-bit code of v for threshold t (NaN v or NaN t: 1).
__device__ __forceinline__ u32 code_of(float v, float t) { return v >= t ? 2u : (v <= -t ? 0u : 1u); }

template <int M> __device__ __forceinline__ float store_block(const bng_args& a, i64 blk, double acc, i64 count) {
    const float s = scale_of<M>(acc, count);
    ((float*)a.scales)[blk] = s;
    return thr_of(s);
}

// ---------------------------------------------------------------- fused

template <int M> __device__ __forceinline__ void fused_body(const bng_args& a) {
    __shared__ __align__(16) float sx[BNG_TILE_MAX];
    __shared__ float sthr[BNG_SMALL_BLOCKS];
    __shared__ double spart[BNG_WARPS];

    const float* __restrict__ x = (const float*)a.x;
    const i64 n = a.n, T = a.tile;
    const int bs = (int)a.bs;  // <= BNG_TILE_MAX on this path (plan.go)
    const u32 magic = (u32)a.magic;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const i64 ntiles = (n + T - 1) / T;

    for (i64 tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const i64 t0 = tile * T;  // a multiple of bs and of 128 (or 0)
        const int len = (int)min(T, n - t0);

        // 1. Stage the tile in shared memory: every load of the thread (up to
        // 4 x 16 bytes) is issued before the first store, so they are all in
        // flight together.
        if (a.flags & BNG_FLAG_X_ALIGNED16) {
            const float4* x4 = (const float4*)(x + t0);
            const int len4 = len >> 2;
            float4 q[BNG_TILE_MAX / 4 / BNG_THREADS];
#pragma unroll
            for (int r = 0; r < BNG_TILE_MAX / 4 / BNG_THREADS; ++r) {
                const int i = tid + r * BNG_THREADS;
                if (i < len4) q[r] = __ldg(x4 + i);
            }
#pragma unroll
            for (int r = 0; r < BNG_TILE_MAX / 4 / BNG_THREADS; ++r) {
                const int i = tid + r * BNG_THREADS;
                if (i < len4) ((float4*)sx)[i] = q[r];
            }
            for (int i = (len4 << 2) + tid; i < len; i += BNG_THREADS) sx[i] = __ldg(x + t0 + i);
        } else {
            float q[BNG_TILE_MAX / BNG_THREADS];
#pragma unroll
            for (int r = 0; r < BNG_TILE_MAX / BNG_THREADS; ++r) {
                const int i = tid + r * BNG_THREADS;
                q[r] = i < len ? __ldg(x + t0 + i) : 0.0f;
            }
#pragma unroll
            for (int r = 0; r < BNG_TILE_MAX / BNG_THREADS; ++r) {
                const int i = tid + r * BNG_THREADS;
                if (i < len) sx[i] = q[r];
            }
        }
        __syncthreads();

        // 2. Scale and threshold of each block of the tile.
        const i64 blk0 = t0 / a.bs;
        const int nblk = (len + bs - 1) / bs;
        u64 bad = BNG_NO_BAD;
        if (bs < 32) {
            // Small blocks: one thread per block, values in order.
            for (int b = tid; b < nblk; b += BNG_THREADS) {
                const int lo = b * bs, hi = min(lo + bs, len);
                Acc<M> acc;
                for (int i = lo; i < hi; ++i) {
                    const u32 u = abs_bits(sx[i]);
                    note_bad(u, (u64)(t0 + i), bad);
                    acc.add(u);
                }
                sthr[b] = store_block<M>(a, blk0 + b, acc.get(), hi - lo);
            }
        } else {
            // wpb warps per block; slots blocks at a time.
            const int wpb = (int)a.wpb, slots = BNG_WARPS / wpb;
            const int slot = warp / wpb, sub = warp - slot * wpb;
            for (int base = 0; base < nblk; base += slots) {
                const int b = base + slot;
                double part = 0.0;
                if (slot < slots && b < nblk) {  // uniform over the warp
                    const int lo = b * bs, hi = min(lo + bs, len);
                    Acc<M> acc;
                    for (int i = lo + sub * 32 + lane; i < hi; i += wpb * 32) {
                        const u32 u = abs_bits(sx[i]);
                        note_bad(u, (u64)(t0 + i), bad);
                        acc.add(u);
                    }
                    part = warp_reduce<M>(acc.get());
                    if (wpb == 1 && lane == 0) sthr[b] = store_block<M>(a, blk0 + b, part, hi - lo);
                }
                if (wpb > 1) {  // uniform over the CTA
                    if (lane == 0) spart[warp] = part;
                    __syncthreads();
                    if (tid < slots && base + tid < nblk) {
                        const int bb = base + tid, lo = bb * bs, hi = min(lo + bs, len);
                        double s = spart[tid * wpb];
                        for (int k = 1; k < wpb; ++k) s = combine<M>(s, spart[tid * wpb + k]);
                        sthr[bb] = store_block<M>(a, blk0 + bb, s, hi - lo);
                    }
                    __syncthreads();
                }
            }
        }
        flush_bad(a, bad);
        __syncthreads();

        // 3. Whole output bytes from shared memory.
        u8* out = (u8*)a.packed + (t0 >> 2);
        const int nbytes = ((len + 127) >> 7) << 5;
        for (int bi = tid; bi < nbytes; bi += BNG_THREADS) {
            const int i0 = ((bi >> 5) << 7) + (bi & 31);
            u32 byte = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int i = i0 + 32 * k;
                u32 c = 1u;
                if (i < len) {
                    const int b = bs == 1 ? i : (int)__umulhi((u32)i, magic);
                    c = code_of(sx[i], sthr[b]);
                }
                byte |= c << (6 - 2 * k);
            }
            out[bi] = (u8)byte;
        }
        __syncthreads();  // sx and sthr are reused by the next tile
    }
}

// ---------------------------------------------------------------- warp (one pass, bs = 32 .. 1024)
//
// Block sizes 32, 64, 128, 256, 512 and 1024 (the common ones) take this kernel
// instead of fused_body, which measured only ~0.46 of copy bandwidth on an
// H100 at bs 128: a CTA loads one tile into shared memory (4 x 16 bytes per
// thread), waits at a barrier, reduces with one lane per block doing the
// division and threshold search, waits again and encodes, so its loads are
// in flight only in short bursts between barriers (latency bound).
//
// Here every warp works alone (no shared memory, no __syncthreads): a warp
// step is 512 values = 4 groups of 128; lane L holds the 16 values of group
// g = L/8 at columns c = 4*(L%8) .. c+3 of rows k = 0..3 (value 128g + 32k
// + c + j): four float4 loads, each a fully used 512-byte warp access. The
// 16 values are exactly the inputs of one 32-bit output word (bytes c..c+3 of
// the group), so the packed codes go out as one coalesced 128-byte store per
// warp step. A warp loads BNG_WSTEPS steps (8 float4 = 128 bytes per lane)
// before it reduces anything. __launch_bounds__(256, 3) keeps it at <= 80
// registers (sm_90: 80, no spills; at 64 registers the six block sizes
// together spill), so 3 CTAs = 24 warps are resident per SM: up to 96 KB of
// loads in flight per SM, several times what Little's law asks for at 3 TB/s
// (~25 KB per SM at ~1 us latency), and as warps are independent, other
// warps' loads stay in flight while one computes. The compute per value is
// small (sm_90 SASS, bs 128: ~3 instructions to sum, ~5 to encode, ~6 for
// the scale, threshold and shuffles of the block, per lane and value), about
// half the issue rate of an SM at full bandwidth.
//
// A block is 2^LB rows of 32 of one group (LB <= 2) or 2^(LB-2) whole groups:
// per-lane float64 row sums (4 adds in order), rows combined in a fixed tree,
// then a butterfly (__shfl_xor_sync) over the 8 .. 32 lanes holding the
// block. The butterfly leaves the same bits in every lane (IEEE addition is
// commutative), so every lane of a block can compute the threshold itself;
// when a lane holds several blocks (bs 32, 64), lane i of the 8 computes the
// scale and threshold of the lane's block i and shares it with shuffles.
// The order is fixed, independent of the grid (see the top of the file for
// why the float32 scale equals the CPU's). Values past n are loaded as 0:
// they add nothing, their code is 1 (thresholds are > 0 or NaN), and counts
// are clipped at n. bs = 1024 is the two steps of an iteration (warp_pair).

#define BNG_WSTEP 512
#define BNG_WSTEPS 2
#define BNG_FLAG_PACKED_ALIGNED4 4ull
static_assert(BNG_WSTEPS == 2, "warp_pair: a block of 1024 values is the two steps of an iteration");

// warp_store writes the lane's 32-bit word of a warp step: bytes c..c+3 of
// group g (little-endian), from the 16 values and the thresholds of rows 0..3.
__device__ __forceinline__ void warp_store(const bng_args& a, const float (&v)[16], const float (&tr)[4], i64 step, int lane) {
    u32 word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int k = 0; k < 4; ++k) word |= code_of(v[4 * k + j], tr[k]) << (8 * j + 6 - 2 * k);
    }
    if (step * BNG_WSTEP + 128 * (lane >> 3) < a.n) {
        if (a.flags & BNG_FLAG_PACKED_ALIGNED4) {
            ((u32*)a.packed)[step * 32 + lane] = word;
        } else {
            u8* o = (u8*)a.packed + step * 128 + 4 * lane;
#pragma unroll
            for (int j = 0; j < 4; ++j) o[j] = (u8)(word >> (8 * j));
        }
    }
}

template <int M, int LB>
__device__ __forceinline__ void warp_step(const bng_args& a, const float (&v)[16], i64 step, int lane, u64& bad) {
    constexpr int NBL = LB < 2 ? (4 >> LB) : 1;               // blocks per lane
    constexpr int LANES = LB < 2 ? 8 : (8 << (LB < 2 ? 0 : LB - 2));  // lanes per block
    const i64 n = a.n;
    const i64 base = step * BNG_WSTEP;
    const int g = lane >> 3, c = (lane & 7) << 2;

    // Row sums / maxima, and the largest magnitude bits (non-finite check).
    Acc<M> r[4];
    u32 mb = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const u32 u = abs_bits(v[4 * k + j]);
            mb = u > mb ? u : mb;
            r[k].add(u);
        }
    }
    if (mb >= BNG_INF_BITS) {  // rare: find the first non-finite index
#pragma unroll
        for (int k = 0; k < 4; ++k)
#pragma unroll
            for (int j = 0; j < 4; ++j) note_bad(abs_bits(v[4 * k + j]), (u64)(base + 128 * g + 32 * k + c + j), bad);
    }

    double s[NBL];
    if constexpr (LB == 0) {
#pragma unroll
        for (int k = 0; k < 4; ++k) s[k] = r[k].get();
    } else if constexpr (LB == 1) {
        s[0] = combine<M>(r[0].get(), r[1].get());
        s[1] = combine<M>(r[2].get(), r[3].get());
    } else {
        s[0] = combine<M>(combine<M>(r[0].get(), r[1].get()), combine<M>(r[2].get(), r[3].get()));
    }
#pragma unroll
    for (int d = 1; d < LANES; d <<= 1) {
#pragma unroll
        for (int i = 0; i < NBL; ++i) s[i] = combine<M>(s[i], __shfl_xor_sync(BNG_FULL_MASK, s[i], d));
    }

    float t[NBL];
    if constexpr (NBL == 1) {
        // Every lane of the block: the same sum, so the same threshold.
        const i64 start = base + ((i64)((g << 7) >> (LB + 5)) << (LB + 5));
        t[0] = __uint_as_float(0x7fc00000u);  // a block past n: codes 1
        if (start < n) {
            const float sc = scale_of<M>(s[0], min((i64)(32 << LB), n - start));
            if ((lane & (LANES - 1)) == 0) ((float*)a.scales)[start >> (LB + 5)] = sc;
            t[0] = thr_of(sc);
        }
    } else {
        // Lane i < NBL of the 8 does block i of the group and shares it.
        const int sub = lane & 7;
        double my = s[0];
#pragma unroll
        for (int i = 1; i < NBL; ++i) my = sub == i ? s[i] : my;
        const i64 start = base + 128 * g + ((i64)sub << (LB + 5));
        float th = __uint_as_float(0x7fc00000u);  // blocks past n: codes 1
        if (sub < NBL && start < n) {
            const float sc = scale_of<M>(my, min((i64)(32 << LB), n - start));
            ((float*)a.scales)[start >> (LB + 5)] = sc;
            th = thr_of(sc);
        }
#pragma unroll
        for (int i = 0; i < NBL; ++i) t[i] = __shfl_sync(BNG_FULL_MASK, th, (lane & ~7) | i);
    }

    float tr[4];  // threshold of each row
#pragma unroll
    for (int k = 0; k < 4; ++k) tr[k] = t[(k >> LB) & (NBL - 1)];
    warp_store(a, v, tr, step, lane);
}

// warp_pair: bs = 1024, the two steps s0 (even) and s0 + 1 of an iteration
// are one block; the same scheme as warp_step, one butterfly over the warp.
template <int M>
__device__ __forceinline__ void warp_pair(const bng_args& a, const float (&v)[BNG_WSTEPS][16], i64 s0, i64 nsteps, int lane,
                                          u64& bad) {
    const i64 n = a.n;
    const i64 base = s0 * BNG_WSTEP;
    const int g = lane >> 3, c = (lane & 7) << 2;
    double h[2];
    u32 mb = 0;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        Acc<M> r[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const u32 q = abs_bits(v[u][4 * k + j]);
                mb = q > mb ? q : mb;
                r[k].add(q);
            }
        }
        h[u] = combine<M>(combine<M>(r[0].get(), r[1].get()), combine<M>(r[2].get(), r[3].get()));
    }
    if (mb >= BNG_INF_BITS) {
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
            for (int k = 0; k < 4; ++k)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    note_bad(abs_bits(v[u][4 * k + j]), (u64)(base + BNG_WSTEP * u + 128 * g + 32 * k + c + j), bad);
    }
    double sum = combine<M>(h[0], h[1]);
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) sum = combine<M>(sum, __shfl_xor_sync(BNG_FULL_MASK, sum, d));
    const float sc = scale_of<M>(sum, min((i64)(2 * BNG_WSTEP), n - base));  // base < n
    if (lane == 0) ((float*)a.scales)[s0 >> 1] = sc;
    const float t = thr_of(sc);
    const float tr[4] = {t, t, t, t};
    warp_store(a, v[0], tr, s0, lane);
    if (s0 + 1 < nsteps) warp_store(a, v[1], tr, s0 + 1, lane);
}

template <int M, int LB> __device__ __forceinline__ void warp_body(const bng_args& a) {
    const float* __restrict__ x = (const float*)a.x;
    const i64 n = a.n;
    const int lane = threadIdx.x & 31;
    const int off = ((lane >> 3) << 7) + ((lane & 7) << 2);  // 128 g + c
    const bool al16 = (a.flags & BNG_FLAG_X_ALIGNED16) != 0;
    const i64 nsteps = (n + BNG_WSTEP - 1) / BNG_WSTEP;
    const i64 stride = (i64)gridDim.x * BNG_WARPS * BNG_WSTEPS;
    u64 bad = BNG_NO_BAD;
    // All lanes of a warp run the same iterations (the loop is warp-uniform).
    for (i64 s0 = ((i64)blockIdx.x * BNG_WARPS + (threadIdx.x >> 5)) * BNG_WSTEPS; s0 < nsteps; s0 += stride) {
        // 1. Every load of the iteration first: 8 x 16 bytes per lane.
        float v[BNG_WSTEPS][16];
#pragma unroll
        for (int u = 0; u < BNG_WSTEPS; ++u) {
            const i64 b = (s0 + u) * BNG_WSTEP, p0 = b + off;
            if (b + BNG_WSTEP <= n) {
                if (al16) {
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        const float4 q = __ldg((const float4*)(x + p0 + 32 * k));
                        v[u][4 * k] = q.x;
                        v[u][4 * k + 1] = q.y;
                        v[u][4 * k + 2] = q.z;
                        v[u][4 * k + 3] = q.w;
                    }
                } else {
#pragma unroll
                    for (int k = 0; k < 4; ++k)
#pragma unroll
                        for (int j = 0; j < 4; ++j) v[u][4 * k + j] = __ldg(x + p0 + 32 * k + j);
                }
            } else {  // the last, partial step (or none)
#pragma unroll
                for (int k = 0; k < 4; ++k)
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const i64 p = p0 + 32 * k + j;
                        v[u][4 * k + j] = p < n ? __ldg(x + p) : 0.0f;
                    }
            }
        }
        // 2. Reduce and encode step by step (bs 1024: the two steps at once).
        if constexpr (LB == 5) {
            warp_pair<M>(a, v, s0, nsteps, lane, bad);
        } else {
#pragma unroll
            for (int u = 0; u < BNG_WSTEPS; ++u)
                if (s0 + u < nsteps) warp_step<M, LB>(a, v[u], s0 + u, lane, bad);
        }
    }
    flush_bad(a, bad);
}

template <int M> __device__ __forceinline__ void warp_dispatch(const bng_args& a) {
    switch (a.bs) {  // plan.go: bs is 32, 64, 128, 256, 512 or 1024 here
        case 32: warp_body<M, 0>(a); break;
        case 64: warp_body<M, 1>(a); break;
        case 128: warp_body<M, 2>(a); break;
        case 256: warp_body<M, 3>(a); break;
        case 512: warp_body<M, 4>(a); break;
        case 1024: warp_body<M, 5>(a); break;
        default: break;
    }
}

// ---------------------------------------------------------------- two-pass

template <int M> __device__ __forceinline__ void partials_body(const bng_args& a) {
    const float* __restrict__ x = (const float*)a.x;
    double* part = (double*)a.partial;
    const i64 n = a.n, bs = a.bs, CH = a.tile, cpb = a.cpb, nch = a.nchunks;
    const int lane = threadIdx.x & 31;
    u64 bad = BNG_NO_BAD;
    for (i64 c = (i64)blockIdx.x * BNG_WARPS + (threadIdx.x >> 5); c < nch; c += (i64)gridDim.x * BNG_WARPS) {
        const i64 blk = c / cpb, k = c - blk * cpb;
        const i64 bstart = blk * bs;
        const i64 lo = bstart + k * CH;
        const i64 hi = min(lo + CH, min(bstart + bs, n));
        Acc<M> acc;
        i64 i = lo + lane;
        for (; i + 7 * 32 < hi; i += 8 * 32) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; ++u) v[u] = __ldg(x + i + 32 * u);
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const u32 ab = abs_bits(v[u]);
                note_bad(ab, (u64)(i + 32 * u), bad);
                acc.add(ab);
            }
        }
        for (; i < hi; i += 32) {
            const u32 ab = abs_bits(__ldg(x + i));
            note_bad(ab, (u64)i, bad);
            acc.add(ab);
        }
        const double p = warp_reduce<M>(acc.get());
        if (lane == 0) part[c] = p;
    }
    flush_bad(a, bad);
}

template <int M> __device__ __forceinline__ void finish_block(const bng_args& a, i64 blk, double acc) {
    const i64 count = min(a.bs, a.n - blk * a.bs);
    ((float*)a.thr)[blk] = store_block<M>(a, blk, acc, count);
}

template <int M> __device__ __forceinline__ void finish_body(const bng_args& a) {
    __shared__ double sp[BNG_WARPS];
    const double* part = (const double*)a.partial;
    const i64 cpb = a.cpb, nb = a.nb;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (a.flags & BNG_FLAG_WIDE) {
        // One CTA per block.
        for (i64 blk = blockIdx.x; blk < nb; blk += gridDim.x) {
            const double* p = part + blk * cpb;
            double s = 0.0;
            for (i64 k = tid; k < cpb; k += BNG_THREADS) s = combine<M>(s, p[k]);
            s = warp_reduce<M>(s);
            if (lane == 0) sp[warp] = s;
            __syncthreads();
            if (tid == 0) {
                double t = sp[0];
                for (int w = 1; w < BNG_WARPS; ++w) t = combine<M>(t, sp[w]);
                finish_block<M>(a, blk, t);
            }
            __syncthreads();
        }
    } else {
        // One warp per block.
        for (i64 blk = (i64)blockIdx.x * BNG_WARPS + warp; blk < nb; blk += (i64)gridDim.x * BNG_WARPS) {
            const double* p = part + blk * cpb;
            double s = 0.0;
            for (i64 k = lane; k < cpb; k += 32) s = combine<M>(s, p[k]);
            s = warp_reduce<M>(s);
            if (lane == 0) finish_block<M>(a, blk, s);
        }
    }
}

// Byte count of the packed codes of n values.
__device__ __forceinline__ i64 packed_len(i64 n) { return ((n + 127) >> 7) << 5; }

// Values below 2^32 - 256 take 32-bit divisions.
#define BNG_SMALL_N 0xffffff00ll

__device__ __forceinline__ void encode_body(const bng_args& a) {
    const float* __restrict__ x = (const float*)a.x;
    const float* __restrict__ thr = (const float*)a.thr;
    u8* out = (u8*)a.packed;
    const i64 n = a.n, bs = a.bs, nbytes = packed_len(n);
    const bool one = a.nb == 1, small = n < BNG_SMALL_N;
    const float t1 = one ? thr[0] : 0.0f;
    for (i64 bi = (i64)blockIdx.x * BNG_THREADS + threadIdx.x; bi < nbytes; bi += (i64)gridDim.x * BNG_THREADS) {
        const i64 p0 = ((bi >> 5) << 7) + (bi & 31);
        u32 byte = 0;
        if (one) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const i64 p = p0 + 32 * k;
                const u32 c = p < n ? code_of(__ldg(x + p), t1) : 1u;
                byte |= c << (6 - 2 * k);
            }
        } else {
            // Block of p0, then of p0 + 32, + 64, + 96 by stepping (bs > 32 here,
            // but the loop is correct for any bs).
            i64 blk = small ? (i64)((u32)p0 / (u32)bs) : p0 / bs;
            i64 r = p0 - blk * bs;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                if (k > 0) {
                    r += 32;
                    while (r >= bs) {
                        r -= bs;
                        ++blk;
                    }
                }
                const i64 p = p0 + 32 * k;
                const u32 c = p < n ? code_of(__ldg(x + p), __ldg(thr + blk)) : 1u;
                byte |= c << (6 - 2 * k);
            }
        }
        out[bi] = (u8)byte;
    }
}

// ---------------------------------------------------------------- unpack / dequantize

__device__ __forceinline__ i64 block_of(i64 p, i64 bs, bool small) {
    return small ? (i64)((u32)p / (u32)bs) : p / bs;
}

__device__ __forceinline__ void unpack_body(const bng_args& a) {
    const u8* __restrict__ packed = (const u8*)a.packed;
    signed char* out = (signed char*)a.out;
    const i64 n = a.n, nbytes = packed_len(n);
    for (i64 bi = (i64)blockIdx.x * BNG_THREADS + threadIdx.x; bi < nbytes; bi += (i64)gridDim.x * BNG_THREADS) {
        const u32 byte = packed[bi];
        const i64 p0 = ((bi >> 5) << 7) + (bi & 31);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const i64 p = p0 + 32 * k;
            if (p < n) out[p] = (signed char)((int)((byte >> (6 - 2 * k)) & 3u) - 1);
        }
    }
}

__device__ __forceinline__ void dequantize_body(const bng_args& a) {
    const u8* __restrict__ packed = (const u8*)a.packed;
    const float* __restrict__ scales = (const float*)a.scales;
    float* out = (float*)a.out;
    const i64 n = a.n, bs = a.bs, nbytes = packed_len(n);
    const bool one = a.nb == 1, small = n < BNG_SMALL_N;
    for (i64 bi = (i64)blockIdx.x * BNG_THREADS + threadIdx.x; bi < nbytes; bi += (i64)gridDim.x * BNG_THREADS) {
        const u32 byte = packed[bi];
        const i64 p0 = ((bi >> 5) << 7) + (bi & 31);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const i64 p = p0 + 32 * k;
            if (p < n) {
                const float s = scales[one ? 0 : block_of(p, bs, small)];
                const float q = (float)((int)((byte >> (6 - 2 * k)) & 3u) - 1);
                out[p] = __fmul_rn(q, s);
            }
        }
    }
}

// ---------------------------------------------------------------- entry points

extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_fused_absmean(bng_args a) { fused_body<0>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_fused_absmax(bng_args a) { fused_body<1>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_partials_absmean(bng_args a) { partials_body<0>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_partials_absmax(bng_args a) { partials_body<1>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_finish_absmean(bng_args a) { finish_body<0>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_finish_absmax(bng_args a) { finish_body<1>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_encode(bng_args a) { encode_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_unpack(bng_args a) { unpack_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_i2s_dequantize(bng_args a) { dequantize_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS, 3) bng_i2s_warp_absmean(bng_args a) { warp_dispatch<0>(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS, 3) bng_i2s_warp_absmax(bng_args a) { warp_dispatch<1>(a); }

// The W1.58A8 convolution and linear kernels (same module).
#include "conv.cu"
