// libbitnet_cpp_peer.so: bitnet.cpp's I2_S x int8 kernel (ggml_vec_dot_i2_i8_s from
// microsoft/BitNet src/ggml-bitnet-mad.cpp, compiled out of tree by build.sh) behind a
// small C entry point that `python -m bitnet_go bench linear` calls through ctypes.
//
// This file is bitnet_go's own code: no bitnet.cpp source is copied here. It drives the
// kernel the way bitnet.cpp's own GEMV/GEMM drivers do with ACT_PARALLEL (the default in
// include/gemm-config.h):
//   - N == 1 (GEMV): one call per weight row, nrc = 1 (the 1x1 kernel);
//   - N > 1 (GEMM): weight rows in blocks of COL_BLOCK_SIZE, activations in blocks of
//     ROW_BLOCK_SIZE (4); a full block of 4 activations is one call per weight row with
//     nrc = 4 (the Nx1 kernel: one weight row against 4 activation rows). A short last
//     activation block (N % 4 != 0) is one nrc = 1 call per activation (bitnet.cpp's driver
//     would pass nrc = N % 4, which its dispatcher reads as weight rows; N = 1, 8, 64 never
//     get there).
// Threads: the weight rows are split into `threads` contiguous ranges of whole
// COL_BLOCK_SIZE blocks (as equal as the blocks allow), one per OpenMP thread; with
// threads == 1 no parallel region is entered.
//
// The kernel returns, per (activation n, weight row r), sum_j code[r][j] * act[n][j] with
// code = value + 1 in {0, 1, 2}; bitnet.cpp subtracts the activation sum afterwards. This
// harness returns the kernel's raw sums as float32 (exact below 2^24), out[n * rows + r].

#include <stddef.h>
#include <stdint.h>
#include <omp.h>

#include "gemm-config.h"  // from the bitnet.cpp checkout: ACT_PARALLEL, block sizes

extern "C" void ggml_vec_dot_i2_i8_s(int n, float *s, size_t bs, const void *vx, size_t bx,
                                     const void *vy, size_t by, int nrc);

#ifndef ACT_PARALLEL
#error "this harness drives the ACT_PARALLEL kernels (bitnet.cpp's default gemm-config.h)"
#endif

static const int kQK = 128;  // QK_I2_S on x86: values per 32-byte group

static void run_rows(const uint8_t *w, const int8_t *act, int rows, int k, int n, float *out,
                     int r0, int r1) {
    const size_t wrow = (size_t)k / 4;  // packed bytes per weight row
    if (n == 1) {
        for (int r = r0; r < r1; r++) {
            ggml_vec_dot_i2_i8_s(k, out + r, 1, w + r * wrow, k, act, 0, 1);
        }
        return;
    }
    for (int c0 = r0; c0 < r1; c0 += COL_BLOCK_SIZE) {
        const int c1 = c0 + COL_BLOCK_SIZE < r1 ? c0 + COL_BLOCK_SIZE : r1;
        for (int a0 = 0; a0 < n; a0 += ROW_BLOCK_SIZE) {
            const int na = a0 + ROW_BLOCK_SIZE <= n ? ROW_BLOCK_SIZE : n - a0;
            for (int r = c0; r < c1; r++) {
                if (na == PARALLEL_SIZE) {
                    ggml_vec_dot_i2_i8_s(k, out + (size_t)a0 * rows + r, rows, w + r * wrow, k,
                                         act + (size_t)a0 * k, k, na);
                } else {
                    for (int a = a0; a < a0 + na; a++) {
                        ggml_vec_dot_i2_i8_s(k, out + (size_t)a * rows + r, 1, w + r * wrow, k,
                                             act + (size_t)a * k, 0, 1);
                    }
                }
            }
        }
    }
}

extern "C" {

// The block sizes this build was compiled with, for the bench's notes.
int peer_config(int *row_block, int *col_block, int *parallel_size) {
    *row_block = ROW_BLOCK_SIZE;
    *col_block = COL_BLOCK_SIZE;
    *parallel_size = PARALLEL_SIZE;
    return kQK;
}

// out[n * rows + r] = sum_j code(w[r][j]) * act[n][j] (the kernel's raw sums, codes 0/1/2).
// w: rows * k / 4 bytes, bitnet.cpp's I2_S rows back to back (TernaryTensor.to_bitnet_cpp_bytes
// without its 32-byte tail); act: n * k int8, row-major. Returns 0, or -1 for bad arguments
// (k not a multiple of 128, sizes below 1).
int peer_gemm_i2_i8(const uint8_t *w, const int8_t *act, int rows, int k, int n, int threads,
                    float *out) {
    if (rows < 1 || k < kQK || k % kQK != 0 || n < 1 || threads < 1) return -1;
    const int nblocks = (rows + COL_BLOCK_SIZE - 1) / COL_BLOCK_SIZE;
    if (threads > nblocks) threads = nblocks;
    if (threads == 1) {
        run_rows(w, act, rows, k, n, out, 0, rows);
        return 0;
    }
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int b0 = (int)((long long)nblocks * t / nt), b1 = (int)((long long)nblocks * (t + 1) / nt);
        const int r0 = b0 * COL_BLOCK_SIZE, r1 = b1 * COL_BLOCK_SIZE < rows ? b1 * COL_BLOCK_SIZE : rows;
        if (r0 < r1) run_rows(w, act, rows, k, n, out, r0, r1);
    }
    return 0;
}

}  // extern "C"
