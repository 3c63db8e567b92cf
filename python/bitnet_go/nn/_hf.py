"""transformers' BitNet packing (four ternary values per uint8 along dim 0) to and from I2_S."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

from .._core import ops
from .._core.arrays import as_float32
from .._ternary import TernaryTensor, packed_len
from ._layers import BitLinear

ScaleMode = Literal["divide", "multiply"]
VALUES_PER_BYTE = 4


def _check_mode(scale_mode: object) -> ScaleMode:
    if scale_mode not in ("divide", "multiply"):
        raise ValueError(f"scale_mode must be 'divide' or 'multiply', got {scale_mode!r}")
    return scale_mode  # type: ignore[return-value]


def _as_uint8(a: object) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    arr = np.asarray(a)
    if arr.dtype != np.uint8:
        raise TypeError(f"weight_uint8 must have dtype uint8, got {arr.dtype}")
    return np.ascontiguousarray(arr)


def unpack_hf(weight_uint8: torch.Tensor | np.ndarray, out_features: int) -> np.ndarray:
    """The ternary values (int8, shape (out_features, *rest)) of a transformers-packed weight.

    Layout (transformers' ``pack_weights``/``unpack_weights`` in
    ``integrations/bitnet.py``): with R = ceil(out_features / 4) packed rows,
    value row ``i * R + r`` (i in 0..3) is stored as ``value + 1`` in bits
    ``2i..2i+1`` of packed row r. The packed weight has shape (R, *rest);
    positions past out_features (row ``i * R + r >= out_features``) are
    padding and are ignored (``pack_weights`` leaves them 0, which its
    ``unpack_weights`` would read as -1). A code 3 in a real position is a
    ``ValueError``.

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
    codes = np.stack([(p >> (2 * i)) & 3 for i in range(VALUES_PER_BYTE)])  # (4, R, *rest)
    codes = codes.reshape(VALUES_PER_BYTE * rows, *p.shape[1:])[:out_features]
    bad = np.flatnonzero(codes.reshape(-1) == 3)
    if bad.size:
        idx = np.unravel_index(int(bad[0]), codes.shape)
        raise ValueError(f"weight_uint8: code 3 (not ternary) at value index {tuple(int(i) for i in idx)}")
    return codes.astype(np.int8) - 1


def pack_hf(values: np.ndarray) -> np.ndarray:
    """Pack ternary int8 values (out_features, *rest) as transformers does (see :func:`unpack_hf`).

    Padding positions are 0, as transformers' ``pack_weights`` leaves them.

    Example:
        >>> import numpy as np
        >>> bin(int(pack_hf(np.array([[-1], [0], [1]], np.int8))[0, 0]))
        '0b100100'
    """
    v = np.asarray(values)
    out = v.shape[0]
    rows = math.ceil(out / VALUES_PER_BYTE)
    codes = np.zeros((VALUES_PER_BYTE * rows, *v.shape[1:]), np.uint8)
    codes[:out] = (v + 1).astype(np.uint8)
    codes = codes.reshape(VALUES_PER_BYTE, rows, *v.shape[1:])
    packed = np.zeros((rows, *v.shape[1:]), np.uint8)
    for i in range(VALUES_PER_BYTE):
        packed |= codes[i] << np.uint8(2 * i)
    return packed


