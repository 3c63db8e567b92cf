// W1.58A8 convolution and linear kernels of bitnet_go: int8 activations,
// ternary I2_S weights read as they are stored (2 bits a weight), int32
// accumulation with dp4a, the float folds of the CPU path (gokern/ops/conv2d).
//
// Included at the end of i2s.cu (one PTX module; build_ptx.sh hands this
// file to NVRTC as a header), and compiled for the CPU by the emulator test
// (cuda/testdata/emu) with the same source. Host side: cuda/conv.go (checks,
// workspace) and cuda/convplan.go (launches, struct bng_conv_args).
//
// Bit-exactness with the CPU path (gokern/ops/conv2d, Conv2DInfo's int8 path):
//   - per sample n: m = max|x_n| over the non-NaN values (fmaxf drops NaN;
//     a maximum has no order, so the reduction order is free),
//     a_n = __fdiv_rn(127, fmaxf(m, 1e-5));
//   - q = clamp(round_half_even(__fmul_rn(x, a_n)), -128, 127), NaN -> 0
//     (__float2int_rn rounds half to even; the clamp comes first);
//   - acc_b = sum of w*q over the K values of scale block b, exact in int32
//     (dp4a), whatever the order;
//   - t_b = __fmul_rn(__fdiv_rn(__int2float_rn(acc_b), a_n), s(o, b)),
//     out = __fadd_rn(...__fadd_rn(t_0, t_1)..., t_{B-1}) then __fadd_rn(., bias),
//     the _rn intrinsics so that no multiply-add is ever fused (the build
//     passes --fmad=false too).
// Weight codes: with the finite check, bng_conv_check_codes finds the first
// code 3 (which quantization never writes) before the products run, and the
// call raises the CPU path's error; without it a code 3 reads as 2 (as in
// bng_i2s_unpack).
//
// Kernels (256 threads, grid-stride loops: the grid size never changes a result):
//   bng_conv_absmax:  per-sample max|x| (atomicMax on the float's bits: they
//                     order like the values for x >= 0) and, when bad is set,
//                     the first non-finite index of x (64-bit atomicMin).
//   bng_conv_check_codes: (with the finite check) the first weight position
//                     holding code 3 (64-bit atomicMin).
//   bng_conv_quant:   x -> int8 q (NCHW, one byte a value), once per call.
//   bng_conv_igemm:   implicit GEMM per (sample, group): a CTA computes a
//                     64 (output channels) x 64 (output positions) tile; per
//                     32-wide k step the weights are unpacked to int8 in
//                     shared memory and the im2col slice of q is gathered
//                     into shared memory (k contiguous), then each thread
//                     accumulates 4x4 outputs with dp4a. The k loop runs
//                     scale block by scale block; each block's int32 sums
//                     are folded into float32 outputs in block order.
//   bng_conv_fgemm:   float32 activations (act_bits=None): the same tiles,
//                     x gathered as float, weights unpacked to float, fmaf.
//   bng_linear_fgemv: linear layers of at most 8 rows, float32 activations.
//   bng_linear_gemv_any: the other linear layers (K or the block not a
//                     multiple of 128): 4 positions a lane, edges masked.
//   bng_linear_gemv:  linear layers (1x1, one output position, K and the
//                     block a multiple of 128, at most 8 columns): one warp
//                     per output row reads the row's packed groups once
//                     (a 32-bit word per lane: 16 weights), dp4a against the
//                     int8 columns, warp reduction, fold.
//   bng_conv_igemm_mma: bng_conv_igemm with int8 tensor-core products
//                     (mma.sync m8n8k16, in this compute_75 module), taken on
//                     sm_80 and newer; the emulator computes the instruction
//                     from the PTX ISA's fragment layout.
// The m16n8k32 shape (twice the work per instruction on sm_80+) needs an
// sm_80 module and is not used.

