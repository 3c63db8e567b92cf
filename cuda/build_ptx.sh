#!/usr/bin/env bash
# Regenerates cuda/i2s.ptx from cuda/i2s.cu and the conv.cu it includes (run by `make ptx`).
#
# The PTX is checked in and embedded in the Go library with go:embed, so
# ordinary builds need no CUDA toolkit. The compiler is NVRTC from PyPI
# (nvidia-cuda-nvrtc-cu12, installed once into ~/.cache/bitnet_go), pinned to
# 12.4: its PTX (ISA 8.4) loads on every driver from R550 on, including the
# R580 / CUDA 13.0 drivers of the GPU machines (a newer toolkit's PTX fails on
# older drivers with CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Target compute_75
# (Turing and newer; JIT-compiled by the driver for the GPU at hand).
#
# usage: bash cuda/build_ptx.sh [--check]
#   --check  regenerate into a temporary file and fail if it differs from
#            the checked-in cuda/i2s.ptx (exit 3 when NVRTC is not installed
#            and BITNET_GO_NO_DOWNLOAD=1 forbids installing it)
set -euo pipefail

NVRTC_VERSION=12.4.127
PTXAS_VERSION=12.4.131 # nvidia-cuda-nvcc-cu12: ships ptxas (but no nvcc driver)
ARCH=compute_75
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${BITNET_GO_CACHE:-$HOME/.cache/bitnet_go}/nvrtc-$NVRTC_VERSION
lib=$cache/nvidia/cuda_nvrtc/lib/libnvrtc.so.12
ptxas_dir=${BITNET_GO_CACHE:-$HOME/.cache/bitnet_go}/nvcc-$PTXAS_VERSION
ptxas=$ptxas_dir/nvidia/cuda_nvcc/bin/ptxas
python=${PYTHON:-python3}

if [ ! -e "$lib" ]; then
    if [ "${BITNET_GO_NO_DOWNLOAD:-}" = 1 ]; then
        echo "build_ptx: NVRTC $NVRTC_VERSION is not installed in $cache" >&2
        exit 3
    fi
    echo "build_ptx: installing nvidia-cuda-nvrtc-cu12==$NVRTC_VERSION into $cache" >&2
    "$python" -m pip install --quiet --no-deps --target "$cache" "nvidia-cuda-nvrtc-cu12==$NVRTC_VERSION"
fi

if [ ! -e "$ptxas" ] && [ "${BITNET_GO_NO_DOWNLOAD:-}" != 1 ]; then
    echo "build_ptx: installing nvidia-cuda-nvcc-cu12==$PTXAS_VERSION (ptxas) into $ptxas_dir" >&2
    "$python" -m pip install --quiet --no-deps --target "$ptxas_dir" "nvidia-cuda-nvcc-cu12==$PTXAS_VERSION"
fi

out=$here/i2s.ptx
if [ "${1:-}" = "--check" ]; then
    out=$(mktemp)
    trap 'rm -f "$out"' EXIT
fi
"$python" "$here/nvrtc_ptx.py" --lib "$lib" --arch "$ARCH" \
    --tool "nvidia-cuda-nvrtc-cu12==$NVRTC_VERSION" --header "$here/conv.cu" "$here/i2s.cu" -o "$out"
# Assemble for the main architectures: PTX that ptxas rejects would only
# fail at run time, in the driver's JIT.
if [ -e "$ptxas" ]; then
    for sm in sm_75 sm_80 sm_90; do
        "$ptxas" -arch=$sm "$out" -o /dev/null
    done
    echo "build_ptx: ptxas $PTXAS_VERSION accepts the PTX for sm_75, sm_80, sm_90" >&2
fi
if [ "${1:-}" = "--check" ]; then
    if ! cmp -s "$out" "$here/i2s.ptx"; then
        echo "build_ptx: cuda/i2s.ptx is stale: run 'make ptx' (bash cuda/build_ptx.sh)" >&2
        diff "$here/i2s.ptx" "$out" | head -20 >&2 || true
        exit 1
    fi
    echo "build_ptx: cuda/i2s.ptx is up to date"
else
    echo "build_ptx: wrote $out"
fi
