"""transformers' BitNet packing (four ternary values per uint8 along dim 0) to and from I2_S."""

from __future__ import annotations

import numpy as np
import torch

from .. import _hfpack
from .._core.arrays import check_positive_int
from .._hfpack import ScaleMode, pack_hf, unpack_hf
from .._ternary import TernaryTensor
from ._layers import BitLinear

__all__ = ["ScaleMode", "bitlinear_from_hf", "from_hf_packed", "pack_hf", "to_hf_packed", "unpack_hf"]


def _check_scale_mode(scale_mode: object) -> ScaleMode:
    """``scale_mode`` checked: a str (``TypeError``, which an array would otherwise escape with numpy's
    truth-value error), ``"divide"`` or ``"multiply"`` (``ValueError``)."""
    if not isinstance(scale_mode, str):
        raise TypeError(f"scale_mode must be a str, 'divide' or 'multiply', got {type(scale_mode).__name__}")
    return _hfpack.check_mode(scale_mode)


def _bias_values(bias: object, out_features: int) -> torch.Tensor:
    """``bias`` as a tensor of shape ``(out_features,)``: a torch tensor (any device), a numpy array or
    anything ``torch.as_tensor`` takes, of a real dtype and finite; otherwise a ``TypeError`` or
    ``ValueError`` naming bias and the expected shape."""
    if isinstance(bias, bool):  # BitLinear's own bias argument is a flag; this one holds the values
        raise TypeError(f"bias must be None or the bias values, shape ({out_features},), not the bool {bias}")
    try:
        b = bias.detach() if isinstance(bias, torch.Tensor) else torch.as_tensor(bias)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(
            f"bias must be a tensor of shape (out_features,) = ({out_features},) (torch, numpy or a sequence "
            f"of numbers), got {type(bias).__name__}"
        ) from e
    if b.is_complex() or b.dtype == torch.bool:
        raise TypeError(f"bias must be real numbers, shape ({out_features},), got dtype {b.dtype}")
    if tuple(b.shape) != (out_features,):
        raise ValueError(f"bias must have shape (out_features,) = ({out_features},), got {tuple(b.shape)}")
    if not bool(torch.isfinite(b).all()):
        raise ValueError(f"bias must be finite, got NaN or Inf at index {int(torch.nonzero(~torch.isfinite(b))[0])}")
    return b


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
    n = check_positive_int(out_features, "out_features")
    return _hfpack.from_hf_packed(weight_uint8, weight_scale, n, scale_mode=_check_scale_mode(scale_mode))  # type: ignore[arg-type]


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
    mode = _check_scale_mode(scale_mode)
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
    bias: torch.Tensor | np.ndarray | None = None,
    *,
    scale_mode: ScaleMode = "divide",
    act_bits: int | None = 8,
) -> BitLinear:
    """A frozen :class:`BitLinear` from a transformers BitNet layer's state (see :func:`from_hf_packed`).

    ``bias``: None (a layer without bias) or the bias values, of shape exactly
    ``(out_features,)``, real and finite: a torch tensor, a numpy array or
    anything ``torch.as_tensor`` takes (copied into the layer's float32 bias).
    Others are a ``TypeError`` or ``ValueError`` naming ``bias``.

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
    b = None if bias is None else _bias_values(bias, t.shape[0])
    layer = BitLinear(t.shape[1], t.shape[0], b is not None, act_bits=act_bits)
    layer._set_frozen(t)
    if b is not None:
        with torch.no_grad():
            layer.bias.copy_(b)  # type: ignore[union-attr]
    return layer