#define BNG_CBM 64       // output channels per tile
#define BNG_CBN 64       // output positions per tile
#define BNG_CBK 32       // k per shared-memory step
#define BNG_CROW 36      // bytes per shared row (BNG_CBK + 4: 4-byte aligned, fewer bank conflicts)
#define BNG_CCHUNK 4096  // values per CTA step of the activation kernels
#define BNG_GEMV_COLS 8  // most columns of the GEMV kernel

#define BNG_CF_PER_ROW 1   // scales: one per (output channel, block), else one
#define BNG_CF_BIAS 2      // bias is set
#define BNG_CF_W_ALIGN4 4  // the packed weight is 4-byte aligned (GEMV word loads)

// struct bng_conv_args: the pointers first (the emulator translates the
// first 8 fields), then the geometry. Mirrored by convArgs in cuda/convplan.go.
struct bng_conv_args {
    u64 x;       // float32 (N, C, H, W)
    u64 q;       // int8 (N, C, H, W) workspace
    u64 w;       // I2_S codes of the flattened (O, C/groups, kH, kW) weight
    u64 scales;  // float32: 1, or O*nb
    u64 bias;    // float32 (O) or 0
    u64 out;     // float32 (N, O, Ho, Wo)
    u64 amax;    // float32 (N) workspace: max|x_n| (zeroed before bng_conv_absmax)
    u64 bad;     // u64 workspace: first non-finite index of x, or 0 for no check
    i64 n, c, h, wd, o, cg, og, kh, kw, ho, wo, sh, sw, pt, pl, dh, dw;
    i64 k;       // cg*kh*kw
    i64 nb, bl;  // scale blocks per output channel and their length in k
    i64 tiles_o, tiles_p, cols, flags;
};

__device__ __forceinline__ float bng_act_scale(const float* amax, i64 n) {
    return __fdiv_rn(127.0f, fmaxf(amax[n], 1e-5f));
}

__device__ __forceinline__ signed char bng_quant8(float v, float a) {
    float r = __fmul_rn(v, a);
    if (r != r) return 0;
    r = fminf(fmaxf(r, -128.0f), 127.0f);
    return (signed char)__float2int_rn(r);
}

// One fold step (gokern/ops/conv2d scaler.fold1I32): block b's sum into y.
__device__ __forceinline__ float bng_fold(float y, int acc, float a, float s, bool add, bool add_bias, float bias) {
    float t = __fmul_rn(__fdiv_rn(__int2float_rn(acc), a), s);
    if (add) t = __fadd_rn(y, t);
    if (add_bias) t = __fadd_rn(t, bias);
    return t;
}

__device__ __forceinline__ float bng_warp_max(float v) {
    for (int d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

__device__ __forceinline__ void bng_conv_absmax_body(const bng_conv_args& a) {
    __shared__ float part[BNG_WARPS];
    const float* x = (const float*)a.x;
    const i64 per = a.c * a.h * a.wd;
    const i64 cps = (per + BNG_CCHUNK - 1) / BNG_CCHUNK;
    for (i64 t = blockIdx.x; t < a.n * cps; t += gridDim.x) {
        const i64 n = t / cps, lo = n * per + (t % cps) * BNG_CCHUNK;
        const i64 hi = min(lo + BNG_CCHUNK, (n + 1) * per);
        float m = 0.0f;
        u64 bad = ~0ull;
        for (i64 i = lo + threadIdx.x; i < hi; i += BNG_THREADS) {
            const float v = x[i];
            m = fmaxf(m, fabsf(v));  // fmaxf drops NaN
            if (!isfinite(v) && (u64)i < bad) bad = (u64)i;
        }
        if (a.bad && bad != ~0ull) atomicMin((u64*)a.bad, bad);
        m = bng_warp_max(m);
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int i = 1; i < BNG_WARPS; ++i) m = fmaxf(m, part[i]);
            atomicMax((u32*)a.amax + n, __float_as_uint(m));
        }
        __syncthreads();
    }
}

