"""The ctypes calls of the quantized ops (``bng_qlinear``, ``bng_qmatmul``, ``bng_qconv2d``).

Operands are host numpy arrays of codes with their float32 scales and int32
zero points (see :class:`Q`); outputs are the caller's, written in place. Go
checks every shape, dtype and parameter; the arithmetic is fbgemm's (see
``gokern/ops/qlinear``).

Example:
    >>> import numpy as np
    >>> x = Q(np.array([[1, 2]], np.uint8), np.float32([0.5]), np.int32([0]))
    >>> w = Q(np.array([[1, 1], [2, -1]], np.int8), np.float32([1.0]), np.int32([0]))
    >>> out = Q(np.empty((1, 2), np.uint8), np.float32([0.5]), np.int32([10]))
    >>> linear(x, w, None, None, out, relu=False)
    'gemm/...'
    >>> out.codes
    array([[13, 10]], dtype=uint8)
"""

from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple

import numpy as np

from . import descriptor, lib
from .arrays import Derived

_T = ctypes.POINTER(descriptor.Tensor)
_P = ctypes.POINTER(descriptor.QopsParams)
_INFO = ctypes.POINTER(descriptor.OpInfo)

lib.declare(
    {
        # x, w, bias, colsums, out, params, act_qparams, info
        "bng_qlinear": (lib.I32, [_T, _T, _T, _T, _T, _P, ctypes.POINTER(ctypes.c_float), _INFO], True),
        # a, b, out, params, info
        "bng_qmatmul": (lib.I32, [_T, _T, _T, _P, _INFO], True),
        # x, w, bias, out, params, info
        "bng_qconv2d": (lib.I32, [_T, _T, _T, _T, _P, _INFO], True),
    }
)


class Q(NamedTuple):
    """A quantized operand: C-contiguous ``codes`` (uint8 or int8, or float32 for a dynamic
    input) with float32 ``scales`` and int32 ``zero_points`` (one each per tensor; per channel
    along ``axis``; or per ``block_size`` values of the flattened tensor)."""

    codes: np.ndarray
    scales: np.ndarray | None
    zero_points: np.ndarray | None
    axis: int | None = None
    block_size: int | None = None
    desc: descriptor.Tensor | None = None
    """The descriptor of the above when the caller keeps one (a tensor's), else built per call."""
    weight_id: int = 0
    """A weight's number for Go's kept layouts (``bng_qops_params.weight_id``): non-zero only for
    codes that never change and that no other codes ever share it with (see
    :func:`bitnet_go._core.arrays.weight_id`)."""


_DTYPE = {np.dtype(np.uint8): "uint8", np.dtype(np.int8): "int8", np.dtype(np.float32): "float32",
          np.dtype(np.int32): "int32"}  # fmt: skip


def describe(q: Q) -> descriptor.Tensor:
    """``q``'s descriptor: its own when it carries one, else built (for a caller that keeps it,
    such as an op's output tensor).

    Example:
        >>> q = Q(np.zeros((2, 3), np.uint8), np.float32([0.5]), np.int32([1]))
        >>> describe(q).ndim, describe(q._replace(desc=describe(q))).ndim
        (2, 2)
    """
    if q.desc is not None:
        return q.desc
    a = descriptor.address
    return descriptor.tensor(
        descriptor.DTYPES[_DTYPE[q.codes.dtype]], q.codes.shape, a(q.codes), q.codes.nbytes,
        -1 if q.axis is None else q.axis, q.block_size or 0,
        0 if q.scales is None else a(q.scales), 0 if q.scales is None else q.scales.size,
        0 if q.zero_points is None else a(q.zero_points), 0 if q.zero_points is None else q.zero_points.size,
    )  # fmt: skip


def _params(relu: bool = False, reduce_range: bool = False, weight_id: int = 0) -> descriptor.QopsParams:
    p = descriptor.QopsParams(descriptor.QOPS_V2, int(relu), int(reduce_range))
    p.weight_id = weight_id
    p.dilation[:] = (1, 1)
    p.stride[:] = (1, 1)
    p.groups = 1
    return p


def _opt(a: np.ndarray | None) -> object:
    return None if a is None else ctypes.byref(descriptor.host(a, _DTYPE[a.dtype]))


_kept = Derived()
"""The descriptors of arrays the caller keeps unchanged for their life (a weight's column sums)."""


def _opt_kept(a: np.ndarray | None) -> object:
    """:func:`_opt` for an array that never changes: its descriptor built once and kept with it."""
    return None if a is None else ctypes.byref(_kept.get(a, "desc", lambda: descriptor.host(a, _DTYPE[a.dtype])))


@functools.lru_cache(maxsize=1024)
def _kept_params(relu: bool, reduce_range: bool, weight_id: int) -> descriptor.QopsParams:
    """:func:`_params` built once per value and shared by every call with that value, for the ops
    that do not change it (Go only reads it). Never modify what it returns: :func:`conv2d` sets
    its geometry on a fresh :func:`_params` instead."""
    return _params(relu, reduce_range, weight_id)


def linear(
    x: Q, w: Q, bias: np.ndarray | None, colsums: np.ndarray | None, out: Q, *, relu: bool, reduce_range: bool = False
) -> str:
    """``bng_qlinear``: out = x·wᵀ + bias, quantized (or dynamic for float32 ``x``); returns the kernel's name.

    For a float32 ``x`` the activation scale and zero point used are ``out.scales[0]`` and
    ``out.zero_points[0]`` afterwards when ``out`` carries arrays of one element. ``colsums``
    (None, or the weight's row sums) must never change: its descriptor is kept with it.
    """
    info = descriptor.OpInfo(descriptor.OP_INFO_V1)
    aq = (ctypes.c_float * 2)()
    ot = describe(out if x.codes.dtype != np.float32 else Q(out.codes, None, None))
    p = _kept_params(bool(relu), bool(reduce_range), w.weight_id)
    lib.call("bng_qlinear", ctypes.byref(describe(x)), ctypes.byref(describe(w)), _opt(bias), _opt_kept(colsums),
             ctypes.byref(ot), ctypes.byref(p), aq, ctypes.byref(info))  # fmt: skip
    if x.codes.dtype == np.float32 and out.scales is not None and out.zero_points is not None:
        out.scales[0], out.zero_points[0] = aq[0], int(aq[1])
    return info.kernel.decode()


def matmul(a: Q, b: Q, out: Q) -> str:
    """``bng_qmatmul``: out = a·b quantized; returns the kernel's name."""
    info = descriptor.OpInfo(descriptor.OP_INFO_V1)
    lib.call("bng_qmatmul", ctypes.byref(describe(a)), ctypes.byref(describe(b)), ctypes.byref(describe(out)),
             ctypes.byref(_kept_params(False, False, 0)), ctypes.byref(info))  # fmt: skip
    return info.kernel.decode()


def conv2d(
    x: Q,
    w: Q,
    bias: np.ndarray | None,
    out: Q,
    *,
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
    relu: bool,
) -> str:
    """``bng_qconv2d``: out = conv2d(x, w) + bias quantized; returns the kernel's name."""
    p = _params(relu, weight_id=w.weight_id)
    p.stride[:], p.padding[:], p.dilation[:], p.groups = stride, padding, dilation, groups
    info = descriptor.OpInfo(descriptor.OP_INFO_V1)
    lib.call("bng_qconv2d", ctypes.byref(describe(x)), ctypes.byref(describe(w)), _opt(bias),
             ctypes.byref(describe(out)), ctypes.byref(p), ctypes.byref(info))  # fmt: skip
    return info.kernel.decode()
