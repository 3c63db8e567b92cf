"""Element-wise ops on quantized tensors, bit for bit as torch's quantized CPU kernels compute them.

``add``, ``add_relu``, ``relu`` and ``requantize`` take int8/uint8 tensors quantized per tensor:
a :class:`~bitnet_go.QuantizedTensor` from ``bitnet_go.quantize(x, "uint8" | "int8", ...)``, or a
torch quantized tensor (``torch.quint8``/``torch.qint8``, ``per_tensor_affine``; read through
``int_repr()``, ``q_scale()`` and ``q_zero_point()``). They always return a bitnet_go
:class:`~bitnet_go.QuantizedTensor` (also for torch input; ``torch._make_per_tensor_quantized_tensor(
torch.from_numpy(q.int_repr()), float(q.scale[0]), int(q.zero_point[0]))`` makes a torch one).
Per-channel or per-group tensors, other element types (int4, uint4, binary, ternary) and float
arrays are refused with a ``ValueError``/``TypeError`` saying what was expected.

The arithmetic is the one of torch's vectorised ``qadd`` kernel (FBGEMM engine, x86), on every
element: each input is dequantized as ``fma(scale, q, float32(scale * -zero_point))`` (one
rounding), the sum is float32 (``max(sum, 0)`` for ``add_relu``), and the output code is
``clamp(nearbyint(sum * float32(1 / scale_out)) + zero_point_out, qmin, qmax)`` with ties to
even. torch computes the last ``n % 64`` elements of each thread's range (with one thread: of
the tensor, or of each innermost row when it broadcasts) with its scalar formula
``scale * float32(q - zero_point)`` instead, which differs by one code where a sum lands on a
rounding tie; there, and only there, this module can differ from torch by one. Where
``|sum / scale_out| >= 2**31`` (a tiny output scale) the code is clamped to the range; torch's
int32 sum wraps there for a zero point >= 128 (the rule of :func:`bitnet_go.quantize`).
"""

from __future__ import annotations

import ctypes
import math
from typing import NamedTuple

import numpy as np

from ._core import descriptor, lib, ops
from ._core.arrays import is_torch_tensor
from ._core.types import TORCH_QDTYPES
from ._quantized import PlainTensor, QuantizedTensor
from .quantization._api import check_dtype, per_tensor_out

__all__ = ["add", "add_relu", "relu", "requantize"]

DTYPES: tuple[str, ...] = ("int8", "uint8")
"""The element types the element-wise ops take."""

_TORCH_SCHEMES = ("torch.per_tensor_affine", "torch.per_tensor_symmetric")

_T = ctypes.POINTER(descriptor.Tensor)
_P = ctypes.POINTER(descriptor.QElemParams)
_INFO = ctypes.POINTER(descriptor.OpInfo)
_I32 = lib.I32
_byref = ctypes.byref

lib.declare(
    {
        # a, b, out, params, info
        "bng_qadd": (_I32, [_T, _T, _T, _P, _INFO], True),
        # x, out, params, info
        "bng_qrelu": (_I32, [_T, _T, _P, _INFO], True),
        # x, out, params
        "bng_requantize": (_I32, [_T, _T, _P], True),
    }
)


class _Operand(NamedTuple):
    """One per-tensor quantized operand as the C ABI takes it."""

    dtype: str
    shape: tuple[int, ...]
    codes: np.ndarray  # the codes' bytes: uint8, 1-D, C-contiguous
    scale: np.ndarray  # float32 (1,)
    zero_point: np.ndarray  # int32 (1,)
    desc: descriptor.Tensor  # the descriptor of the above (a 0-d tensor as shape (1,))


_PARAMS = {relu: descriptor.QElemParams(descriptor.QELEM_V1, relu) for relu in (0, 1)}
"""The two parameter structs (Go only reads them)."""