__device__ __forceinline__ void bng_conv_quant_body(const bng_conv_args& a) {
    const float* x = (const float*)a.x;
    signed char* q = (signed char*)a.q;
    const float* amax = (const float*)a.amax;
    const i64 per = a.c * a.h * a.wd;
    const i64 cps = (per + BNG_CCHUNK - 1) / BNG_CCHUNK;
    for (i64 t = blockIdx.x; t < a.n * cps; t += gridDim.x) {
        const i64 n = t / cps, lo = n * per + (t % cps) * BNG_CCHUNK;
        const i64 hi = min(lo + BNG_CCHUNK, (n + 1) * per);
        const float s = bng_act_scale(amax, n);
        for (i64 i = lo + threadIdx.x; i < hi; i += BNG_THREADS) q[i] = bng_quant8(x[i], s);
    }
}

// bng_conv_check_codes: the smallest flat position p < o*k whose I2_S code
// is 3 (invalid), atomicMin into the u64 at a.bad (set to ~0 before). One
// byte of codes a thread step: 4 positions, 32 apart in one group.
__device__ __forceinline__ void bng_conv_check_codes_body(const bng_conv_args& a) {
    const u8* w = (const u8*)a.w;
    const i64 n = a.o * a.k, nbytes = ((n + 127) >> 7) << 5;
    u64 first = ~0ull;
    for (i64 b = (i64)blockIdx.x * BNG_THREADS + threadIdx.x; b < nbytes; b += (i64)gridDim.x * BNG_THREADS) {
        const u32 v = w[b];
        if ((v & (v >> 1) & 0x55u) == 0) continue;  // no 2-bit field is 3
        for (int s = 0; s < 4; ++s) {
            const i64 p = ((b >> 5) << 7) + (b & 31) + 32 * s;
            if (((v >> (6 - 2 * s)) & 3u) == 3u && p < n && (u64)p < first) first = (u64)p;
        }
    }
    if (first != ~0ull) atomicMin((u64*)a.bad, first);
}

// The ternary value of flat position p of I2_S codes w.
__device__ __forceinline__ signed char bng_i2s_value(const u8* w, i64 p) {
    const u8 b = w[((p >> 7) << 5) | (p & 31)];
    return (signed char)(((b >> (6 - 2 * ((p >> 5) & 3))) & 3) - 1);
}

// Stages one k step of an implicit-GEMM tile (sample n, group g, output
// channels o0.., output positions p0..) in shared memory, k0..k0+BNG_CBK-1
// contiguous in rows ROW elements apart: ws[row] the ternary weights of
// channel o0 + row, xs[col] the im2col slice of x (NCHW) at position
// p0 + col, both as T. Past the group's channels, the positions or the block
// end ke, and in the padding, the values are 0. Consecutive threads take
// consecutive positions of xs (coalesced reads of x).
template <class T, int ROW>
__device__ __forceinline__ void bng_conv_stage(const bng_conv_args& a, const u8* w, const T* x, T* ws, T* xs, i64 n,
                                               i64 g, i64 o0, i64 p0, i64 k0, i64 ke) {
    const int tid = threadIdx.x;
    const i64 P = a.ho * a.wo, khw = a.kh * a.kw;
    for (int e = tid; e < BNG_CBM * BNG_CBK; e += BNG_THREADS) {
        const int row = e / BNG_CBK, kk = e % BNG_CBK;
        const i64 o = o0 + row, k = k0 + kk;
        T v = 0;
        if (o < a.og && k < ke) v = (T)bng_i2s_value(w, (g * a.og + o) * a.k + k);
        ws[row * ROW + kk] = v;
    }
    for (int e = tid; e < BNG_CBN * BNG_CBK; e += BNG_THREADS) {
        const int col = e % BNG_CBN, kk = e / BNG_CBN;
        const i64 p = p0 + col, k = k0 + kk;
        T v = 0;
        if (p < P && k < ke) {
            const i64 ci = k / khw, rk = k % khw, ky = rk / a.kw, kx = rk % a.kw;
            const i64 iy = (p / a.wo) * a.sh - a.pt + ky * a.dh;
            const i64 ix = (p % a.wo) * a.sw - a.pl + kx * a.dw;
            if (iy >= 0 && iy < a.h && ix >= 0 && ix < a.wd) v = x[((n * a.c + g * a.cg + ci) * a.h + iy) * a.wd + ix];
        }
        xs[col * ROW + kk] = v;
    }
}

