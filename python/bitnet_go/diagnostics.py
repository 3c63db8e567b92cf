"""What ran and how fast the machine is: the facts benchmarks and bug reports need.

Nothing here is needed to use bitnet_go; these functions report on it. They
go through one export of the Go library, ``bng_diagnostics`` (a JSON request
naming an entry, a JSON result), so that measurement code stays out of the
production C ABI. :func:`request` is that call, raw; the others are typed
forms of its entries.

Errors are those of every bitnet_go call: ``ValueError`` for a bad argument
(an unknown entry included), ``RuntimeError`` for a CUDA failure or a
library without ``bng_diagnostics``.

Example:
    >>> import numpy as np, bitnet_go
    >>> from bitnet_go import diagnostics
    >>> "peak" in diagnostics.entries()
    True
    >>> w = bitnet_go.quantize_conv_weight(np.ones((4, 3, 1, 1), np.float32))
    >>> out, info = diagnostics.conv2d_with_info(np.ones((1, 3, 5, 5), np.float32), w)
    >>> info.algorithm
    'gemm1x1'
"""

from __future__ import annotations

import ctypes
import json
from typing import TypedDict, cast

from ._conv import conv2d_with_info
from ._core import lib, ops
from ._core.arrays import check_int, fits_int64
from ._core.devices import DeviceArray, framework_of, touch_driver
from ._core.ops import ConvInfo
from ._core.types import Method
from ._ternary import TernaryTensor

__all__ = [
    "ConvInfo",
    "CudaPlan",
    "PeakRates",
    "conv2d_with_info",
    "cuda_plan",
    "cuda_time_conv2d",
    "cuda_time_copy",
    "cuda_time_quantize",
    "entries",
    "peak_rates",
    "request",
]

lib.declare(
    {
        # request (UTF-8 JSON), request_len, buf, bufcap
        "bng_diagnostics": (lib.I32, [lib.STR, lib.I64, lib.STR, lib.I64], True),
    }
)

_BUFCAP = 1 << 16


class PeakRates(TypedDict):
    """One core's peak rates (:func:`peak_rates`)."""

    f32: float
    """G float32 operations a second (a multiply-add counts 2); 0 with the generic kernels."""
    i8: float
    """G int8 operations a second; 0 with the generic kernels."""
    f32_mix: str
    """The float32 instructions timed."""
    i8_mix: str
    """The int8 instructions timed."""
    family: str
    """The kernel family in use."""


class CudaPlan(TypedDict):
    """How the GPU quantizes ``n`` values in blocks (:func:`cuda_plan`)."""

    passes: int
    """Reads of the input: 1, or 2 when a block does not fit one tile (one scale per tensor, large blocks)."""
    tile: int
    blocks: int
    workspace: int
    """Bytes of device workspace."""