def _operand(q: object, name: str) -> _Operand:
    """``q`` (a bitnet_go or torch quantized tensor, int8/uint8 per tensor) as an :class:`_Operand`."""
    if isinstance(q, QuantizedTensor):
        if q.dtype not in DTYPES:
            raise TypeError(f"{name} must be an int8 or uint8 quantized tensor, got dtype {q.dtype!r}")
        if q.axis is not None or q.block_size is not None:
            where = f"axis={q.axis}" if q.axis is not None else f"group_size={q.block_size}"
            raise ValueError(f"{name} must be quantized per tensor (one scale and zero point), got {where}")
        if q.on_device:
            raise ValueError(f"{name} is on {q.device}; these ops run on host tensors (use {name}.cpu())")
        zp = q.zero_points if q.zero_points is not None else np.zeros(1, np.int32)
        return _Operand(q.qtype, q.shape, q.packed, q.scales, zp, q._descriptor())  # type: ignore[attr-defined]
    if is_torch_tensor(q) and getattr(q, "is_quantized", False):
        dt = TORCH_QDTYPES.get(str(q.dtype))  # type: ignore[attr-defined]
        if dt not in DTYPES:
            raise TypeError(f"{name} must be a torch.quint8 or torch.qint8 tensor, got {q.dtype}")  # type: ignore[attr-defined]
        if str(q.qscheme()) not in _TORCH_SCHEMES:  # type: ignore[attr-defined]
            raise ValueError(f"{name} must be quantized per tensor, got {q.qscheme()}")  # type: ignore[attr-defined]
        if q.device.type != "cpu":  # type: ignore[attr-defined]
            raise ValueError(f"{name} is a torch tensor on {q.device}; these ops take host tensors (use .cpu())")  # type: ignore[attr-defined]
        codes = q.int_repr().contiguous().numpy().reshape(-1).view(np.uint8)  # type: ignore[attr-defined]
        scale = np.float32([q.q_scale()])  # type: ignore[attr-defined]
        zp = np.int32([q.q_zero_point()])  # type: ignore[attr-defined]
        shape = tuple(q.shape)  # type: ignore[attr-defined]
        return _Operand(dt, shape, codes, scale, zp, ops.grouped(codes, dt, shape, None, None, scale, zp))
    raise TypeError(
        f"{name} must be a quantized tensor (bitnet_go.quantize(x, 'uint8' or 'int8', ...) or a torch "
        f"quint8/qint8 tensor), got {type(q).__name__}"
    )


def _output(
    dtype: str, shape: tuple[int, ...], scale: np.ndarray, zero_point: np.ndarray, codes: np.ndarray | None = None
) -> _Operand:
    """A new output operand: ``codes`` (default: new, uninitialised), the given scale and zero
    point arrays."""
    if codes is None:
        codes = np.empty(math.prod(shape), np.uint8)
    desc = ops.grouped(codes, dtype, shape, None, None, scale, zero_point)
    return _Operand(dtype, shape, codes, scale, zero_point, desc)


def _new_output(dtype: str, shape: tuple[int, ...], scale: object, zero_point: object) -> _Operand:
    """:func:`_output` with the caller's scale and zero point (a number each, checked by
    :func:`~bitnet_go.quantization._api.out_params` as for :mod:`bitnet_go.functional`'s other ops)."""
    codes = np.empty(math.prod(shape), np.uint8)
    return _Operand(dtype, shape, codes, *per_tensor_out(codes, dtype, shape, scale, zero_point))


def _nonempty(shape: tuple[int, ...], what: str) -> None:
    """``ValueError`` for a result of ``shape`` with no elements (a torch operand with a zero
    dimension): a bitnet_go tensor holds at least one element."""
    if not math.prod(shape):
        raise ValueError(f"{what} has no elements (shape {shape}); the result, a bitnet_go tensor, needs at least one")


def _result(o: _Operand) -> PlainTensor:
    """The output as a tensor (Go wrote and checked it), keeping its descriptor for the next op."""
    return PlainTensor._trusted(o.dtype, o.shape, None, None, o.codes, o.scale, o.zero_point, o.desc)


def _add(qa: object, qb: object, scale: object, zero_point: object, relu: bool) -> PlainTensor:
    a, b = _operand(qa, "qa"), _operand(qb, "qb")
    if a.dtype != b.dtype:
        raise TypeError(f"qa and qb must have one dtype (as torch's quantized add), got {a.dtype} and {b.dtype}")
    if a.shape == b.shape:
        shape = a.shape
    else:
        try:
            shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        except ValueError:
            raise ValueError(f"qa's shape {a.shape} and qb's shape {b.shape} do not broadcast") from None
    _nonempty(shape, "qa + qb")
    out = _new_output(a.dtype, shape, scale, zero_point)
    lib.call("bng_qadd", _byref(a.desc), _byref(b.desc), _byref(out.desc), _byref(_PARAMS[1 if relu else 0]), None)
    return _result(out)