__device__ __forceinline__ void bng_conv_igemm_body(const bng_conv_args& a) {
    __shared__ __align__(16) signed char ws[BNG_CBM * BNG_CROW];
    __shared__ __align__(16) signed char xs[BNG_CBN * BNG_CROW];
    const u8* w = (const u8*)a.w;
    const signed char* q = (const signed char*)a.q;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const i64 groups = a.c / a.cg, P = a.ho * a.wo;
    const i64 tiles = a.n * groups * a.tiles_o * a.tiles_p;
    for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const i64 tp = t % a.tiles_p;
        i64 r = t / a.tiles_p;
        const i64 to = r % a.tiles_o;
        r /= a.tiles_o;
        const i64 g = r % groups, n = r / groups;
        const i64 o0 = to * BNG_CBM, p0 = tp * BNG_CBN;
        const float s_act = bng_act_scale((const float*)a.amax, n);
        float y[4][4] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            int acc[4][4];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = 0;
            const i64 kb = b * a.bl, ke = kb + a.bl;
            for (i64 k0 = kb; k0 < ke; k0 += BNG_CBK) {
                bng_conv_stage<signed char, BNG_CROW>(a, w, q, ws, xs, n, g, o0, p0, k0, ke);
                __syncthreads();
                for (int kk = 0; kk < BNG_CBK; kk += 4) {
                    int wv[4], xv[4];
                    for (int i = 0; i < 4; ++i) wv[i] = *(const int*)&ws[(ty + 16 * i) * BNG_CROW + kk];
                    for (int j = 0; j < 4; ++j) xv[j] = *(const int*)&xs[(tx + 16 * j) * BNG_CROW + kk];
                    for (int i = 0; i < 4; ++i)
                        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(wv[i], xv[j], acc[i][j]);
                }
                __syncthreads();
            }
            const bool last = b == a.nb - 1, add_bias = last && (a.flags & BNG_CF_BIAS);
            for (int i = 0; i < 4; ++i) {
                const i64 o = o0 + ty + 16 * i;
                if (o >= a.og) continue;
                const i64 oc = g * a.og + o;
                const float s = (a.flags & BNG_CF_PER_ROW) ? scales[oc * a.nb + b] : scales[0];
                const float bv = add_bias ? bias[oc] : 0.0f;
                for (int j = 0; j < 4; ++j) y[i][j] = bng_fold(y[i][j], acc[i][j], s_act, s, b > 0, add_bias, bv);
            }
        }
        for (int i = 0; i < 4; ++i) {
            const i64 o = o0 + ty + 16 * i;
            if (o >= a.og) continue;
            const i64 oc = g * a.og + o;
            for (int j = 0; j < 4; ++j) {
                const i64 p = p0 + tx + 16 * j;
                if (p < P) out[(n * a.o + oc) * P + p] = y[i][j];
            }
        }
    }
}

// Float32 activations (act_bits=None): the implicit GEMM of bng_conv_igemm
// with x read as float32 (no quantization) and the ternary weights unpacked
// to float in shared memory; per scale block b the float sum
// acc_b = sum w*x (fmaf, k ascending within each thread) is folded as
// y = acc_0*s_0 + acc_1*s_1 + ... then + bias. Within float32 rounding of
// F.conv2d(x, dequantized weight), not bit-identical to the CPU (the
// summation order differs).
#define BNG_FROW 33  // floats per shared row (BNG_CBK + 1: no bank conflicts on the column reads)

