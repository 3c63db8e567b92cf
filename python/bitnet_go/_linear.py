"""Ternary linear layer: :func:`linear_quantized` (``torch.nn.functional.linear`` with a ternary weight)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ._conv import adopt_gpu, as_input_kind, check_host, check_weight, conv2d_with_info
from ._core.arrays import as_float32
from ._core.devices import is_cuda_array
from ._ternary import TernaryTensor

if TYPE_CHECKING:  # torch is imported only when a torch tensor is passed in
    import torch


def _check_weight(weight: object, device_ok: bool = False) -> TernaryTensor:
    return check_weight(
        weight, "linear_quantized", ("out_features", "in_features"), "bitnet_go.quantize_i2s(w)", device_ok
    )


def linear_quantized(
    x: ArrayLike,
    weight: TernaryTensor,
    bias: ArrayLike | None = None,
    *,
    act_bits: int | None = None,
    check_finite: bool = True,
) -> np.ndarray | torch.Tensor:
    """``y = x @ W.T + bias`` with a ternary weight, as ``torch.nn.functional.linear``.

    Runs as a 1x1 :func:`bitnet_go.conv2d_quantized` over an
    (N, in_features, 1, 1) view of ``x`` (N = the product of the leading
    dimensions): the planner's GEMV kernels for a few rows, the 1x1 GEMM for
    more. The weight's packed bytes are used as they are (no copy), so the
    library's cache of weight layouts serves repeated calls.

    Args:
        x: input of shape (..., in_features): numpy arrays, lists, or CPU
            torch tensors of a real dtype, cast to float32.
        weight: a :class:`TernaryTensor` of shape (out_features, in_features),
            e.g. ``quantize_i2s(w)`` of a 2-D float weight (I2_S, TL1 or TL2);
            its ``block_size`` must be None (one scale), divide in_features
            (``block_size=in_features``: one scale per output feature), or be
            at least the weight's size.
        bias: None or shape (out_features,).
        act_bits: None: float32 activations; the result equals
            ``F.linear(x, weight.dequantize(), bias)`` to float32 rounding.
            8: W1.58A8 as BitNet does it: each row ``x_n`` of the flattened
            (N, in_features) input (each token) is quantized to int8 with
            scale ``a = 127 / max(max|x_n|, 1e-5)``,
            ``q = clamp(round_half_even(x * a), -128, 127)``, the products
            summed exactly in int32 per weight scale block, then
            ``(acc / a) * s + bias`` in float32 (see
            :func:`bitnet_go.conv2d_quantized`).
        check_finite: raise ``ValueError`` on NaN/Inf in ``x``, ``bias`` or
            the weight's scales (as :func:`bitnet_go.conv2d_quantized`).

    Returns:
        float32 of shape (..., out_features): an ndarray for numpy (or list)
        input; a new CPU ``torch.Tensor`` for torch input (sharing memory with
        nothing, not attached to autograd: ``bitnet_go.nn.BitLinear`` is the
        trainable layer).

    Raises:
        TypeError: ``weight`` is not a TernaryTensor, or a non-real dtype.
        ValueError: ``x``'s last dimension is not in_features, a rank-0 ``x``,
            a bias of another shape, a block size that does not divide
            in_features, a GPU bias or weight with a host ``x``, tensors on
            two GPUs, NaN/Inf.

    GPU input (torch CUDA tensors, CuPy arrays, ``__cuda_array_interface__``):
    runs on ``x``'s device and current stream and returns an array of
    ``x``'s framework there, as :func:`bitnet_go.conv2d_quantized` does
    (``act_bits=8``: the bits of the CPU path; ``act_bits=None``: float32
    activations, within float32 rounding). The weight is used 2 bits a value
    on the GPU: ``weight.to("cuda")`` once, or a host weight is copied to
    the GPU at the first call and kept. With ``act_bits=8``, up to 8 rows a
    launch take the GEMV kernel, which reads each weight's 2 bits once.

    Example:
        >>> import numpy as np, bitnet_go
        >>> rng = np.random.default_rng(0)
        >>> w = bitnet_go.quantize_i2s(rng.standard_normal((16, 64), dtype=np.float32))
        >>> x = rng.standard_normal((2, 5, 64), dtype=np.float32)
        >>> y = bitnet_go.linear_quantized(x, w)
        >>> y.shape, bool(np.allclose(y, x @ w.dequantize().T, atol=1e-4))
        ((2, 5, 16), True)
        >>> bitnet_go.linear_quantized(x[0, 0], w, act_bits=8).shape
        (16,)
    """
    if is_cuda_array(x):
        return _linear_gpu(x, _check_weight(weight, device_ok=True), bias, act_bits, check_finite)
    w = _check_weight(weight)
    check_host(op="linear_quantized", x=x, bias=bias)
    a = as_float32(x, "x")
    out_features, in_features = w.shape
    if a.ndim == 0 or a.shape[-1] != in_features:
        raise ValueError(
            f"x must have shape (..., in_features) = (..., {in_features}) for a weight of shape {w.shape}, "
            f"got shape {a.shape}"
        )
    _check_linear_shapes(w, bias, out_features, in_features)
    lead = a.shape[:-1]
    n = math.prod(lead)
    if n == 0:  # no rows: nothing to compute (the bias was checked)
        return as_input_kind(np.zeros((*lead, out_features), np.float32), x)
    try:
        out, _ = conv2d_with_info(a.reshape(n, in_features, 1, 1), w._as_1x1(), bias, act_bits=act_bits,
                                  check_finite=check_finite)  # fmt: skip
    except ValueError as e:
        if str(e).startswith("x contains NaN or Inf"):  # the 1x1 convolution's index, as x's
            raise ValueError(_non_finite(a)) from None
        raise
    return as_input_kind(out.reshape(*lead, out_features), x)


def _check_linear_shapes(w: TernaryTensor, bias: object, out_features: int, in_features: int) -> None:
    """What :func:`linear_quantized` checks in its own terms before the 1x1 convolution would in
    its (O, K): the bias's shape and the weight's block size."""
    if bias is not None and tuple(np.shape(bias)) != (out_features,):
        raise ValueError(f"bias must have shape (out_features,) = ({out_features},), got {tuple(np.shape(bias))}")
    b = w.block_size
    if b is not None and in_features % b:
        raise ValueError(f"weight's block_size={b} must divide in_features={in_features} (its scales are per block "
                         f"of a row), or be None; quantize the weight again with such a block_size")  # fmt: skip


def _non_finite(a: np.ndarray) -> str:
    """The message for NaN or Inf in ``x`` (a float32 array that holds one), at ``x``'s index."""
    i = int(np.flatnonzero(~np.isfinite(a))[0])
    idx = tuple(int(k) for k in np.unravel_index(i, a.shape))
    return f"x contains NaN or Inf (first at index {idx}, value {a.flat[i]}); pass check_finite=False to skip the check"


def _linear_gpu(x: object, w: TernaryTensor, bias: object, act_bits: int | None, check_finite: bool) -> object:
    """:func:`linear_quantized` for a GPU ``x``: a 1x1 convolution on its device."""
    a = adopt_gpu(x, "linear_quantized")
    out_features, in_features = w.shape
    shape = tuple(int(d) for d in a.shape)  # type: ignore[attr-defined]
    if len(shape) == 0 or shape[-1] != in_features:
        raise ValueError(
            f"x must have shape (..., in_features) = (..., {in_features}) for a weight of shape {w.shape}, "
            f"got shape {shape}"
        )
    _check_linear_shapes(w, bias, out_features, in_features)
    lead = shape[:-1]
    n = math.prod(lead)
    if n == 0:
        from ._core.devices import framework_of

        return framework_of(a).empty(0, "float32").reshape(*lead, out_features)  # type: ignore[attr-defined]
    x4 = a.reshape(n, in_features, 1, 1)  # type: ignore[attr-defined]
    out, _ = conv2d_with_info(x4, w._as_1x1(), bias, act_bits=act_bits, check_finite=check_finite)  # type: ignore[arg-type]
    return out.reshape(*lead, out_features)  # type: ignore[attr-defined]
