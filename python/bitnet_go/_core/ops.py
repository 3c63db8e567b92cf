"""The one seam between Python and the Go op exports: every call of one is here.

Each function takes numpy arrays (host) or device addresses (CUDA) and plain
Python values, allocates nothing, and raises what the Go side reports
(status 1 ``ValueError`` with Go's message, 2 ``TypeError``, 3
``MemoryError``, 4 ``RuntimeError``). Callers check only what they need to
build the call (types, ranks to read a shape, output sizes to allocate);
Go validates every value, length and shape again with the messages users
see. Outputs are the caller's, written in place; host arrays must be
C-contiguous and of the dtype named (asserted by :func:`bitnet_go._core.lib.ptr`).

Names: qtypes ``"i2_s"``, ``"tl1"``, ``"tl2"``; methods ``"absmean"``,
``"absmax"``; a ``block_size`` of None is one scale for the whole tensor.

Example:
    >>> import numpy as np
    >>> x = np.array([0.9, -0.1, -2.0, 1.2], np.float32)
    >>> packed, scales = np.empty(packed_len("i2_s", 4, 1), np.uint8), np.empty(num_blocks(4, None), np.float32)
    >>> quantize(x, "i2_s", None, "absmean", True, packed, scales)
    >>> out = np.empty(4, np.int8); unpack("i2_s", packed, 1, out); out
    array([ 1,  0, -1,  1], dtype=int8)
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import numpy as np

from . import lib
from .types import Kernel, Method, QType

QTYPE_CODES: dict[str, int] = {"i2_s": 0, "tl1": 1, "tl2": 2}
"""Packed formats and their C ABI numbers."""

METHOD_CODES: dict[str, int] = {"absmean": 0, "absmax": 1}
"""Scale methods and their C ABI numbers."""

ALGORITHM_CODES: dict[str, int] = {
    "auto": 0,
    "naive": 1,
    "im2col": 2,
    "direct": 3,
    "depthwise": 4,
    "gemm1x1": 5,
    "lut": 6,
}
"""conv2d algorithms and their C ABI numbers."""

KERNEL_NAMES: dict[int, Kernel] = {1: "naive", 2: "im2col", 3: "direct", 4: "depthwise", 5: "gemm1x1", 6: "lut"}
"""The algorithm numbers ``bng_conv2d`` reports having run."""

_I32, _I64, _P, _U64 = lib.I32, lib.I64, lib.PTR, ctypes.c_uint64
_PI64 = ctypes.POINTER(ctypes.c_int64)

lib.declare(
    {
        # x, n, block_size, method, check_finite, packed, packed_len, scales, n_scales
        "bng_quantize_i2s": (_I32, [_P, _I64, _I64, _I32, _I32, _P, _I64, _P, _I64], True),
        # qtype, n, rows, out(int64*)
        "bng_packed_len": (_I32, [_I32, _I64, _I64, _P], True),
        # qtype, packed, packed_len, rows, out(int8), n
        "bng_unpack": (_I32, [_I32, _P, _I64, _I64, _P, _I64], True),
        # qtype, values(int8), n, rows, packed, packed_len
        "bng_pack": (_I32, [_I32, _P, _I64, _I64, _P, _I64], True),
        # qtype, packed, packed_len, rows, block_size, scales, n_scales, out(float32), n
        "bng_dequantize": (_I32, [_I32, _P, _I64, _I64, _I64, _P, _I64, _P, _I64], True),
        # x, n, c, h, w,
        # packed, packed_len, scales, n_scales, block_size, qtype,
        # o, wc, kh, kw, bias, n_bias,
        # stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dil_h, dil_w, groups,
        # act_bits, algorithm, check_finite, out, out_h, out_w, out_len, algo_used
        "bng_conv2d": (
            _I32,
            [_P, _I64, _I64, _I64, _I64]
            + [_P, _I64, _P, _I64, _I64, _I32]
            + [_I64, _I64, _I64, _I64, _P, _I64]
            + [_I64] * 9
            + [_I32, _I32, _I32, _P, _I64, _I64, _I64, _P],
            True,
        ),
        # n, block_size, out
        "bng_cuda_workspace_size": (_I32, [_I64, _I64, _PI64], True),
        # dev, x, n, block_size, method, check_finite, packed, packed_len, scales, n_scales, work, work_len, stream
        "bng_cuda_quantize_i2s": (
            _I32,
            [_I32, _U64, _I64, _I64, _I32, _I32, _U64, _I64, _U64, _I64, _U64, _I64, _U64],
            True,
        ),
        # dev, x (host), n, block_size, method, check_finite, packed (host), packed_len, scales (host), n_scales
        "bng_cuda_quantize_i2s_host": (_I32, [_I32, _P, _I64, _I64, _I32, _I32, _P, _I64, _P, _I64], True),
        # dev, packed, packed_len, out (int8), n, stream
        "bng_cuda_unpack_i2s": (_I32, [_I32, _U64, _I64, _U64, _I64, _U64], True),
        # dev, packed, packed_len, block_size, scales, n_scales, out (float32), n, stream
        "bng_cuda_dequantize_i2s": (_I32, [_I32, _U64, _I64, _I64, _U64, _I64, _U64, _I64, _U64], True),
    }
)

_ptr = lib.ptr


# ---------------------------------------------------------------- sizes


@functools.lru_cache(maxsize=1024)
def packed_len(qtype: QType, n: int, rows: int) -> int:
    """Bytes of packed data for ``n`` values in ``rows`` rows of format ``qtype`` (``bng_packed_len``).

    Go is the one source of the formats' sizes. ``n`` in [1, 2**60], ``rows``
    in [1, n] dividing ``n`` (``ValueError`` otherwise). Cached: tensors
    check their packed length at every construction, and a foreign call
    costs microseconds (errors are raised, so never cached).

    Example:
        >>> packed_len("i2_s", 129, 1), packed_len("tl1", 10, 2)
        (64, 4)
    """
    out = ctypes.c_int64(0)
    lib.call("bng_packed_len", QTYPE_CODES[qtype], n, rows, ctypes.addressof(out))
    return out.value


def num_blocks(n: int, block_size: int | None) -> int:
    """Number of scales for ``n`` values in blocks of ``block_size`` (None: one).

    The same rule as gokern/ternary.NumBlocks (a ``block_size`` of at least
    ``n`` is one block); callers need it to allocate ``scales``.

    Example:
        >>> num_blocks(100, 32), num_blocks(100, None), num_blocks(100, 500)
        (4, 1, 1)
    """
    if block_size is None or block_size >= n:
        return 1
    return -(-n // block_size)


# ---------------------------------------------------------------- host ops


def quantize(
    x: np.ndarray,
    qtype: QType,
    block_size: int | None,
    method: Method,
    check_finite: bool,
    packed: np.ndarray,
    scales: np.ndarray,
) -> None:
    """Quantize float32 ``x`` (any shape, read flat) into ``packed`` (uint8) and ``scales`` (float32).

    ``packed`` must hold ``packed_len(qtype, x.size, 1)`` bytes and
    ``scales`` ``num_blocks(x.size, block_size)`` entries. Only ``"i2_s"``
    is quantized directly today (``ValueError`` for the others: pack the
    values with :func:`pack`).

    Example:
        >>> x, p, s = np.ones(3, np.float32), np.empty(32, np.uint8), np.empty(1, np.float32)
        >>> quantize(x, "i2_s", None, "absmax", True, p, s); s
        array([1.], dtype=float32)
    """
    if qtype != "i2_s":
        raise ValueError(f"quantize packs i2_s only, got qtype {qtype!r}")
    lib.call(
        "bng_quantize_i2s",
        _ptr(x),
        x.size,
        block_size or 0,
        METHOD_CODES[method],
        1 if check_finite else 0,
        _ptr(packed),
        packed.size,
        _ptr(scales),
        scales.size,
    )


def pack(qtype: QType, values: np.ndarray, rows: int, packed: np.ndarray) -> None:
    """Pack int8 ternary ``values`` (-1, 0, +1; ``rows`` rows) into ``packed`` in format ``qtype``.

    Example:
        >>> p = np.empty(1, np.uint8); pack("tl1", np.array([1, -1], np.int8), 1, p); hex(p[0])
        '0x6'
    """
    lib.call("bng_pack", QTYPE_CODES[qtype], _ptr(values), values.size, rows, _ptr(packed), packed.size)


def unpack(qtype: QType, packed: np.ndarray, rows: int, out: np.ndarray) -> None:
    """Write the ternary values held in ``packed`` (format ``qtype``, ``rows`` rows) into int8 ``out``.

    ``ValueError`` for a code the format never writes (an I2_S code 3, bad padding).

    Example:
        >>> out = np.empty(2, np.int8); unpack("tl1", np.array([6], np.uint8), 1, out); out
        array([ 1, -1], dtype=int8)
    """
    lib.call("bng_unpack", QTYPE_CODES[qtype], _ptr(packed), packed.size, rows, _ptr(out), out.size)


def dequantize(
    qtype: QType,
    packed: np.ndarray,
    rows: int,
    block_size: int | None,
    scales: np.ndarray,
    out: np.ndarray,
) -> None:
    """Write ``value * scale`` of each value held in ``packed`` into float32 ``out``.

    Example:
        >>> out = np.empty(2, np.float32)
        >>> dequantize("tl1", np.array([6], np.uint8), 1, None, np.array([0.5], np.float32), out); out
        array([ 0.5, -0.5], dtype=float32)
    """
    lib.call(
        "bng_dequantize",
        QTYPE_CODES[qtype],
        _ptr(packed),
        packed.size,
        rows,
        block_size or 0,
        _ptr(scales),
        scales.size,
        _ptr(out),
        out.size,
    )


class ConvInfo(NamedTuple):
    """What ran in a :func:`conv2d` call."""

    algorithm: Kernel
    """The algorithm the planner ran (``"direct"`` and ``"auto"`` resolved)."""
    kernel: str | None
    """The micro-kernel that ran (e.g. ``"implicit_gemm/avx2"``), None until the Go side reports it."""


_RAN = {code: ConvInfo(name, None) for code, name in KERNEL_NAMES.items()}  # one tuple per answer, made once


def conv2d(
    x: np.ndarray,
    packed: np.ndarray,
    scales: np.ndarray,
    qtype: QType,
    block_size: int | None,
    weight_shape: tuple[int, int, int, int],
    bias: np.ndarray | None,
    out: np.ndarray,
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
    act_bits: int | None,
    algorithm: str,
    check_finite: bool,
    weight_addrs: tuple[int, int] | None = None,
) -> ConvInfo:
    """2-D convolution of float32 ``x`` (N, C, H, W) with a ternary weight into float32 ``out`` (N, O, Ho, Wo).

    The weight is ``packed`` (uint8, format ``qtype``; TL rows are the O
    output channels) and ``scales`` (float32, one per ``block_size``
    elements of the flattened weight, or one) of shape ``weight_shape``
    (O, C/groups, kH, kW). ``bias`` is None or float32 (O,). ``padding`` is
    (top, left, bottom, right); ``act_bits`` None (float32 activations) or 8;
    ``algorithm`` a key of :data:`ALGORITHM_CODES`. ``weight_addrs``: the
    addresses of ``packed`` and ``scales`` if the caller keeps them (a
    tensor's arrays never move; ``ndarray.ctypes`` costs microseconds a call).
    Go checks every shape, size and value; the output size must be the one
    the geometry implies.

    Example:
        >>> x, out = np.ones((1, 1, 3, 3), np.float32), np.empty((1, 1, 1, 1), np.float32)
        >>> p, s = np.empty(32, np.uint8), np.empty(1, np.float32)
        >>> quantize(np.ones(9, np.float32), "i2_s", None, "absmean", True, p, s)
        >>> conv2d(x, p, s, "i2_s", None, (1, 1, 3, 3), None, out, stride=(1, 1), padding=(0, 0, 0, 0),
        ...        dilation=(1, 1), groups=1, act_bits=None, algorithm="naive", check_finite=True)
        ConvInfo(algorithm='naive', kernel=None)
        >>> out
        array([[[[9.]]]], dtype=float32)
    """
    n, c, h, w = x.shape
    o, wc, kh, kw = weight_shape
    pa, sa = weight_addrs if weight_addrs is not None else (_ptr(packed), _ptr(scales))
    used = ctypes.c_int32(0)
    lib.call(
        "bng_conv2d",
        _ptr(x), n, c, h, w,
        pa, packed.size, sa, scales.size, block_size or 0, QTYPE_CODES[qtype],
        o, wc, kh, kw,
        None if bias is None else _ptr(bias), 0 if bias is None else bias.size,
        stride[0], stride[1], padding[0], padding[1], padding[2], padding[3], dilation[0], dilation[1], groups,
        0 if act_bits is None else act_bits, ALGORITHM_CODES[algorithm], 1 if check_finite else 0,
        _ptr(out), out.shape[2], out.shape[3], out.size, ctypes.addressof(used),
    )  # fmt: skip
    return _RAN[used.value]


# ---------------------------------------------------------------- CUDA ops (I2_S)


def cuda_workspace_size(n: int, block_size: int | None) -> int:
    """Bytes of device workspace :func:`cuda_quantize` needs for ``n`` values (needs no GPU).

    Example:
        >>> cuda_workspace_size(1 << 20, 128) >= 0
        True
    """
    out = ctypes.c_int64()
    lib.call("bng_cuda_workspace_size", n, block_size or 0, ctypes.byref(out))
    return int(out.value)


def cuda_quantize(
    dev: int,
    x: int,
    n: int,
    block_size: int | None,
    method: Method,
    check_finite: bool,
    packed: int,
    packed_len: int,
    scales: int,
    n_scales: int,
    work: int,
    work_len: int,
    stream: int,
) -> None:
    """Quantize ``n`` float32 values at device address ``x`` to I2_S, on ``stream`` of device ``dev``.

    Every pointer is a device address: ``packed`` (``packed_len`` bytes),
    ``scales`` (``n_scales`` float32), ``work`` (``work_len`` >=
    :func:`cuda_workspace_size` bytes). Returns once the kernels are
    enqueued, except with ``check_finite`` (waits to read the first NaN/Inf
    index back).
    """
    lib.call(
        "bng_cuda_quantize_i2s",
        dev, x, n, block_size or 0, METHOD_CODES[method], 1 if check_finite else 0,
        packed, packed_len, scales, n_scales, work, work_len, stream,
    )  # fmt: skip


def cuda_quantize_host(
    dev: int,
    x: np.ndarray,
    block_size: int | None,
    method: Method,
    check_finite: bool,
    packed: np.ndarray,
    scales: np.ndarray,
) -> None:
    """:func:`quantize` to I2_S of host arrays, computed on GPU ``dev`` (copies through pooled device buffers)."""
    lib.call(
        "bng_cuda_quantize_i2s_host",
        dev, _ptr(x), x.size, block_size or 0, METHOD_CODES[method], 1 if check_finite else 0,
        _ptr(packed), packed.size, _ptr(scales), scales.size,
    )  # fmt: skip


def cuda_unpack(dev: int, packed: int, packed_len: int, out: int, n: int, stream: int) -> None:
    """Write the ``n`` I2_S values at device address ``packed`` as int8 to device address ``out``, on ``stream``."""
    lib.call("bng_cuda_unpack_i2s", dev, packed, packed_len, out, n, stream)


def cuda_dequantize(
    dev: int,
    packed: int,
    packed_len: int,
    block_size: int | None,
    scales: int,
    n_scales: int,
    out: int,
    n: int,
    stream: int,
) -> None:
    """Write ``value * scale`` of the ``n`` I2_S values at ``packed`` as float32 to ``out`` (device addresses)."""
    lib.call("bng_cuda_dequantize_i2s", dev, packed, packed_len, block_size or 0, scales, n_scales, out, n, stream)