__device__ __forceinline__ void bng_conv_fgemm_body(const bng_conv_args& a) {
    __shared__ float wf[BNG_CBM * BNG_FROW];
    __shared__ float xf[BNG_CBN * BNG_FROW];
    const u8* w = (const u8*)a.w;
    const float* x = (const float*)a.x;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const i64 groups = a.c / a.cg, P = a.ho * a.wo;
    const i64 tiles = a.n * groups * a.tiles_o * a.tiles_p;
    for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const i64 tp = t % a.tiles_p;
        i64 r = t / a.tiles_p;
        const i64 to = r % a.tiles_o;
        r /= a.tiles_o;
        const i64 g = r % groups, n = r / groups;
        const i64 o0 = to * BNG_CBM, p0 = tp * BNG_CBN;
        float y[4][4] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            float acc[4][4];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
            const i64 kb = b * a.bl, ke = kb + a.bl;
            for (i64 k0 = kb; k0 < ke; k0 += BNG_CBK) {
                bng_conv_stage<float, BNG_FROW>(a, w, x, wf, xf, n, g, o0, p0, k0, ke);
                __syncthreads();
                for (int kk = 0; kk < BNG_CBK; ++kk) {
                    float wv[4], xv[4];
                    for (int i = 0; i < 4; ++i) wv[i] = wf[(ty + 16 * i) * BNG_FROW + kk];
                    for (int j = 0; j < 4; ++j) xv[j] = xf[(tx + 16 * j) * BNG_FROW + kk];
                    for (int i = 0; i < 4; ++i)
                        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(wv[i], xv[j], acc[i][j]);
                }
                __syncthreads();
            }
            for (int i = 0; i < 4; ++i) {
                const i64 o = o0 + ty + 16 * i;
                if (o >= a.og) continue;
                const i64 oc = g * a.og + o;
                const float s = (a.flags & BNG_CF_PER_ROW) ? scales[oc * a.nb + b] : scales[0];
                for (int j = 0; j < 4; ++j) y[i][j] = b > 0 ? fmaf(acc[i][j], s, y[i][j]) : __fmul_rn(acc[i][j], s);
            }
        }
        for (int i = 0; i < 4; ++i) {
            const i64 o = o0 + ty + 16 * i;
            if (o >= a.og) continue;
            const i64 oc = g * a.og + o;
            const float bv = (a.flags & BNG_CF_BIAS) ? bias[oc] : 0.0f;
            for (int j = 0; j < 4; ++j) {
                const i64 p = p0 + tx + 16 * j;
                if (p < P) out[(n * a.o + oc) * P + p] = __fadd_rn(y[i][j], bv);
            }
        }
    }
}

// One int8 tensor-core product (sm_75 and newer; the plan takes it on
// sm_80 and newer): mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32, C += A*B
// with A 8x16 (row major), B 16x8 (column major), C 8x8 int32 spread over the
// warp as the PTX ISA lays them out (9.7.14.5, "Matrix Fragments for
// mma.m8n8k16"): lane = 4*g + t holds in a the A values (row g, k 4t..4t+3),
// in b the B values (k 4t..4t+3, column g), in c the C values (row g,
// columns 2t, 2t+1); bytes low to high. The emulator (emu.hpp) computes it
// from the same layout.
#ifndef BNG_EMU
__device__ __forceinline__ void bng_mma_m8n8k16_s8(int a, int b, int (&c)[2]) {
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+r"(c[0]), "+r"(c[1])
                 : "r"(a), "r"(b));
}
#endif

