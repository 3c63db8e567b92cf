"""The one seam between Python and the Go op exports: every call of one is here.

Each function takes numpy arrays (host) or device addresses (CUDA) and plain
Python values, allocates nothing, and raises what the Go side reports
(status 1 ``ValueError`` with Go's message, 2 ``TypeError``, 3
``MemoryError``, 4 ``RuntimeError``). Callers check only what they need to
build the call (types, ranks to read a shape, output sizes to allocate);
Go validates every value, length and shape again with the messages users
see. Outputs are the caller's, written in place; host arrays must be
C-contiguous and of the dtype named (asserted by :func:`bitnet_go._core.lib.ptr`).

Names: qtypes ``"i2_s"``, ``"tl1"``, ``"tl2"``, ``"tq2_0"``, ``"tq1_0"``; methods ``"absmean"``,
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
from typing import Any, NamedTuple

import numpy as np

from . import descriptor, lib
from .types import PLAIN_DTYPES, TERNARY_QTYPES, VALUES_PER_BYTE, Kernel, Method, QType

QTYPE_CODES: dict[str, int] = {q: descriptor.DTYPES[q] for q in TERNARY_QTYPES}
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

_I32, _I64 = lib.I32, lib.I64
_T = ctypes.POINTER(descriptor.Tensor)
_PI64 = ctypes.POINTER(ctypes.c_int64)

lib.declare(
    {
        # every op: one bng_tensor per operand (bindings/bng_abi.h), then its params
        "bng_layout": (_I32, [_T, _PI64, _PI64], True),
        "bng_quantize": (_I32, [_T, _T, ctypes.POINTER(descriptor.QuantizeParams)], True),
        "bng_unpack": (_I32, [_T, _T], True),
        "bng_pack": (_I32, [_T, _T], True),
        "bng_cast": (_I32, [_T, _T], True),
        "bng_dequantize": (_I32, [_T, _T], True),
        "bng_conv2d": (
            _I32,
            [_T, _T, _T, _T, ctypes.POINTER(descriptor.Conv2dParams), ctypes.POINTER(descriptor.OpInfo)],
            True,
        ),
        # n, block_size, out
        "bng_cuda_workspace_size": (_I32, [_I64, _I64, _PI64], True),
    }
)

_host = descriptor.host
_byref = ctypes.byref


def _values_shape(n: int, rows: int) -> tuple[int, ...]:
    """The descriptor shape of ``n`` values in ``rows`` rows (the rows x K view).

    A shape cannot say "``rows`` rows that do not divide ``n``": that one
    check is made here, with Go's message; Go checks everything else.
    """
    if rows == 1:
        return (n,)
    if n >= 1 and not (1 <= rows <= n and n % rows == 0):
        raise ValueError(f"rows must be between 1 and n = {n} and divide it, got {rows}")
    return (rows, n // rows) if n >= 1 else (n,)


# ---------------------------------------------------------------- sizes


@functools.lru_cache(maxsize=1024)
def layout(qtype: QType, n: int, rows: int, block_size: int | None) -> tuple[int, int]:
    """Bytes and scales of ``n`` values in ``rows`` rows of format ``qtype`` (``bng_layout``).

    Go is the one source of the formats' sizes and block counts. ``n`` in
    [1, 2**60], ``rows`` in [1, n] dividing ``n`` (``ValueError``
    otherwise). Cached: tensors check their lengths at every construction,
    and a foreign call costs microseconds (errors are raised, never cached).

    Example:
        >>> layout("i2_s", 129, 1, None), layout("tl1", 10, 2, 4)
        ((64, 1), (4, 3))
    """
    nbytes, nscales = ctypes.c_int64(0), ctypes.c_int64(0)
    t = descriptor.layout(qtype, _values_shape(n, rows), block_size)
    lib.call("bng_layout", _byref(t), _byref(nbytes), _byref(nscales))
    return nbytes.value, nscales.value


def packed_len(qtype: QType, n: int, rows: int) -> int:
    """Bytes of packed data for ``n`` values in ``rows`` rows of format ``qtype`` (see :func:`layout`).

    Example:
        >>> packed_len("i2_s", 129, 1), packed_len("tl1", 10, 2)
        (64, 4)
    """
    return layout(qtype, n, rows, None)[0]


def num_blocks(n: int, block_size: int | None) -> int:
    """Number of scales for ``n`` values in blocks of ``block_size`` (None: one; see :func:`layout`).

    ``n`` must be at least 1 (``ValueError`` otherwise).

    Example:
        >>> num_blocks(100, 32), num_blocks(100, None), num_blocks(100, 500)
        (4, 1, 1)
    """
    return layout("i2_s", n, 1, block_size)[1]


# ---------------------------------------------------------------- host ops


def quantize(
    x: np.ndarray,
    qtype: QType,
    block_size: int | None,
    method: Method,
    check_finite: bool,
    packed: np.ndarray,
    scales: np.ndarray,
    run_on_cuda: int | None = None,
    rows: int = 1,
    x_dtype: str = "float32",
) -> None:
    """Quantize float32 ``x`` (any shape, read flat as ``rows`` rows) into ``packed`` (uint8) and ``scales`` (float32).

    ``packed`` must hold ``packed_len(qtype, x.size, rows)`` bytes and
    ``scales`` ``num_blocks(x.size, block_size)`` entries. ``"i2_s"``,
    ``"tq2_0"`` and ``"tq1_0"`` are quantized directly (``ValueError`` for
    TL1/TL2: pack the values with :func:`pack`); the TQ formats take
    ``block_size=256`` and ``method="absmax"`` (Go checks), and their
    ``rows`` hold a multiple of 256 values each. ``run_on_cuda``: compute
    on that GPU (I2_S; the same bytes; the library copies through pooled
    device buffers). ``x_dtype="bfloat16"``: ``x`` holds bfloat16 bits (uint16), quantized to i2_s on the
    host exactly as their float32 values.

    Example:
        >>> x, p, s = np.ones(3, np.float32), np.empty(32, np.uint8), np.empty(1, np.float32)
        >>> quantize(x, "i2_s", None, "absmax", True, p, s); s
        array([1.], dtype=float32)
        >>> quantize(np.uint16([0x4000, 0]), "i2_s", None, "absmax", True, p, s, x_dtype="bfloat16"); s
        array([2.], dtype=float32)
    """
    if qtype not in ("i2_s", "tq2_0", "tq1_0"):
        raise ValueError(f"quantize packs i2_s, tq2_0 or tq1_0 only, got qtype {qtype!r}")
    p = _ternary_params(METHOD_CODES[method], 1 if check_finite else 0, run_on_cuda)
    n = x.size
    shape = _values_shape(n, rows)
    out = _host(packed, qtype, shape=shape, scales=scales, block_size=block_size)
    lib.call("bng_quantize", _byref(_host(x, x_dtype, shape=shape)), _byref(out), _byref(p))


_CAST_OUT: dict[tuple[str, str], np.dtype] = {
    ("bfloat16", "float32"): np.dtype(np.float32),
    ("bfloat16", "float16"): np.dtype(np.float16),
    ("float32", "float16"): np.dtype(np.float16),
}


def cast(x: np.ndarray, src: str, to: str) -> np.ndarray:
    """A new array of ``x`` (C-contiguous) converted from ``src`` to ``to`` in Go, on the library's threads
    (``bng_cast``): ``"bfloat16"`` (uint16 bits; numpy has no bfloat16) to ``"float32"`` (exact) or
    ``"float16"``, ``"float32"`` to ``"float16"``, rounded as numpy's ``astype(np.float16)``.

    Example:
        >>> cast(np.array([0x3F80, 0x4049], np.uint16), "bfloat16", "float16").tolist()
        [1.0, 3.140625]
    """
    want = np.dtype(np.uint16 if src == "bfloat16" else np.float32)
    out_dtype = _CAST_OUT.get((src, to))
    if out_dtype is None:
        raise ValueError(f"cast converts bfloat16 to float32 or float16 and float32 to float16, got {src} to {to}")
    if x.dtype != want:
        raise TypeError(f"cast from {src} takes a {want} array, got {x.dtype}")
    if not x.flags.c_contiguous:
        raise ValueError("cast takes a C-contiguous array")
    out = np.empty(x.shape, out_dtype)
    shape = x.shape or (1,)
    lib.call("bng_cast", _byref(_host(x, src, shape=shape)), _byref(_host(out, to, shape=shape)))
    return out


def pack(qtype: QType, values: np.ndarray, rows: int, packed: np.ndarray) -> None:
    """Pack int8 ternary ``values`` (-1, 0, +1; ``rows`` rows) into ``packed`` in format ``qtype``.

    Example:
        >>> p = np.empty(1, np.uint8); pack("tl1", np.array([1, -1], np.int8), 1, p); hex(p[0])
        '0x6'
    """
    shape = _values_shape(values.size, rows)
    lib.call("bng_pack", _byref(_host(values, "int8", shape=shape)), _byref(_host(packed, qtype, shape=shape)))


def unpack(qtype: QType, packed: np.ndarray, rows: int, out: np.ndarray) -> None:
    """Write the ternary values held in ``packed`` (format ``qtype``, ``rows`` rows) into int8 ``out``.

    ``ValueError`` for a code the format never writes (an I2_S code 3, bad padding).

    Example:
        >>> out = np.empty(2, np.int8); unpack("tl1", np.array([6], np.uint8), 1, out); out
        array([ 1, -1], dtype=int8)
    """
    shape = _values_shape(out.size, rows)
    lib.call("bng_unpack", _byref(_host(packed, qtype, shape=shape)), _byref(_host(out, "int8", shape=shape)))


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
    shape = _values_shape(out.size, rows)
    src = _host(packed, qtype, shape=shape, scales=scales, block_size=block_size)
    lib.call("bng_dequantize", _byref(src), _byref(_host(out, "float32", shape=shape)))


@functools.lru_cache(maxsize=1024)
def _conv_params(
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
    act_bits: int,
    algorithm: int,
    check_finite: int,
    weight_id: int = 0,
) -> descriptor.Conv2dParams:
    """The conv2d parameter struct, built once per distinct geometry and weight number (a
    model's layers: one each; Go only reads it)."""
    p = descriptor.Conv2dParams(descriptor.CONV2D_V2, act_bits, algorithm, check_finite)
    p.stride[:], p.padding[:], p.dilation[:], p.groups = stride, padding, dilation, groups
    p.weight_id = weight_id
    return p


@functools.lru_cache(maxsize=256)
def _weight(
    addrs: tuple[int, int], nbytes: int, n_scales: int, qtype: QType, shape: tuple[int, ...], block_size: int | None
) -> descriptor.Tensor:
    """A weight's descriptor from its kept addresses: a function of these values alone (Go only
    reads it), so it is built once per weight, not once per call."""
    t = descriptor.layout(qtype, shape, block_size)
    t.data, t.nbytes, t.scales, t.n_scales = addrs[0], nbytes, addrs[1], n_scales
    return t


class ConvInfo(NamedTuple):
    """What ran in a :func:`conv2d_run` call."""

    algorithm: Kernel
    """The algorithm the planner ran (``"direct"`` and ``"auto"`` resolved)."""
    kernel: str
    """The kernel that ran, ``path/family`` (e.g. ``"implicit_gemm/avx2"``); empty for an empty batch."""


class ConvPlan(NamedTuple):
    """What a conv2d call passes Go besides its arrays: built once per weight and geometry
    (:func:`conv2d_plan`), run as often as wanted (:func:`conv2d_run`)."""

    params: descriptor.Conv2dParams
    """The geometry, ``act_bits``, algorithm, ``check_finite`` and the weight's number."""
    weight: descriptor.Tensor
    """The weight's descriptor (its arrays must outlive the plan's calls)."""
    stride: tuple[int, int]
    """``params``' stride as Python ints (reading a ctypes array field costs a microsecond a call)."""
    dilation: tuple[int, int]
    """``params``' dilation as Python ints."""


def conv2d_plan(
    packed: np.ndarray,
    scales: np.ndarray,
    qtype: QType,
    block_size: int | None,
    weight_shape: tuple[int, int, int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
    act_bits: int | None,
    algorithm: str,
    check_finite: bool,
    weight_addrs: tuple[int, int] | None = None,
    weight_id: int = 0,
) -> ConvPlan:
    """The plan of a 2-D convolution with a ternary weight (run it with :func:`conv2d_run`).

    The weight is ``packed`` (uint8, format ``qtype``; TL rows are the O
    output channels) and ``scales`` (float32, one per ``block_size``
    elements of the flattened weight, or one) of shape ``weight_shape``
    (O, C/groups, kH, kW). ``padding`` is (top, left, bottom, right);
    ``act_bits`` None (float32 activations) or 8; ``algorithm`` a key of
    :data:`ALGORITHM_CODES`. ``weight_addrs``: the addresses of ``packed``
    and ``scales`` if the caller keeps them (a tensor's arrays never move;
    ``ndarray.ctypes`` costs microseconds a call). ``weight_id``:
    ``packed``'s number (:func:`bitnet_go._core.arrays.weight_id`; 0: none),
    under which Go remembers that an i2_s weight's codes were checked. The
    plan keeps the addresses, not the arrays: they must outlive its calls.

    Example:
        >>> p, s = np.empty(32, np.uint8), np.ones(1, np.float32)
        >>> plan = conv2d_plan(p, s, "i2_s", None, (1, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, None, "naive", True)
        >>> plan.params.groups, plan.weight.n_scales
        (1, 1)
    """
    p = _conv_params(stride, padding, dilation, groups, 0 if act_bits is None else act_bits,
                     ALGORITHM_CODES[algorithm], 1 if check_finite else 0, weight_id)  # fmt: skip
    if weight_addrs is None:
        wt = _host(packed, qtype, shape=weight_shape, scales=scales, block_size=block_size)
    else:
        wt = _weight(weight_addrs, packed.nbytes, scales.size, qtype, weight_shape, block_size)
    return ConvPlan(p, wt, (int(stride[0]), int(stride[1])), (int(dilation[0]), int(dilation[1])))


@functools.lru_cache(maxsize=64)
def _conv_info(algorithm: int, kernel: bytes) -> ConvInfo:
    return ConvInfo(KERNEL_NAMES[algorithm], kernel.decode())


class _ConvCall(NamedTuple):
    """A ``bng_conv2d`` call of one plan on one input shape, prepared on one thread and kept among
    its descriptors (:func:`descriptor.kept_take`): the descriptors re-pointed at each call's
    arrays, the output shape, the info struct Go fills and :func:`lib.prepared`'s function,
    arguments and error buffer."""

    plan: ConvPlan
    x: descriptor.Tensor
    out: descriptor.Tensor
    bias: descriptor.Tensor | None
    out_shape: tuple[int, ...]
    info: descriptor.OpInfo
    fn: Any
    args: tuple[object, ...]
    buf: Any


_CONV_CALL = "conv2d"
"""The first item of the keys :class:`_ConvCall` are kept under: (it, id(plan), x.shape, no bias)."""


def _kept_call(kept: descriptor.Kept | None, plan: ConvPlan, shape: tuple[int, ...], no_bias: bool) -> _ConvCall | None:
    """The thread's kept call of ``plan`` on inputs of ``shape`` (with a bias or not), or None:
    none kept, or one that a forked child may not use."""
    c = None if kept is None else kept.get((_CONV_CALL, id(plan), shape, no_bias))
    return c if c is not None and c.plan is plan and lib.still_bound("bng_conv2d", c.fn) else None


def _point(c: _ConvCall, x: np.ndarray, out: np.ndarray, bias: np.ndarray | None) -> None:
    """Point ``c``'s descriptors at this call's arrays."""
    c.x.data, c.out.data = descriptor.address(x), descriptor.address(out)
    if bias is not None:
        c.bias.data = descriptor.address(bias)  # type: ignore[union-attr]


def _conv_call(kept: descriptor.Kept | None, plan: ConvPlan, x: np.ndarray, bias: np.ndarray | None,
               out: np.ndarray) -> _ConvCall:  # fmt: skip
    """The thread's kept call of ``plan`` on ``x``'s shape (built and kept on first use; a new one,
    not kept, when ``kept`` is None), its descriptors pointed at these arrays."""
    c = _kept_call(kept, plan, x.shape, bias is None)
    if c is not None and c.out_shape == out.shape:
        _point(c, x, out, bias)
        return c
    xt, ot = descriptor.host(x, "float32"), descriptor.host(out, "float32")
    bt = None if bias is None else descriptor.host(bias, "float32")
    info = descriptor.OpInfo(descriptor.OP_INFO_V1)
    fn, args, buf = lib.prepared("bng_conv2d", _byref(xt), _byref(plan.weight), None if bt is None else _byref(bt),
                                 _byref(ot), _byref(plan.params), _byref(info))  # fmt: skip
    c = _ConvCall(plan, xt, ot, bt, out.shape, info, fn, args, buf)
    if kept is not None:
        if len(kept) >= descriptor.KEPT_MAX:
            kept.clear()
        kept[(_CONV_CALL, id(plan), x.shape, bias is None)] = c
    return c


def conv2d_run(plan: ConvPlan, x: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> ConvInfo:
    """Run the plan on float32 ``x`` (N, C, H, W) into float32 ``out`` (N, O, Ho, Wo), with
    ``bias`` None or float32 (O,). Go checks every shape, size and value; the output size must
    be the one the geometry implies. The call's descriptors are kept on this thread for the
    plan and ``x``'s shape (:func:`conv2d_run_kept` runs them again).

    Example:
        >>> x, out = np.ones((1, 1, 3, 3), np.float32), np.empty((1, 1, 1, 1), np.float32)
        >>> p, s = np.empty(32, np.uint8), np.empty(1, np.float32)
        >>> quantize(np.ones(9, np.float32), "i2_s", None, "absmean", True, p, s)
        >>> plan = conv2d_plan(p, s, "i2_s", None, (1, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, None, "naive", True)
        >>> conv2d_run(plan, x, None, out), out
        (ConvInfo(algorithm='naive', kernel='naive/generic'), array([[[[9.]]]], dtype=float32))
    """
    kept = descriptor.kept_take()
    try:
        c = _conv_call(kept, plan, x, bias, out)
        lib.call_prepared(c.fn, c.args, c.buf)
    finally:
        descriptor.kept_give(kept)
    return _conv_info(c.info.algorithm, c.info.kernel)


def conv2d_run_kept(plan: ConvPlan, x: np.ndarray) -> tuple[np.ndarray, ConvInfo] | None:
    """:func:`conv2d_run` without a bias into a new output, where this thread has run ``plan`` on
    an ``x`` of this shape before (its output shape known): the output and what ran; else None
    (nothing done). ``x``: float32, C-contiguous, 4-D.

    Example:
        >>> x, p, s = np.ones((1, 1, 3, 3), np.float32), np.empty(32, np.uint8), np.empty(1, np.float32)
        >>> quantize(np.ones(9, np.float32), "i2_s", None, "absmean", True, p, s)
        >>> plan = conv2d_plan(p, s, "i2_s", None, (1, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, None, "naive", True)
        >>> conv2d_run_kept(plan, x) is None, conv2d_run(plan, x, None, np.empty((1, 1, 1, 1), np.float32))
        (True, ConvInfo(algorithm='naive', kernel='naive/generic'))
        >>> conv2d_run_kept(plan, 2 * x)
        (array([[[[18.]]]], dtype=float32), ConvInfo(algorithm='naive', kernel='naive/generic'))
    """
    kept = descriptor.kept_take()
    try:
        c = _kept_call(kept, plan, x.shape, True)
        if c is None:
            return None
        out = np.empty(c.out_shape, np.float32)
        _point(c, x, out, None)
        lib.call_prepared(c.fn, c.args, c.buf)
    finally:
        descriptor.kept_give(kept)
    return out, _conv_info(c.info.algorithm, c.info.kernel)


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
    p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, METHOD_CODES[method], 1 if check_finite else 0)
    p.work, p.work_len = work or None, work_len
    xt = descriptor.device(x, 4 * n, "float32", (n,), dev, stream=stream)
    out = descriptor.device(packed, packed_len, "i2_s", (n,), dev, scales=scales, n_scales=n_scales,
                            block_size=block_size, stream=stream)  # fmt: skip
    lib.call("bng_quantize", _byref(xt), _byref(out), _byref(p))


def cuda_unpack(dev: int, packed: int, packed_len: int, out: int, n: int, stream: int) -> None:
    """Write the ``n`` I2_S values at device address ``packed`` as int8 to device address ``out``, on ``stream``."""
    src = descriptor.device(packed, packed_len, "i2_s", (n,), dev, stream=stream)
    lib.call("bng_unpack", _byref(src), _byref(descriptor.device(out, n, "int8", (n,), dev, stream=stream)))


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
    src = descriptor.device(packed, packed_len, "i2_s", (n,), dev, scales=scales, n_scales=n_scales,
                            block_size=block_size, stream=stream)  # fmt: skip
    out_t = descriptor.device(out, 4 * n, "float32", (n,), dev, stream=stream)
    lib.call("bng_dequantize", _byref(src), _byref(out_t))


# ---------------------------------------------------------------- general quantization (int8/uint8/int4/uint4/binary)

QUANT_DTYPES: dict[str, int] = {q: descriptor.DTYPES[q] for q in PLAIN_DTYPES}
"""Plain quantized element types and their C ABI numbers."""

GIVEN = 2
"""``bng_quantize_params.method``: the output's scales (and zero points) are inputs."""

MAPPING_CODES: dict[str, int] = {
    "affine": 0,
    "symmetric": 1,
    "ao_symmetric": 2,
    "ao_symmetric_no_clipping_err": 3,
    "ao_asymmetric": 4,
}
"""``bng_qparams_params.mapping``: torch.ao observers' schemes, then torchao's MappingTypes."""

CALIBRATION_CODES: dict[str, int] = {"percentile": 0, "entropy": 1, "mse": 2}
"""``bng_calibrate_params.method``."""

_PF64 = ctypes.POINTER(ctypes.c_double)

lib.declare(
    {
        # x, mn, mx, check_finite
        "bng_minmax": (_I32, [_T, _T, _T, _I32], True),
        # x, params, counts
        "bng_histogram": (_I32, [_T, ctypes.POINTER(descriptor.HistogramParams), _T], True),
        # mn, mx, params, scales, zero_points
        "bng_choose_qparams": (_I32, [_T, _T, ctypes.POINTER(descriptor.QParamsParams), _T, _T], True),
        # counts, params, amax
        "bng_calibrate": (_I32, [_T, ctypes.POINTER(descriptor.CalibrateParams), _PF64], True),
    }
)


_F32 = descriptor.DTYPES["float32"]
_address = descriptor.address


def grouped(
    arr: np.ndarray,
    dtype: str,
    shape: tuple[int, ...],
    axis: int | None,
    block_size: int | None,
    scales: np.ndarray | None = None,
    zero_points: np.ndarray | None = None,
    addrs: tuple[int, int] | None = None,
) -> descriptor.Tensor:
    """The descriptor of the host array ``arr`` holding a ``dtype`` tensor of ``shape`` (``()`` as
    ``(1,)``, which the kernels read the same) with ``scales`` and ``zero_points`` per tensor, per
    channel along ``axis``, or per ``block_size`` elements of the flattened tensor. ``addrs``:
    the addresses of ``arr`` and ``scales`` when the caller keeps them.

    Example:
        >>> t = grouped(np.zeros(6, np.uint8), "uint8", (2, 3), 1, None, np.ones(3, np.float32))
        >>> (t.ndim, t.axis, t.n_scales, t.n_zero_points)
        (2, 1, 3, 0)
    """
    if addrs is None:
        data, saddr = _address(arr), (0 if scales is None else _address(scales))
    else:
        data, saddr = addrs
    return descriptor.tensor(
        descriptor.DTYPES[dtype],
        (shape if type(shape) is tuple else tuple(shape)) or (1,),
        data,
        arr.nbytes,
        -1 if axis is None else axis,
        block_size or 0,
        0 if scales is None else saddr,
        0 if scales is None else scales.size,
        0 if zero_points is None else _address(zero_points),
        0 if zero_points is None else zero_points.size,
    )


def _f32(a: np.ndarray, shape: tuple[int, ...] | None = None) -> descriptor.Tensor:
    """The descriptor of a float32 host array (of ``shape``, default its own; ``()`` as ``(1,)``)."""
    return descriptor.tensor(_F32, (a.shape if shape is None else shape) or (1,), _address(a), a.nbytes)


@functools.lru_cache(maxsize=64)
def _ternary_params(method: int, check_finite: int, run_on_cuda: int | None) -> descriptor.QuantizeParams:
    """The V1 quantize parameters of the ternary formats, built once per distinct value (Go only reads them)."""
    p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, method, check_finite)
    if run_on_cuda is not None:
        p.run_on, p.run_on_id = descriptor.CUDA, run_on_cuda
    return p


@functools.lru_cache(maxsize=64)
def _quantize_params(method: int, check_finite: int, quant_min: int, quant_max: int) -> descriptor.QuantizeParams:
    """The V2 quantize parameters, built once per distinct value (Go only reads them)."""
    p = descriptor.QuantizeParams(descriptor.QUANTIZE_V2, method, check_finite)
    p.quant_min, p.quant_max = quant_min, quant_max
    return p


def packed_bytes(dtype: str, n: int) -> int:
    """Bytes of ``n`` values of a plain quantized ``dtype``: one each (int8, uint8), two per byte
    (int4, uint4: element 2i in the low nibble of byte i), eight per byte (binary: bit b of byte j is
    element 8j+b).

    Example:
        >>> packed_bytes("int8", 5), packed_bytes("int4", 5), packed_bytes("binary", 9)
        (5, 3, 2)
    """
    per = VALUES_PER_BYTE.get(dtype)
    if per is None:
        raise ValueError(f"dtype must be one of {sorted(QUANT_DTYPES)}, got {dtype!r}")
    return -(-n // per)


def quantize_given(
    x: np.ndarray,
    dtype: str,
    axis: int | None,
    block_size: int | None,
    scales: np.ndarray,
    zero_points: np.ndarray | None,
    quant_min: int,
    quant_max: int,
    check_finite: bool,
    out: np.ndarray,
) -> None:
    """Quantize float32 ``x`` to ``dtype`` with the given float32 ``scales`` and int32 ``zero_points``
    into the uint8 bytes ``out`` (``bng_quantize``, method GIVEN): ``q = clamp(zp + nearbyint(x *
    (1/scale)), qmin, qmax)``. ``axis``: per channel along it; else ``block_size`` per block of the
    flattened tensor (None: one scale). ``quant_min == quant_max == 0``: the dtype's range. For
    binary, ``scales`` are read and ``zero_points`` must be None.

    Example:
        >>> out = np.empty(3, np.uint8)
        >>> quantize_given(np.float32([0.5, 1.5, -9]), "int8", None, None, np.float32([1]), None, 0, 0, True, out)
        >>> out.view(np.int8)
        array([ 0,  2, -9], dtype=int8)
    """
    quantize_given_to(x, grouped(out, dtype, x.shape, axis, block_size, scales, zero_points), quant_min, quant_max,
                      check_finite)  # fmt: skip


def quantize_given_to(
    x: np.ndarray, out: descriptor.Tensor, quant_min: int, quant_max: int, check_finite: bool
) -> None:
    """:func:`quantize_given` into the output descriptor ``out`` (:func:`grouped`'s, of ``x``'s shape).

    Example:
        >>> b, s, z = np.empty(2, np.uint8), np.float32([0.5]), np.int32([3])
        >>> quantize_given_to(np.float32([0, 1]), grouped(b, "uint8", (2,), None, None, s, z), 0, 0, True); b
        array([3, 5], dtype=uint8)
    """
    p = _quantize_params(GIVEN, 1 if check_finite else 0, quant_min, quant_max)
    lib.call("bng_quantize", _byref(_f32(x)), _byref(out), _byref(p))


def quantize_binary_absmean(
    x: np.ndarray, axis: int | None, block_size: int | None, check_finite: bool, out: np.ndarray, scales: np.ndarray
) -> None:
    """Binarize float32 ``x`` into the bytes ``out`` and write ``scales`` = mean |x| per channel
    (``axis``) or block (``bng_quantize``, method ABSMEAN, dtype binary).

    Example:
        >>> out, s = np.empty(1, np.uint8), np.empty(1, np.float32)
        >>> quantize_binary_absmean(np.float32([1, -3]), None, None, True, out, s); (out, s)
        (array([1], dtype=uint8), array([2.], dtype=float32))
    """
    p = _quantize_params(METHOD_CODES["absmean"], 1 if check_finite else 0, 0, 0)
    o = grouped(out, "binary", x.shape, axis, block_size, scales)
    lib.call("bng_quantize", _byref(_f32(x)), _byref(o), _byref(p))


def dequantize_given(
    dtype: str,
    data: np.ndarray,
    shape: tuple[int, ...],
    axis: int | None,
    block_size: int | None,
    scales: np.ndarray,
    zero_points: np.ndarray | None,
    out: np.ndarray,
) -> None:
    """Write ``scale * (q - zero_point)`` (binary: ``±scale``) of the ``dtype`` values in the bytes
    ``data`` into float32 ``out`` (``bng_dequantize``).

    Example:
        >>> out = np.empty(2, np.float32)
        >>> dequantize_given("uint8", np.uint8([3, 5]), (2,), None, None, np.float32([0.5]), np.int32([4]), out)
        >>> out
        array([-0.5,  0.5], dtype=float32)
    """
    dequantize_to(grouped(data, dtype, shape, axis, block_size, scales, zero_points), out)


def dequantize_to(src: descriptor.Tensor, out: np.ndarray) -> None:
    """:func:`dequantize_given` from the descriptor ``src`` (:func:`grouped`'s) into float32 ``out``
    of its shape (``bng_dequantize``).

    Example:
        >>> out, d, s = np.empty(2, np.float32), np.uint8([3, 5]), np.float32([0.5])
        >>> dequantize_to(grouped(d, "uint8", (2,), None, None, s, np.int32([4])), out); out
        array([-0.5,  0.5], dtype=float32)
    """
    lib.call("bng_dequantize", _byref(src), _byref(_f32(out)))


def minmax(
    x: np.ndarray, axis: int | None, block_size: int | None, check_finite: bool, mn: np.ndarray, mx: np.ndarray
) -> None:
    """Min and max of float32 ``x`` per channel (``axis``), per block of ``block_size`` elements of
    the flattened tensor, or over all of it, into float32 ``mn`` and ``mx`` (``bng_minmax``). A NaN
    makes its group's min and max NaN (``torch.aminmax``), or is a ``ValueError`` with ``check_finite``.

    Example:
        >>> mn, mx = np.empty(2, np.float32), np.empty(2, np.float32)
        >>> minmax(np.float32([[1, -2], [3, 0]]), 1, None, True, mn, mx); (mn, mx)
        (array([ 1., -2.], dtype=float32), array([3., 0.], dtype=float32))
    """
    xt = grouped(x, "float32", x.shape, axis, block_size)
    lib.call("bng_minmax", _byref(xt), _byref(_f32(mn)), _byref(_f32(mx)), 1 if check_finite else 0)


def histogram(x: np.ndarray, lo: float, hi: float, absolute: bool, check_finite: bool, counts: np.ndarray) -> None:
    """Add the counts of float32 ``x`` (of ``|x|`` if ``absolute``) in ``len(counts)`` equal bins
    over [lo, hi] to int64 ``counts``, binned exactly as ``torch.histc`` bins them (``bng_histogram``).

    Example:
        >>> c = np.zeros(4, np.int64)
        >>> histogram(np.float32([0, 1, 2, 3, 4, 9]), 0.0, 4.0, False, True, c); c
        array([1, 1, 1, 2])
    """
    p = descriptor.HistogramParams(descriptor.HISTOGRAM_V1, 1 if absolute else 0, 1 if check_finite else 0, 0, lo, hi)
    xt = _host(x, "float32", shape=(x.size,))
    lib.call("bng_histogram", _byref(xt), _byref(p), _byref(_host(counts, "int64")))


def choose_qparams(
    mn: np.ndarray,
    mx: np.ndarray,
    dtype: str,
    mapping: str,
    quant_min: int,
    quant_max: int,
    eps: float,
    scales: np.ndarray,
    zero_points: np.ndarray,
) -> None:
    """Scales (float32) and zero points (int32) from float32 ``mn``/``mx`` per group
    (``bng_choose_qparams``): torch.ao's observer ``_calculate_qparams`` for mappings
    ``"affine"``/``"symmetric"``, torchao's ``choose_qparams_affine`` for the ``"ao_*"`` ones.
    ``quant_min == quant_max == 0``: the dtype's range.

    Example:
        >>> s, z = np.empty(1, np.float32), np.empty(1, np.int32)
        >>> choose_qparams(np.float32([-1]), np.float32([1]), "int8", "symmetric", 0, 0, 2**-23, s, z)
        >>> bool(s[0] == np.float32(1) / np.float32(127.5)), int(z[0])
        (True, 0)
    """
    p = descriptor.QParamsParams(descriptor.QPARAMS_V1, descriptor.DTYPES[dtype], MAPPING_CODES[mapping],
                                 quant_min, quant_max, 0, eps)  # fmt: skip
    lib.call("bng_choose_qparams", _byref(_host(mn, "float32")), _byref(_host(mx, "float32")), _byref(p),
             _byref(_host(scales, "float32")), _byref(_host(zero_points, "int32")))  # fmt: skip


def calibrate(
    counts: np.ndarray,
    method: str,
    bin_width: float,
    *,
    num_bits: int = 8,
    unsigned: bool = False,
    start_bin: int = 128,
    percentile: float = 99.99,
) -> float:
    """The amax a histogram calibrator picks from an ``|x|`` histogram (int64 ``counts``, bin i =
    [i*bin_width, (i+1)*bin_width)): ``"percentile"``, ``"entropy"`` or ``"mse"`` (``bng_calibrate``).

    Example:
        >>> calibrate(np.int64([5, 3, 2, 0]), "percentile", 0.5, percentile=60.0)
        0.5
    """
    p = descriptor.CalibrateParams(descriptor.CALIBRATE_V1, CALIBRATION_CODES[method], num_bits,
                                   1 if unsigned else 0, start_bin, 0, percentile, bin_width)  # fmt: skip
    amax = ctypes.c_double()
    lib.call("bng_calibrate", _byref(_host(counts, "int64")), _byref(p), _byref(amax))
    return float(amax.value)
