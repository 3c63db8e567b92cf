#!/usr/bin/env bash
# Builds llama_harness (tools/llama_cpp/harness.cpp) against a llama.cpp source tree, CPU only,
# out of tree: only libggml, libllama and the harness are compiled; nothing of llama.cpp is
# copied into this repository. The harness loads a GGUF, evaluates tokens and prints logits as
# JSON; tests_py/test_convert_llama_cpp.py runs it when LLAMA_CPP_HARNESS points at it.
#
#   tools/llama_cpp/build.sh LLAMA_SRC [OUT_DIR]
#
# LLAMA_SRC: a checkout of https://github.com/ggml-org/llama.cpp (TQ1_0/TQ2_0, arch "bitnet"),
# or of bitnet.cpp's fork (https://github.com/Eddie-Wang1120/llama.cpp, branch merge-dev; I2_S,
# arch "bitnet-b1.58") placed where microsoft/BitNet keeps it (3rdparty/llama.cpp of a BitNet
# checkout: its ggml reads ../../../../include and ../../../../src). OUT_DIR: default
# build/llama_cpp. CC/CXX, JOBS (default nproc) and CMAKE_ARGS are taken from the environment.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/include/llama.h" || ! -f "$1/CMakeLists.txt" ]]; then
    echo "usage: $0 LLAMA_SRC [OUT_DIR]   (LLAMA_SRC: a llama.cpp checkout with include/llama.h)" >&2
    exit 2
fi
SRC=$(cd "$1" && pwd)
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
echo "run: LLAMA_CPP_HARNESS=$OUT/llama_harness python -m pytest tests_py/test_convert_llama_cpp.py"