// bng_conv_igemm with the products on tensor cores: the same tiles, shared
// memory and folds; warp w computes output channels 8w..8w+7 of the tile
// against its 64 positions as 8 m8n8k16 products per 16 k (A: the weight
// rows, k contiguous; B: the im2col columns, k contiguous, i.e. column
// major). Lane 4g+t holds the outputs (channel 8w+g, positions 8j+2t,
// 8j+2t+1) for j = 0..7. The int32 sums are exact, so the bits are
// bng_conv_igemm's.
__device__ __forceinline__ void bng_conv_igemm_mma_body(const bng_conv_args& a) {
    __shared__ __align__(16) signed char ws[BNG_CBM * BNG_CROW];
    __shared__ __align__(16) signed char xs[BNG_CBN * BNG_CROW];
    const u8* w = (const u8*)a.w;
    const signed char* q = (const signed char*)a.q;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
    const i64 groups = a.c / a.cg, P = a.ho * a.wo;
    const i64 tiles = a.n * groups * a.tiles_o * a.tiles_p;
    for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const i64 tp = t % a.tiles_p;
        i64 r = t / a.tiles_p;
        const i64 to = r % a.tiles_o;
        r /= a.tiles_o;
        const i64 g = r % groups, n = r / groups;
        const i64 o0 = to * BNG_CBM, p0 = tp * BNG_CBN;
        const float s_act = bng_act_scale((const float*)a.amax, n);
        const i64 o = o0 + 8 * warp + gq;  // this lane's output channel (within the group)
        float y[8][2] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            int acc[8][2];
            for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = 0;
            const i64 kb = b * a.bl, ke = kb + a.bl;
            for (i64 k0 = kb; k0 < ke; k0 += BNG_CBK) {
                bng_conv_stage<signed char, BNG_CROW>(a, w, q, ws, xs, n, g, o0, p0, k0, ke);
                __syncthreads();
                for (int kk = 0; kk < BNG_CBK; kk += 16) {
                    const int av = *(const int*)&ws[(8 * warp + gq) * BNG_CROW + kk + 4 * tq];
                    for (int j = 0; j < 8; ++j) {
                        const int bv = *(const int*)&xs[(8 * j + gq) * BNG_CROW + kk + 4 * tq];
                        bng_mma_m8n8k16_s8(av, bv, acc[j]);
                    }
                }
                __syncthreads();
            }
            if (o < a.og) {
                const bool last = b == a.nb - 1, add_bias = last && (a.flags & BNG_CF_BIAS);
                const i64 oc = g * a.og + o;
                const float s = (a.flags & BNG_CF_PER_ROW) ? scales[oc * a.nb + b] : scales[0];
                const float bv = add_bias ? bias[oc] : 0.0f;
                for (int j = 0; j < 8; ++j)
                    for (int i = 0; i < 2; ++i) y[j][i] = bng_fold(y[j][i], acc[j][i], s_act, s, b > 0, add_bias, bv);
            }
        }
        if (o < a.og) {
            const i64 oc = g * a.og + o;
            for (int j = 0; j < 8; ++j)
                for (int i = 0; i < 2; ++i) {
                    const i64 p = p0 + 8 * j + 2 * tq + i;
                    if (p < P) out[(n * a.o + oc) * P + p] = y[j][i];
                }
        }
    }
}

// Linear layers: x (cols, K) int8 in q, out (cols, O). Needs K and bl
// multiples of 128 (rows and blocks start at a group) and cols <= 8.
__device__ __forceinline__ void bng_linear_gemv_body(const bng_conv_args& a) {
    const u8* w = (const u8*)a.w;
    const signed char* q = (const signed char*)a.q;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 K = a.k, gpb = a.bl >> 7;
    const int cols = (int)a.cols;
    const bool aligned = a.flags & BNG_CF_W_ALIGN4;
    for (i64 o = (i64)blockIdx.x * BNG_WARPS + warp; o < a.o; o += (i64)gridDim.x * BNG_WARPS) {
        float y[BNG_GEMV_COLS] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            int acc[BNG_GEMV_COLS];
            for (int c = 0; c < BNG_GEMV_COLS; ++c) acc[c] = 0;
            for (i64 gi = lane >> 3; gi < gpb; gi += 4) {
                const i64 kg = (b * gpb + gi) << 7;  // k of the group's first value
                const u8* src = w + ((o * K + kg) >> 7) * 32 + 4 * (lane & 7);
                u32 wv;
                if (aligned) {
                    wv = *(const u32*)src;
                } else {
                    wv = (u32)src[0] | (u32)src[1] << 8 | (u32)src[2] << 16 | (u32)src[3] << 24;
                }
                for (int s = 0; s < 4; ++s) {
                    const int codes = (int)((wv >> (6 - 2 * s)) & 0x03030303u);
                    const i64 k = kg + 32 * s + 4 * (lane & 7);
                    for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                        if (c >= cols) break;
                        const int xv = *(const int*)(q + c * K + k);
                        // sum (code - 1) * x = sum code*x - sum x
                        acc[c] = __dp4a(codes, xv, acc[c]);
                        acc[c] = __dp4a(-1, xv, acc[c]);  // four bytes of -1
                    }
                }
            }
            const bool last = b == a.nb - 1, add_bias = last && (a.flags & BNG_CF_BIAS);
            const float s = (a.flags & BNG_CF_PER_ROW) ? scales[o * a.nb + b] : scales[0];
            const float bv = add_bias ? bias[o] : 0.0f;
            for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                if (c >= cols) break;
                int v = acc[c];
                for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
                y[c] = bng_fold(y[c], v, bng_act_scale((const float*)a.amax, c), s, b > 0, add_bias, bv);
            }
        }
        for (int c = 0; c < BNG_GEMV_COLS; ++c) {
            if (c >= cols) break;
            if (lane == c) out[c * a.o + o] = y[c];
        }
    }
}

