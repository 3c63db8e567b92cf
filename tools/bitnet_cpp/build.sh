#!/usr/bin/env bash
# Builds libbitnet_cpp_peer.so: bitnet.cpp's I2_S kernel (src/ggml-bitnet-mad.cpp of a
# microsoft/BitNet checkout, compiled where it lies: nothing of it is copied into this
# repository) plus our harness peer.cpp, for `python -m bitnet_go bench linear --bitnet-cpp`.
#
#   tools/bitnet_cpp/build.sh BITNET_SRC [OUT_DIR]
#
# BITNET_SRC: a checkout of https://github.com/microsoft/BitNet (its src/ and include/ are
# read; the llama.cpp submodule is not needed). OUT_DIR: default build/bitnet_cpp.
# CXX (default g++) and CXXFLAGS (default -O3 -march=native) are taken from the environment.
#
# ggml-bitnet-mad.cpp includes llama.cpp's ggml headers but uses only GGML_TYPE_I2_S and
# ggml_row_size from them (in quantize_i2_s, which the bench does not call): the build
# writes small stand-ins of our own for those headers into OUT_DIR/shim.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/src/ggml-bitnet-mad.cpp" || ! -f "$1/include/gemm-config.h" ]]; then
    echo "usage: $0 BITNET_SRC [OUT_DIR]   (BITNET_SRC: a microsoft/BitNet checkout with src/ggml-bitnet-mad.cpp)" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${2:-$HERE/../../build/bitnet_cpp}
mkdir -p "$OUT/shim"
OUT=$(cd "$OUT" && pwd)
CXX=${CXX:-g++}
read -r -a FLAGS <<< "${CXXFLAGS:--O3 -march=native}"

# Stand-ins for the ggml headers ggml-bitnet-mad.cpp includes (only what it uses).
cat > "$OUT/shim/ggml-bitnet.h" <<'H'
#pragma once
#include <stddef.h>
#include <stdint.h>
enum ggml_type { GGML_TYPE_I2_S = 36 };
// bitnet.cpp's I2_S type traits: one byte per value in ggml's row-size arithmetic.
static inline size_t ggml_row_size(enum ggml_type, int64_t ne) { return (size_t)ne; }
H
cat > "$OUT/shim/ggml-quants.h" <<'H'
#pragma once
#include <stddef.h>
#include <stdint.h>
extern "C" {
size_t quantize_i2_s(const float *src, void *dst, int64_t nrow, int64_t n_per_row, const float *quant_weights);
void ggml_vec_dot_i2_i8_s(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by, int nrc);
}
H
: > "$OUT/shim/ggml-cpu-impl.h"

set -x
"$CXX" "${FLAGS[@]}" -std=c++17 -fPIC -shared -fopenmp -w \
    -I"$OUT/shim" -I"$SRC/include" \
    "$SRC/src/ggml-bitnet-mad.cpp" "$HERE/peer.cpp" \
    -o "$OUT/libbitnet_cpp_peer.so"
set +x
# A COMMIT file names the commit of a copied source tree (which may lie inside another git work tree).
COMMIT=$(cat "$SRC/COMMIT" 2>/dev/null || git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
echo "$COMMIT" > "$OUT/bitnet_commit.txt"
echo "built $OUT/libbitnet_cpp_peer.so (microsoft/BitNet $COMMIT, $CXX ${FLAGS[*]})"
echo "run: BITNET_CPP_PEER=$OUT/libbitnet_cpp_peer.so python -m bitnet_go bench linear"