def from_hf_packed(
    weight_uint8: torch.Tensor | np.ndarray,
    weight_scale: torch.Tensor | np.ndarray | float,
    out_features: int,
    *,
    scale_mode: ScaleMode = "divide",
) -> TernaryTensor:
    """A transformers BitNet weight (packed uint8 + ``weight_scale``) as an I2_S :class:`~bitnet_go.TernaryTensor`.

    Args:
        weight_uint8: the packed weight, shape (ceil(out_features/4), in_features)
            (or (ceil(out/4), *rest)), dtype uint8; layout in :func:`unpack_hf`.
        weight_scale: the layer's ``weight_scale`` (one value; any float
            dtype, bfloat16 included).
        out_features: the layer's output size (the packed rows do not say it
            when it is not a multiple of 4).
        scale_mode: how the checkpoint's layer uses ``weight_scale``:
            ``"divide"`` for transformers' online ``BitLinear``
            (``y = (x_q @ W_q.T) / (input_scale * weight_scale)``: the stored
            value is the reciprocal of the absmean scale; our scale is
            ``1 / weight_scale``, computed in float64 and rounded to float32),
            ``"multiply"`` for ``AutoBitLinear`` (``y = ... * weight_scale``;
            our scale is ``weight_scale`` itself, bit for bit).

    Returns:
        A TernaryTensor of shape (out_features, *rest) with one scale
        (``block_size=None``, ``method="absmean"``) whose ``dequantize()``
        is the weight the layer uses.

    Example:
        >>> import torch
        >>> from bitnet_go.nn import from_hf_packed, to_hf_packed
        >>> w = torch.tensor([[0b00_10_01_00, 0b00_01_10_01]], dtype=torch.uint8)
        >>> t = from_hf_packed(w, torch.tensor([2.0]), 3, scale_mode="multiply")
        >>> t.values().tolist(), t.scales.tolist()
        ([[-1, 0], [0, 1], [1, 0]], [2.0])
        >>> packed, scale = to_hf_packed(t, scale_mode="multiply")
        >>> bool(torch.equal(packed, w)), scale.item()
        (True, 2.0)
    """
    mode = _check_mode(scale_mode)
    values = unpack_hf(weight_uint8, out_features)
    s = weight_scale.detach().cpu().float() if isinstance(weight_scale, torch.Tensor) else weight_scale
    sa = as_float32(s, "weight_scale").reshape(-1)
    if sa.size != 1:
        raise ValueError(f"weight_scale must hold one value, got {sa.size}")
    scale = sa if mode == "multiply" else np.array([1.0 / np.float64(sa[0])], np.float32)
    flat = values.reshape(-1)
    packed = np.empty(packed_len(max(flat.size, 1)), np.uint8)
    ops.pack("i2_s", flat, 1, packed)
    return TernaryTensor._make("i2_s", values.shape, None, "absmean", packed, scale.astype(np.float32))


def to_hf_packed(t: TernaryTensor, *, scale_mode: ScaleMode = "divide") -> tuple[torch.Tensor, torch.Tensor]:
    """A ternary tensor as transformers packs it: ``(weight uint8, weight_scale float32 of shape (1,))``.

    The inverse of :func:`from_hf_packed`: the packed bytes round-trip bit for
    bit both ways; ``weight_scale`` is the scale (``"multiply"``, exact) or its
    reciprocal (``"divide"``, float64 then rounded to float32). ``t`` must have
    one scale (per-tensor, as BitNet's layers); any qtype.

    Example:
        >>> import numpy as np, bitnet_go
        >>> from bitnet_go.nn import to_hf_packed
        >>> packed, scale = to_hf_packed(bitnet_go.quantize_i2s(np.ones((8, 16), np.float32)))
        >>> tuple(packed.shape), scale.tolist()
        ((2, 16), [1.0])
    """
    if not isinstance(t, TernaryTensor):
        raise TypeError(f"t must be a TernaryTensor, got {type(t).__name__}")
    mode = _check_mode(scale_mode)
    host = t.cpu()
    if host.scales.shape[0] != 1:
        raise ValueError(
            f"t must have one scale (block_size=None) for transformers' layout, got {host.scales.shape[0]}"
        )
    if host.ndim < 1:
        raise ValueError("t must have at least 1 dimension")
    s = host.scales.copy() if mode == "multiply" else np.array([1.0 / np.float64(host.scales[0])], np.float32)
    return torch.from_numpy(pack_hf(host.values())), torch.from_numpy(s)


def bitlinear_from_hf(
    weight_uint8: torch.Tensor,
    weight_scale: torch.Tensor,
    out_features: int,
    bias: torch.Tensor | None = None,
    *,
    scale_mode: ScaleMode = "divide",
    act_bits: int | None = 8,
) -> BitLinear:
    """A frozen :class:`BitLinear` from a transformers BitNet layer's state (see :func:`from_hf_packed`).

    Example:
        >>> import torch
        >>> from bitnet_go.nn import bitlinear_from_hf
        >>> layer = bitlinear_from_hf(torch.full((2, 16), 0b01_01_01_01, dtype=torch.uint8), torch.tensor([1.0]), 8)
        >>> layer(torch.ones(1, 16)).abs().max().item()
        0.0
    """
    t = from_hf_packed(weight_uint8, weight_scale, out_features, scale_mode=scale_mode)
    if t.ndim != 2:
        raise ValueError(f"a linear weight has 2 dimensions, got shape {t.shape}")
    layer = BitLinear(t.shape[1], t.shape[0], bias is not None, act_bits=act_bits)
    layer._set_frozen(t)
    if bias is not None:
        with torch.no_grad():
            layer.bias.copy_(bias.detach())  # type: ignore[union-attr]
    return layer
