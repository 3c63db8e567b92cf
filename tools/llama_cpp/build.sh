#!/usr/bin/env bash
# Builds llama_harness (tools/llama_cpp/harness.cpp) against a llama.cpp source tree, CPU only,
# out of tree: only libggml, libllama and the harness are compiled; nothing of llama.cpp is
# copied into this repository. The harness loads a GGUF, evaluates tokens and prints logits as
# JSON; tests_py/test_convert_llama_cpp.py runs it when LLAMA_CPP_HARNESS points at it.
#
#   tools/llama_cpp/build.sh LLAMA_SRC [OUT_DIR]
#
# LLAMA_SRC: a checkout of https://github.com/ggml-org/llama.cpp (TQ1_0/TQ2_0, arch "bitnet"), or
# bitnet.cpp's fork (I2_S) where microsoft/BitNet keeps it: BITNET/3rdparty/llama.cpp of a BitNet
# checkout with its submodule (its ggml compiles BITNET/src/ggml-bitnet-*.cpp and includes
# BITNET/include/bitnet-lut-kernels.h, which BitNet's setup_env.py generates; for an I2_S-only
# build any preset_kernels/<model>/bitnet-lut-kernels-tl2.h copied there does). OUT_DIR: default
# build/llama_cpp (use another, e.g. build/bitnet_llama_cpp, for the fork). CC/CXX, JOBS (default
# nproc) and CMAKE_ARGS are taken from the environment.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/include/llama.h" || ! -f "$1/CMakeLists.txt" ]]; then
    echo "usage: $0 LLAMA_SRC [OUT_DIR]   (LLAMA_SRC: a llama.cpp checkout with include/llama.h)" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
VAR=LLAMA_CPP_HARNESS
if grep -q GGML_TYPE_I2_S "$SRC/ggml/include/ggml.h" 2>/dev/null; then
    VAR=BITNET_CPP_HARNESS
    if [[ ! -f "$SRC/../../include/bitnet-lut-kernels.h" ]]; then
        echo "$SRC is bitnet.cpp's fork: it needs $SRC/../../include/bitnet-lut-kernels.h (BitNet's setup_env.py" \
             "writes it; or copy BitNet's preset_kernels/<model>/bitnet-lut-kernels-tl2.h there)" >&2
        exit 2
    fi
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${2:-$HERE/../../build/llama_cpp}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
JOBS=${JOBS:-$(nproc)}
read -r -a EXTRA <<< "${CMAKE_ARGS:-}"

set -x
cmake -S "$HERE" -B "$OUT/cmake" -DCMAKE_BUILD_TYPE=Release -DLLAMA_SRC="$SRC" \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
    "${EXTRA[@]}"
cmake --build "$OUT/cmake" --target llama_harness -j "$JOBS"
set +x
cp "$OUT/cmake/llama_harness" "$OUT/llama_harness"
COMMIT=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || cat "$SRC/COMMIT" 2>/dev/null || echo unknown)
echo "$COMMIT" > "$OUT/llama_cpp_commit.txt"
echo "built $OUT/llama_harness (llama.cpp $COMMIT)"
echo "run: $VAR=$OUT/llama_harness python -m pytest tests_py/test_convert_llama_cpp.py"