def request(name: str, **args: object) -> object:
    """Call diagnostics entry ``name`` with JSON arguments ``args``; returns its JSON result, decoded.

    Example:
        >>> from bitnet_go import diagnostics
        >>> diagnostics.request("list") == diagnostics.entries()
        True
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    req = json.dumps({"name": name, **args}).encode()
    buf = ctypes.create_string_buffer(_BUFCAP)
    lib.call("bng_diagnostics", req, len(req), buf, len(buf))
    return json.loads(buf.value.decode())


def entries() -> list[str]:
    """The names :func:`request` accepts, sorted.

    Example:
        >>> from bitnet_go import diagnostics
        >>> {"peak", "cuda_plan"} <= set(diagnostics.entries())
        True
    """
    return [str(v) for v in cast(list, request("list"))]


def peak_rates() -> PeakRates:
    """One core's peak rates for the instruction mix of each path's kernels.

    Measured now (about 30 ms, on the calling thread) with register-only
    loops of the family in use. The benchmark reports its rates as
    fractions of these (times the thread count).

    Example:
        >>> from bitnet_go import diagnostics
        >>> r = diagnostics.peak_rates()
        >>> r["i8"] >= 0 and r["f32"] >= 0
        True
    """
    return cast(PeakRates, request("peak"))


def cuda_plan(n: int, block_size: int | None = None) -> CudaPlan:
    """How ``n`` values in blocks of ``block_size`` (None: one scale) are quantized on the GPU (needs no GPU).

    Example:
        >>> from bitnet_go import diagnostics
        >>> diagnostics.cuda_plan(1 << 20, 128)["passes"], diagnostics.cuda_plan(1 << 20)["passes"]
        (1, 2)
    """
    n_ = check_int(n, "n")
    b = check_int(block_size, "block_size", or_none=True) if block_size is not None else 0
    for name, v in (("n", n_), ("block_size", b)):
        if not fits_int64(v):  # the value itself is Go's to check
            raise ValueError(f"{name} must fit in int64, got {v}")
    return cast(CudaPlan, request("cuda_plan", n=n_, block_size=b))


def cuda_time_quantize(
    x: DeviceArray,
    *,
    block_size: int | None = None,
    method: Method = "absmean",
    repeat: int = 10,
    warmup: bool = True,
) -> float:
    """Mean GPU milliseconds of one I2_S quantization of the GPU array ``x``, kernels alone.

    ``x`` is a float32 C-contiguous torch CUDA tensor or CuPy array; its
    outputs and workspace are allocated by its framework on its device, and
    ``repeat`` quantizations (no finite check) run back to back on the
    framework's current stream between two CUDA events. ``warmup`` first
    runs one untimed (module load, allocator).

    Example:
        >>> from bitnet_go import diagnostics
        >>> diagnostics.cuda_time_quantize([1.0, 2.0])
        Traceback (most recent call last):
        TypeError: expected a torch tensor or CuPy array, got list
    """
    fw = framework_of(x)
    n = fw.numel(x)
    plen, nb, ws = ops.packed_len("i2_s", n, 1), ops.num_blocks(n, block_size), ops.cuda_workspace_size(n, block_size)
    packed, scales, work = fw.empty(plen, "uint8"), fw.empty(nb, "float32"), fw.empty(ws, "uint8")
    touch_driver()
    args = dict(
        dev=fw.index, x=fw.ptr(x), n=n, block_size=block_size or 0, method=ops.METHOD_CODES[method],
        packed=fw.ptr(packed), packed_len=plen, scales=fw.ptr(scales), n_scales=nb,
        work=fw.ptr(work), work_len=ws, stream=fw.stream(),
    )  # fmt: skip
    if warmup:
        request("cuda_time_quantize", **args, repeat=1)
    res = cast(dict, request("cuda_time_quantize", **args, repeat=repeat))
    return float(res["ms"])


def cuda_time_copy(dst: DeviceArray, src: DeviceArray, *, repeat: int = 10, warmup: bool = True) -> float:
    """Mean GPU milliseconds of one device-to-device copy of ``src`` into ``dst`` (``cuMemcpyDtoDAsync``).

    Both are GPU arrays of one framework on one device, ``dst`` at least as
    large; the copies run on the framework's current stream between two CUDA
    events. A bandwidth ceiling for the kernels.

    Example:
        >>> from bitnet_go import diagnostics
        >>> diagnostics.cuda_time_copy([1.0], [1.0])
        Traceback (most recent call last):
        TypeError: expected a torch tensor or CuPy array, got list
    """
    fw = framework_of(src)
    if fw.nbytes(dst) < fw.nbytes(src):
        raise ValueError(f"dst ({fw.nbytes(dst)} bytes) is smaller than src ({fw.nbytes(src)} bytes)")
    touch_driver()
    args = dict(dev=fw.index, dst=fw.ptr(dst), src=fw.ptr(src), nbytes=fw.nbytes(src), stream=fw.stream())
    if warmup:
        request("cuda_time_copy", **args, repeat=1)
    res = cast(dict, request("cuda_time_copy", **args, repeat=repeat))
    return float(res["ms"])


def cuda_time_conv2d(
    x: DeviceArray,
    weight: TernaryTensor,
    bias: object = None,
    *,
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] | str = 0,
    dilation: int | tuple[int, int] = 1,
    groups: int = 1,
    act_bits: int | None = 8,
    repeat: int = 10,
    warmup: bool = True,
) -> float:
    """Mean GPU milliseconds of one ``conv2d_quantized(x, weight, ...)`` on a GPU, kernels alone.

    ``x`` is a 4-D GPU array (N, C, H, W), ``weight`` an I2_S tensor (a host
    one is moved to ``x``'s GPU once, as ``conv2d_quantized`` does); the
    output and workspace are allocated by ``x``'s framework, and ``repeat``
    convolutions (no finite check) run back to back on its current stream
    between two CUDA events. ``warmup`` first runs one untimed.

    Example:
        >>> import numpy as np, bitnet_go
        >>> from bitnet_go import diagnostics
        >>> w = bitnet_go.quantize_conv_weight(np.ones((2, 1, 3, 3), np.float32))
        >>> diagnostics.cuda_time_conv2d(np.ones((1, 1, 4, 4), np.float32), w)
        Traceback (most recent call last):
        TypeError: expected a torch tensor or CuPy array, got ndarray
    """
    from . import _gpu
    from ._conv import _padding, _pair, _weight_on

    fw = framework_of(x)
    wt = _weight_on(weight, x)
    sh, sw = _pair(stride, "stride", 1)
    dh, dw = _pair(dilation, "dilation", 1)
    pads = _padding(padding, wt.shape[2:], (sh, sw), (dh, dw))  # type: ignore[arg-type]
    k = _gpu.conv_call(x, wt.shape, bias, (sh, sw), pads, (dh, dw))
    pw = framework_of(wt.packed)
    args = dict(
        dev=fw.index, stream=fw.stream(), x=fw.ptr(k.x), w=pw.ptr(wt.packed), scales=pw.ptr(wt.scales),
        bias=0 if k.bias is None else fw.ptr(k.bias), out=fw.ptr(k.out), work=fw.ptr(k.work),
        w_bytes=pw.nbytes(wt.packed), n_scales=pw.numel(wt.scales), block_size=wt.block_size or 0,
        work_len=fw.numel(k.work), act_bits=act_bits or 0, x_shape=list(k.x_shape), w_shape=list(wt.shape),
        stride=[sh, sw], padding=list(pads), dilation=[dh, dw], groups=groups,
    )  # fmt: skip
    touch_driver()
    if warmup:
        request("cuda_time_conv2d", **args, repeat=1)
    res = cast(dict, request("cuda_time_conv2d", **args, repeat=repeat))
    return float(res["ms"])