def add(qa: object, qb: object, *, scale: float, zero_point: int) -> PlainTensor:
    """``qa + qb`` quantized with ``scale`` and ``zero_point``: ``torch.ops.quantized.add``.

    ``qa`` and ``qb``: int8 or uint8 quantized tensors of one dtype, per tensor (bitnet_go or
    torch; see the module), whose shapes broadcast (NumPy rules, as torch's). The result has
    their dtype, the broadcast shape, and the given scale (float32; finite, > 0) and zero point
    (in the dtype's range). Bit for bit torch's vectorised kernel (see the module for the
    elements torch computes with its scalar formula).

    Example:
        >>> import bitnet_go
        >>> from bitnet_go._qelem import add
        >>> qa = bitnet_go.quantize([0.5, 1.0, -2.0], "uint8", scale=0.5, zero_point=10)
        >>> qb = bitnet_go.quantize([0.25, 0.75, 0.5], "uint8", scale=0.25, zero_point=0)
        >>> q = add(qa, qb, scale=0.25, zero_point=8)
        >>> q.int_repr(), q.dequantize()
        (array([11, 15,  2], dtype=uint8), array([ 0.75,  1.75, -1.5 ], dtype=float32))
    """
    return _add(qa, qb, scale, zero_point, False)


def add_relu(qa: object, qb: object, *, scale: float, zero_point: int) -> PlainTensor:
    """``max(qa + qb, 0)`` quantized with ``scale`` and ``zero_point``: ``torch.ops.quantized.add_relu``.

    As :func:`add`, with negative sums giving the zero point.

    Example:
        >>> import bitnet_go
        >>> from bitnet_go._qelem import add_relu
        >>> qa = bitnet_go.quantize([0.5, 1.0, -2.0], "int8", scale=0.5, zero_point=0)
        >>> add_relu(qa, qa, scale=0.5, zero_point=-3).dequantize()
        array([1., 2., 0.], dtype=float32)
    """
    return _add(qa, qb, scale, zero_point, True)


def relu(qx: object) -> PlainTensor:
    """``max(qx, 0)`` of a quantized tensor: ``torch.relu`` of one (the codes ``max(q, zero_point)``,
    the scale and zero point kept).

    ``qx``: an int8 or uint8 quantized tensor, per tensor (bitnet_go or torch; see the module).

    Example:
        >>> import bitnet_go
        >>> from bitnet_go._qelem import relu
        >>> q = relu(bitnet_go.quantize([-1.0, 0.5, 2.0], "uint8", scale=0.5, zero_point=4))
        >>> q.int_repr(), q.zero_point
        (array([4, 5, 8], dtype=uint8), array([4], dtype=int32))
    """
    x = _operand(qx, "qx")
    _nonempty(x.shape, "qx")
    if x.desc.n_zero_points == 1:  # the output's descriptor is x's with other codes (x's scale and zero point)
        codes = np.empty(x.codes.size, np.uint8)
        out = _Operand(x.dtype, x.shape, codes, x.scale, x.zero_point,
                       descriptor.with_data(x.desc, descriptor.address(codes), codes.nbytes))  # fmt: skip
    else:
        out = _output(x.dtype, x.shape, x.scale, x.zero_point)
    lib.call("bng_qrelu", _byref(x.desc), _byref(out.desc), _byref(_PARAMS[0]), None)
    return _result(out)


def requantize(q: object, scale: float, zero_point: int, dtype: str | None = None) -> PlainTensor:
    """``q`` quantized again with ``scale``, ``zero_point`` and ``dtype`` (``"int8"``/``"uint8"``;
    None: ``q``'s).

    torch has no requantize op; this is what torch code writes for it,
    ``torch.quantize_per_tensor(q.dequantize(), scale, zero_point, dtype)``, bit for bit: each
    value dequantized as ``scale_q * float32(q - zero_point_q)`` (what ``dequantize()`` gives),
    then quantized as :func:`bitnet_go.quantize` quantizes (``nearbyint(v * float32(1/scale)) +
    zero_point``, ties to even, clamped), without the float32 array in between.

    Example:
        >>> import bitnet_go
        >>> from bitnet_go._qelem import requantize
        >>> q = bitnet_go.quantize([-1.0, 0.25, 2.0], "uint8", scale=0.25, zero_point=8)
        >>> r = requantize(q, 0.5, 0, "int8")
        >>> r.dtype, r.int_repr()
        ('int8', array([-2,  0,  4], dtype=int8))
    """
    x = _operand(q, "q")
    _nonempty(x.shape, "q")
    dt = x.dtype if dtype is None else check_dtype(dtype, DTYPES)
    out = _new_output(dt, x.shape, scale, zero_point)
    lib.call("bng_requantize", _byref(x.desc), _byref(out.desc), _byref(_PARAMS[0]))
    return _result(out)