// Linear layers whose K or block length is not a multiple of 128 (rows and
// blocks start anywhere in a group): one warp per output row, each lane
// takes 4 consecutive flat positions p0..p0+3 (p0 a multiple of 4: one
// byte each at the same shift, a 32-bit word of codes), the warp 128
// positions per step; positions outside the block read x as 0 (so their
// code, whatever it is, adds code*0 - 0). x is read as a word where its 4 bytes lie inside the
// block and K is a multiple of 4 (aligned), byte by byte otherwise. The
// sums are exact, so the result is the CPU's (and bng_linear_gemv's) bits.
__device__ __forceinline__ void bng_linear_gemv_any_body(const bng_conv_args& a) {
    const u8* w = (const u8*)a.w;
    const signed char* q = (const signed char*)a.q;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 K = a.k;
    const int cols = (int)a.cols;
    const bool wal = a.flags & BNG_CF_W_ALIGN4, xal = (K & 3) == 0;
    for (i64 o = (i64)blockIdx.x * BNG_WARPS + warp; o < a.o; o += (i64)gridDim.x * BNG_WARPS) {
        float y[BNG_GEMV_COLS] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            int acc[BNG_GEMV_COLS];
            for (int c = 0; c < BNG_GEMV_COLS; ++c) acc[c] = 0;
            const i64 lo = o * K + b * a.bl, hi = lo + a.bl;  // flat positions of the block
            for (i64 p0 = (lo & ~(i64)3) + 4 * lane; p0 < hi; p0 += 128) {
                const u8* src = w + (((p0 >> 7) << 5) | (p0 & 31));
                u32 wv;
                if (wal) {
                    wv = *(const u32*)src;
                } else {
                    wv = (u32)src[0] | (u32)src[1] << 8 | (u32)src[2] << 16 | (u32)src[3] << 24;
                }
                const int codes = (int)((wv >> (6 - 2 * ((p0 >> 5) & 3))) & 0x03030303u);
                const bool inside = p0 >= lo && p0 + 4 <= hi;
                const i64 k = p0 - o * K;  // x's index of position p0 (may be < 0 or past K at the edges)
                for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                    if (c >= cols) break;
                    int xv;
                    if (inside && xal) {
                        xv = *(const int*)(q + c * K + k);
                    } else {
                        u32 u = 0;
                        for (int i = 0; i < 4; ++i)
                            if (p0 + i >= lo && p0 + i < hi) u |= (u32)(u8)q[c * K + k + i] << (8 * i);
                        xv = (int)u;
                    }
                    acc[c] = __dp4a(codes, xv, acc[c]);
                    acc[c] = __dp4a(-1, xv, acc[c]);
                }
            }
            const bool last = b == a.nb - 1, add_bias = last && (a.flags & BNG_CF_BIAS);
            const float s = (a.flags & BNG_CF_PER_ROW) ? scales[o * a.nb + b] : scales[0];
            const float bv = add_bias ? bias[o] : 0.0f;
            for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                if (c >= cols) break;
                int v = acc[c];
                for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
                y[c] = bng_fold(y[c], v, bng_act_scale((const float*)a.amax, c), s, b > 0, add_bias, bv);
            }
        }
        for (int c = 0; c < BNG_GEMV_COLS; ++c) {
            if (c >= cols) break;
            if (lane == c) out[c * a.o + o] = y[c];
        }
    }
}

