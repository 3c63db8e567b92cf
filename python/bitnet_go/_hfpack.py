"""transformers' BitNet packing (four ternary values per uint8 along dim 0), in numpy.

The one implementation of the layout: ``bitnet_go.nn`` (torch tensors) and
``bitnet_go.convert`` (checkpoints read from disk) both call it.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from ._core import ops
from ._core.arrays import as_float32, is_torch_tensor
from ._ternary import TernaryTensor, packed_len

ScaleMode = Literal["divide", "multiply"]
VALUES_PER_BYTE = 4


def check_mode(scale_mode: object) -> ScaleMode:
    """``scale_mode`` checked: ``"divide"`` or ``"multiply"``.

    Example:
        >>> check_mode("divide")
        'divide'
    """
    if scale_mode not in ("divide", "multiply"):
        raise ValueError(f"scale_mode must be 'divide' or 'multiply', got {scale_mode!r}")
    return scale_mode  # type: ignore[return-value]


def _as_uint8(a: object) -> np.ndarray:
    if is_torch_tensor(a):
        a = a.detach().cpu().numpy()  # type: ignore[attr-defined]
    arr = np.asarray(a)
    if arr.dtype != np.uint8:
        raise TypeError(f"weight_uint8 must have dtype uint8, got {arr.dtype}")
    return np.ascontiguousarray(arr)


def unpack_hf(weight_uint8: object, out_features: int) -> np.ndarray:
    """The ternary values (int8, shape (out_features, *rest)) of a transformers-packed weight.

    Layout (transformers' ``pack_weights``/``unpack_weights`` in
    ``integrations/bitnet.py``): with R = ceil(out_features / 4) packed rows,
    value row ``i * R + r`` (i in 0..3) is stored as ``value + 1`` in bits
    ``2i..2i+1`` of packed row r. The packed weight has shape (R, *rest);
    positions past out_features (row ``i * R + r >= out_features``) are
    padding and are ignored (``pack_weights`` leaves them 0, which its
    ``unpack_weights`` would read as -1). A code 3 in a real position is a
    ``ValueError``. ``weight_uint8``: a numpy array or CPU torch tensor.

    Example:
        >>> import numpy as np
        >>> unpack_hf(np.array([[0b00_10_01_00]], np.uint8), 3)[:, 0].tolist()
        [-1, 0, 1]
    """
    p = _as_uint8(weight_uint8)
    out_features = int(out_features)
    if p.ndim < 1 or out_features < 1:
        raise ValueError(f"weight_uint8 must have at least 1 dimension and out_features >= 1, got {p.shape}")
    rows = math.ceil(out_features / VALUES_PER_BYTE)
    if p.shape[0] != rows:
        raise ValueError(
            f"weight_uint8 must have ceil(out_features/4) = {rows} rows for out_features={out_features}, "
            f"got shape {p.shape}"
        )
    codes = np.empty((VALUES_PER_BYTE * rows, *p.shape[1:]), np.uint8)
    for i in range(VALUES_PER_BYTE):  # one value row block at a time: no (4, R, ...) temporary
        np.bitwise_and(p >> np.uint8(2 * i), np.uint8(3), out=codes[i * rows : (i + 1) * rows])
    codes = codes[:out_features]
    bad = np.flatnonzero(codes.reshape(-1) == 3)
    if bad.size:
        idx = np.unravel_index(int(bad[0]), codes.shape)
        raise ValueError(f"weight_uint8: code 3 (not ternary) at value index {tuple(int(i) for i in idx)}")
    values = codes.view(np.int8)
    values -= 1
    return np.ascontiguousarray(values)


def pack_hf(values: np.ndarray) -> np.ndarray:
    """Pack ternary int8 values (out_features, *rest) as transformers does (see :func:`unpack_hf`).

    Padding positions are 0, as transformers' ``pack_weights`` leaves them.

    Example:
        >>> import numpy as np
        >>> bin(int(pack_hf(np.array([[-1], [0], [1]], np.int8))[0, 0]))
        '0b100100'
    """
    v = np.asarray(values)
    if v.ndim < 1 or v.dtype.kind not in "iub":
        raise ValueError(f"values must be integers of at least 1 dimension, got dtype {v.dtype}, shape {v.shape}")
    bad = np.flatnonzero((v < -1) | (v > 1))
    if bad.size:  # a code past 2 bits would spill into the next value's
        idx = tuple(int(i) for i in np.unravel_index(int(bad[0]), v.shape))
        raise ValueError(f"values must be -1, 0 or 1, got {v[idx]} at index {idx}")
    out = v.shape[0]
    rows = math.ceil(out / VALUES_PER_BYTE)
    codes = np.zeros((VALUES_PER_BYTE * rows, *v.shape[1:]), np.uint8)
    codes[:out] = (v + 1).astype(np.uint8)
    codes = codes.reshape(VALUES_PER_BYTE, rows, *v.shape[1:])
    packed = np.zeros((rows, *v.shape[1:]), np.uint8)
    for i in range(VALUES_PER_BYTE):
        packed |= codes[i] << np.uint8(2 * i)
    return packed


def scale_from_hf(weight_scale: object, scale_mode: ScaleMode) -> np.ndarray:
    """Our one float32 scale (shape (1,)) from a transformers layer's ``weight_scale``.

    ``"multiply"`` (``AutoBitLinear``: ``y = ... * weight_scale``): the value
    itself, bit for bit; ``"divide"`` (online ``BitLinear``: ``y = ... /
    weight_scale``): its reciprocal, computed in float64 and rounded to float32.
    ``weight_scale``: one value, any real dtype (a CPU torch tensor of any float
    dtype, bfloat16 included).

    Example:
        >>> scale_from_hf(np.array([4.0], np.float32), "divide").tolist()
        [0.25]
    """
    mode = check_mode(scale_mode)
    sa = as_float32(weight_scale, "weight_scale").reshape(-1)  # type: ignore[arg-type]
    if sa.size != 1:
        raise ValueError(f"weight_scale must hold one value, got {sa.size}")
    v = float(sa[0])
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"weight_scale must be finite and > 0, got {v}")
    if mode == "multiply":
        return sa.astype(np.float32)  # a copy
    with np.errstate(over="ignore"):
        s = np.array([1.0 / np.float64(v)], np.float32)
    if not np.isfinite(s[0]):
        raise ValueError(f"weight_scale={v} is too small for scale_mode='divide': its reciprocal overflows float32")
    return s


def ternary_from_values(values: np.ndarray, scale: np.ndarray) -> TernaryTensor:
    """An I2_S :class:`~bitnet_go.TernaryTensor` (one scale, ``method="absmean"``) of ternary int8 ``values``.

    Example:
        >>> t = ternary_from_values(np.array([[1, 0], [-1, 1]], np.int8), np.array([0.5], np.float32))
        >>> t.dequantize().tolist()
        [[0.5, 0.0], [-0.5, 0.5]]
    """
    flat = np.ascontiguousarray(values, dtype=np.int8).reshape(-1)
    packed = np.empty(packed_len(max(flat.size, 1)), np.uint8)
    ops.pack("i2_s", flat, 1, packed)
    return TernaryTensor._make("i2_s", values.shape, None, "absmean", packed, np.asarray(scale, np.float32))


def from_hf_packed(
    weight_uint8: object, weight_scale: object, out_features: int, *, scale_mode: ScaleMode = "divide"
) -> TernaryTensor:
    """A transformers BitNet weight (packed uint8 + ``weight_scale``) as an I2_S TernaryTensor.

    See ``bitnet_go.nn.from_hf_packed`` (the public, documented entry point) for the arguments.

    Example:
        >>> t = from_hf_packed(np.array([[0b00_10_01_00]], np.uint8), np.array([2.0], np.float32), 3,
        ...                    scale_mode="multiply")
        >>> t.values()[:, 0].tolist(), t.scales.tolist()
        ([-1, 0, 1], [2.0])
    """
    mode = check_mode(scale_mode)
    values = unpack_hf(weight_uint8, out_features)
    return ternary_from_values(values, scale_from_hf(weight_scale, mode))