// Linear layers with float32 activations and at most BNG_GEMV_COLS rows:
// bng_linear_gemv_any's walk (one warp per output row, 4 flat positions a
// lane from any offset, x zero outside the block) with float x read from a.x
// (cols, K) and float sums (fmaf; per block folded as acc*s, then + bias).
// Within float32 rounding of the dequantized weight's product.
__device__ __forceinline__ void bng_linear_fgemv_body(const bng_conv_args& a) {
    const u8* w = (const u8*)a.w;
    const float* x = (const float*)a.x;
    const float* scales = (const float*)a.scales;
    const float* bias = (const float*)a.bias;
    float* out = (float*)a.out;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 K = a.k;
    const int cols = (int)a.cols;
    const bool wal = a.flags & BNG_CF_W_ALIGN4;
    for (i64 o = (i64)blockIdx.x * BNG_WARPS + warp; o < a.o; o += (i64)gridDim.x * BNG_WARPS) {
        float y[BNG_GEMV_COLS] = {};
        for (i64 b = 0; b < a.nb; ++b) {
            float acc[BNG_GEMV_COLS];
            for (int c = 0; c < BNG_GEMV_COLS; ++c) acc[c] = 0.0f;
            const i64 lo = o * K + b * a.bl, hi = lo + a.bl;
            for (i64 p0 = (lo & ~(i64)3) + 4 * lane; p0 < hi; p0 += 128) {
                const u8* src = w + (((p0 >> 7) << 5) | (p0 & 31));
                u32 wv;
                if (wal) {
                    wv = *(const u32*)src;
                } else {
                    wv = (u32)src[0] | (u32)src[1] << 8 | (u32)src[2] << 16 | (u32)src[3] << 24;
                }
                const u32 codes = (wv >> (6 - 2 * ((p0 >> 5) & 3))) & 0x03030303u;
                const i64 k = p0 - o * K;
                for (int i = 0; i < 4; ++i) {
                    if (p0 + i < lo || p0 + i >= hi) continue;
                    const float wq = (float)((int)((codes >> (8 * i)) & 3u) - 1);
                    for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                        if (c >= cols) break;
                        acc[c] = fmaf(wq, x[c * K + k + i], acc[c]);
                    }
                }
            }
            const float s = (a.flags & BNG_CF_PER_ROW) ? scales[o * a.nb + b] : scales[0];
            for (int c = 0; c < BNG_GEMV_COLS; ++c) {
                if (c >= cols) break;
                float v = acc[c];
                for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
                y[c] = b > 0 ? fmaf(v, s, y[c]) : __fmul_rn(v, s);
            }
        }
        const float bv = (a.flags & BNG_CF_BIAS) ? bias[o] : 0.0f;
        for (int c = 0; c < BNG_GEMV_COLS; ++c) {
            if (c >= cols) break;
            if (lane == c) out[c * a.o + o] = __fadd_rn(y[c], bv);
        }
    }
}

extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_absmax(bng_conv_args a) { bng_conv_absmax_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_quant(bng_conv_args a) { bng_conv_quant_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_igemm(bng_conv_args a) { bng_conv_igemm_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_linear_gemv(bng_conv_args a) { bng_linear_gemv_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_fgemm(bng_conv_args a) { bng_conv_fgemm_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_check_codes(bng_conv_args a) { bng_conv_check_codes_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_linear_gemv_any(bng_conv_args a) { bng_linear_gemv_any_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_conv_igemm_mma(bng_conv_args a) { bng_conv_igemm_mma_body(a); }
extern "C" __global__ void __launch_bounds__(BNG_THREADS) bng_linear_fgemv(bng_conv_args a) { bng_linear_fgemv_body(a); }
