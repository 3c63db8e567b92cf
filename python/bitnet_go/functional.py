"""Quantized ops shaped like ``torch.ao.nn.quantized.functional``, bit-exact with torch's fbgemm engine.

:func:`linear`, :func:`linear_dynamic`, :func:`matmul` and :func:`conv2d` take
quantized tensors (:class:`bitnet_go.QuantizedTensor` from
:func:`bitnet_go.quantize`, :class:`bitnet_go.TernaryTensor`, or torch
quantized tensors) and compute with fbgemm's integer arithmetic (see
``gokern/ops/qlinear``)::

    acc = sum(qa*qw) - za*colsum(qw) - zw*rowsum(qa) + K*za*zw          (int32, exact)
    out = clamp(lrintf((acc + bias/(sa*sw)) * (sa*sw/so)) + zo, qmin, qmax)

the multiplier ``sa*sw/so`` computed in float32 per tensor or per output
channel as torch's ``qlinear.cpp`` does (per-tensor weights: the bias is
multiplied by ``float32(1/(sa*sw))``, as fbgemm's AVX2 requantization does).

Combinations (anything else is a ``TypeError`` naming what was given):

==================  ==========================================  ===================
activations         weights                                     ops
==================  ==========================================  ===================
uint8 (quint8)      int8 per tensor / per channel (axis 0)      linear, conv2d
int8 (qint8)        int8 per tensor / per channel               linear, conv2d
uint8 or int8       ternary (TernaryTensor, one scale per row    linear, conv2d
                    or per tensor; linear also blocks dividing
                    a row)
uint8 or int8       int4 per group (``quantize(..., "int4",      linear
                    block_size=b)``, b dividing in_features)
float32             int8 per tensor / per channel, ternary       linear_dynamic
uint8 x uint8,      (matmul's operands: per tensor, one dtype)   matmul
int8 x int8
==================  ==========================================  ===================

The output has the activations' dtype. Weights whose scales run over blocks
shorter than a row (int4 groups, short ternary blocks) are summed exactly in
int32 per block and then in float32 over the blocks, in order:
``y = sum_g float32(raw_g) * float32(sa*sw_g)`` (each product rounded), ``y +=
bias``, ``out = clamp(lrintf(y / so) + zo)``.

Where this exact result and torch's differ (all found by comparing with an int64
NumPy reference of the formula above, which this module matches):

- ``|(acc + bias/(sa*sw)) * (sa*sw/so)| >= 2**31`` (a tiny output scale, an
  infinite bias): the code is clamped to qmin or qmax by the sign; torch's
  ``lrintf`` gives INT_MIN there, so a large positive value becomes qmin.
- depthwise :func:`conv2d` (``groups`` = channels): torch's fbgemm depthwise
  kernel differs on a few outputs of some inputs (8 to 32 channels, 8x8, 3x3,
  padding 1, input zero point 128: up to 48 codes, a few outputs in one case
  of two), as an int16 saturation of its VPMADDUBSW pairs would; this
  module's int32 sums have none.
- :func:`matmul`: torch dequantizes and multiplies in float32, so it can differ
  by one code near a rounding boundary.

torch tensors in, torch tensors out: when an operand is a torch quantized
tensor the result is a torch quantized tensor (``quint8``/``qint8`` per
tensor); otherwise it is a :class:`bitnet_go.QuantizedTensor`. torch's codes
are read with ``int_repr()`` (one copy). ``import bitnet_go`` does not import
torch.

Example:
    >>> import numpy as np, bitnet_go
    >>> from bitnet_go import functional as F
    >>> rng = np.random.default_rng(0)
    >>> x = bitnet_go.quantize(rng.standard_normal((2, 8), dtype=np.float32), "uint8", scale=0.05, zero_point=128)
    >>> w = bitnet_go.quantize(rng.standard_normal((3, 8), dtype=np.float32), "int8", scale=0.02, zero_point=0)
    >>> y = F.linear(x, w, scale=0.1, zero_point=100)
    >>> y.qtype, y.shape
    ('uint8', (2, 3))
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ._conv import IntPair, _padding, _pair
from ._core import descriptor, qops
from ._core.arrays import Derived, as_float32, check_bool, check_int, immutable, is_torch_tensor, new_weight_id
from ._core.qops import Q
from ._qelem import add, add_relu, relu, requantize
from ._quantized import PlainTensor, QuantizedTensor
from ._ternary import TernaryTensor
from .quantization._api import per_tensor_out

if TYPE_CHECKING:  # torch is imported only when a torch tensor is passed in
    import torch

__all__ = ["add", "add_relu", "conv2d", "linear", "linear_dynamic", "matmul", "relu", "requantize"]


_derived = Derived()
"""Each weight's operand and row sums, kept while its ``packed`` array lives."""


def _cached(t: QuantizedTensor, build: Any, kind: str = "codes", values: Any = None) -> tuple[Q, np.ndarray | None]:  # noqa: ANN401 (callables)
    """A weight's operand (``kind``: int8 codes, or ``"i2s"``: its own I2_S codes) and row sums,
    derived once per tensor and kept while its immutable ``packed`` array lives, with a number of
    its own for Go's kept layouts (``Q.weight_id``). The row sums are those of ``values()``
    (default: the operand's codes). A tensor whose codes may change in place (``packed`` views a
    writable array) gets its operand afresh on every call, no row sums (Go sums the codes) and
    no number."""

    def derive() -> tuple[Q, np.ndarray]:
        q = build()._replace(weight_id=new_weight_id())  # its own: q.codes may be derived from packed
        v = q.codes if values is None else values()
        k = v.shape[-1] if v.ndim == 2 else int(np.prod(v.shape[1:]))
        return q, v.reshape(v.shape[0], k).sum(axis=1, dtype=np.int64).astype(np.int32)

    if not immutable(t.packed):
        return build(), None
    return _derived.get(t.packed, kind, derive)  # type: ignore[no-any-return]


def _f32(v: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(v, np.float32).reshape(-1))


def _i32(v: object) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(v, np.int64).reshape(-1).astype(np.int32))


def _torch_q(t: torch.Tensor, name: str) -> Q:
    import torch

    if t.device.type != "cpu":
        raise ValueError(f"{name} is on {t.device}; bitnet_go.functional runs on the CPU: pass {name}.cpu()")
    if t.dtype not in (torch.quint8, torch.qint8):
        raise TypeError(f"{name} must be a quint8 or qint8 tensor, got {t.dtype}")
    codes = t.int_repr().contiguous().numpy()
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return Q(codes, _f32(t.q_scale()), _i32(t.q_zero_point()))
    if t.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
        return Q(codes, _f32(t.q_per_channel_scales()), _i32(t.q_per_channel_zero_points()),
                 axis=int(t.q_per_channel_axis()))  # fmt: skip
    raise TypeError(f"{name}: quantization scheme {t.qscheme()} is not supported")


def _plain(t: PlainTensor) -> Q:
    """An int8/uint8 PlainTensor's codes without a copy."""
    codes = t.packed.view(np.int8 if t.qtype == "int8" else np.uint8).reshape(t.shape)
    if t.zero_points is None:
        return Q(codes, t.scales, np.zeros(t.scales.size, np.int32), axis=t.axis, block_size=t.block_size)
    desc = t._descriptor() if t.shape else None  # the tensor's own, kept (0-d: its descriptor says (1,))
    return Q(codes, t.scales, t.zero_points, axis=t.axis, block_size=t.block_size, desc=desc)


def _act(x: object, name: str) -> tuple[Q, bool]:
    """Quantized activations (per tensor, uint8 or int8) and whether they came from torch."""
    if isinstance(x, PlainTensor) and x.qtype in ("uint8", "int8"):  # first: the common case
        if x.on_device:
            raise ValueError(f"{name} is on {x.device}; bitnet_go.functional runs on the CPU: pass {name}.cpu()")
        q, torch_in = _plain(x), False
    elif is_torch_tensor(x):
        q = _torch_q(x, name)  # type: ignore[arg-type]
        torch_in = True
    else:
        what = x.qtype if isinstance(x, QuantizedTensor) else type(x).__name__
        raise TypeError(f"{name} must be a uint8 or int8 quantized tensor (bitnet_go.quantize(..., 'uint8') or a torch "
                        f"quint8/qint8 tensor), got {what}")  # fmt: skip
    if q.scales is None or q.scales.size != 1 or q.axis is not None or q.block_size:
        raise ValueError(f"{name} must be quantized per tensor (one scale and zero point)")
    return q, torch_in


def _weight(w: object, k_dims: int, allow_groups: bool, i2s: bool = False) -> tuple[Q, np.ndarray | None, bool]:
    """A weight as int8 codes with per-tensor, per-channel (axis 0) or per-block scales, its row
    sums when kept, and whether it came from torch. ``i2s``: an I2_S ternary weight that
    :func:`_ternary_i2s` takes is passed as its own codes."""
    if isinstance(w, QuantizedTensor) and not w.shape:
        raise ValueError(f"weight must have {k_dims + 1} dimensions, got a 0-d tensor")
    if isinstance(w, PlainTensor) and w.qtype == "int8" and not w.on_device:  # first: the common case
        if w.axis not in (None, 0) or w.block_size:
            raise ValueError(f"int8 weights must be per tensor or per output channel (axis 0), got axis={w.axis}, "
                             f"block_size={w.block_size}")  # fmt: skip
        q, cs = _cached(w, lambda: _plain(w))
        return q, cs, False
    if is_torch_tensor(w):
        q = _torch_q(w, "weight")  # type: ignore[arg-type]
        if q.codes.dtype != np.int8:
            raise TypeError("weight must be qint8 (int8 codes), got quint8")
        if q.axis not in (None, 0):
            raise ValueError(f"weight: per-channel scales must run along axis 0, got axis {q.axis}")
        return q, None, True
    if isinstance(w, QuantizedTensor) and w.on_device:
        raise ValueError(f"weight is on {w.device}; bitnet_go.functional runs on the CPU: pass weight.cpu()")
    if isinstance(w, PlainTensor) and w.qtype == "int4" and allow_groups:
        k = w.shape[-1] if w.ndim == 2 else 0
        if w.ndim != 2 or not w.block_size or k % w.block_size or w.axis is not None:
            raise ValueError(f"int4 weights must be 2-D with groups along in_features (block_size dividing "
                             f"{k}), got shape {w.shape}, block_size={w.block_size}, axis={w.axis}")  # fmt: skip
        q, cs = _cached(w, lambda: Q(w.int_repr(), w.scales, w.zero_points, block_size=w.block_size))
        return q, None, False
    if isinstance(w, TernaryTensor):
        if i2s and (hit := _ternary_i2s(w)) is not None:
            return hit[0], hit[1], False
        q, cs = _ternary(w, k_dims, allow_groups)
        return q, (None if q.block_size else cs), False
    what = w.qtype if isinstance(w, QuantizedTensor) else type(w).__name__
    kinds = "int8 (per tensor or channel), ternary" + (" or int4 (per group)" if allow_groups else "")
    raise TypeError(f"weight must be a quantized tensor of {kinds}; got {what}")


def _ternary(w: TernaryTensor, k_dims: int, allow_groups: bool) -> tuple[Q, np.ndarray | None]:
    """A ternary weight as int8 values: one scale (per tensor), one per row (axis 0) when each
    block covers whole rows, or one per block of a row (linear)."""
    rows = w.shape[0]
    k = math.prod(w.shape[1:])
    b = w.block_size

    def build() -> Q:
        vals = w.values()
        if b is None or b >= w.size and w.scales.size == 1:
            return Q(vals, w.scales, np.zeros(1, np.int32))
        if b % k == 0:
            s = np.ascontiguousarray(w.scales[(np.arange(rows) * k) // b])
            return Q(vals, s, np.zeros(rows, np.int32), axis=0)
        if allow_groups and k % b == 0:
            return Q(vals, w.scales, np.zeros(w.scales.size, np.int32), block_size=b)
        if not allow_groups:
            raise TypeError(f"ternary weight: conv2d takes one scale per tensor or per output channel; block_size "
                            f"{b} does not cover whole rows of {k} values")  # fmt: skip
        raise TypeError(f"ternary weight: block_size {b} neither covers whole rows nor divides a row of {k} values")

    return _cached(w, build)


_I2S_GROUP = 128
"""Values per I2_S group: the GEMV kernels read rows of whole groups."""


def _ternary_i2s(w: TernaryTensor) -> tuple[Q, np.ndarray | None] | None:
    """A 2-D I2_S weight with one scale or one per row and rows of whole I2_S groups as its own
    codes for ``bng_qlinear`` (Go's linear_gemv kernels read them as they are), with its row sums;
    None for any other ternary weight (it goes as int8 values). A TL1 / TL2 weight with immutable
    codes goes as its conversion to I2_S (the same values and scales, made once and kept while its
    ``packed`` lives): as int8 values it would move four times the bytes. ``codes`` is a
    placeholder of the weight's shape (zero strides, no memory); the descriptor names the packed
    bytes and scales."""
    if w.qtype not in ("i2_s", "tl1", "tl2") or w.ndim != 2 or w.shape[1] % _I2S_GROUP:
        return None
    k, b = w.shape[1], w.block_size
    if not (b is None or (b >= w.size and w.scales.size == 1) or b % k == 0):
        return None
    if w.qtype != "i2_s":
        if not immutable(w.packed):
            return None
        tl = w
        w = _derived.get(tl.packed, "as_i2s", lambda: tl.to("i2_s"))

    def build() -> Q:
        desc = descriptor.host(w.packed, "i2_s", shape=w.shape, scales=w.scales, block_size=b)
        return Q(np.broadcast_to(np.int8(0), w.shape), w.scales, None, block_size=b, desc=desc)

    return _cached(w, build, "i2s", w.values)


def _bias(bias: ArrayLike | None, n: int) -> np.ndarray | None:
    if bias is None:
        return None
    b = as_float32(bias, "bias")
    if b.shape != (n,):
        raise ValueError(f"bias must have shape ({n},), got {b.shape}")
    return np.ascontiguousarray(b)


def _output(shape: tuple[int, ...], dtype: np.dtype, scale: object, zero_point: object) -> Q:
    """A new output operand: uninitialised codes of ``shape`` and ``dtype`` (int8 or uint8) with
    the caller's ``scale`` and ``zero_point`` and its descriptor, kept by the result tensor
    (:func:`~bitnet_go.quantization._api.per_tensor_out`: checked, and built once for an op
    called in a loop with one Python float scale and int zero point)."""
    codes = np.empty(shape, dtype)
    s, z, desc = per_tensor_out(codes, "int8" if codes.dtype == np.int8 else "uint8", shape, scale, zero_point)
    return Q(codes, s, z, desc=desc)


def _result(out: Q, to_torch: bool) -> QuantizedTensor | torch.Tensor:
    """The op's output (:func:`_output`, written by Go) as the caller's kind; a bitnet_go tensor
    keeps the descriptor the op wrote it through."""
    codes, s, z, desc = out.codes, out.scales, out.zero_points, out.desc
    if to_torch:
        import torch

        return torch._make_per_tensor_quantized_tensor(torch.from_numpy(codes), float(s[0]), int(z[0]))
    dtype = "int8" if codes.dtype == np.int8 else "uint8"
    if not codes.size:
        return PlainTensor._make(dtype, codes.shape, None, None, codes.reshape(-1).view(np.uint8), s, z)
    # the op's fresh output: checked once (by Go)
    return PlainTensor._trusted(dtype, codes.shape, None, None, codes.reshape(-1).view(np.uint8), s, z, desc)


def linear(
    input: object,  # noqa: A002 (torch's name)
    weight: object,
    bias: ArrayLike | None = None,
    *,
    scale: float,
    zero_point: int,
    relu: bool = False,
) -> QuantizedTensor | torch.Tensor:
    """``torch.ao.nn.quantized.functional.linear``: quantized ``input @ weight.T + bias``, requantized.

    Args:
        input: uint8 or int8 activations (..., in_features), per tensor.
        weight: (out_features, in_features): int8 per tensor or per channel (axis 0), a
            :class:`~bitnet_go.TernaryTensor`, or int4 per group (see the module's table).
        bias: None or float32 (out_features,).
        scale, zero_point: the output's quantization.
        relu: fuse a ReLU (outputs below ``zero_point`` become ``zero_point``).

    Returns:
        The output (..., out_features) in ``input``'s dtype: a QuantizedTensor, or a torch
        quantized tensor when an operand is one.

    Raises:
        TypeError: an unsupported combination of types. ValueError: shapes, scales.

    Example:
        >>> import numpy as np, bitnet_go
        >>> x = bitnet_go.quantize(np.float32([[1.0, -1.0, 0.5]]), "uint8", scale=0.1, zero_point=128)
        >>> w = bitnet_go.quantize(np.float32([[1, 1, 1], [1, -1, 0]]), "int8", scale=0.5, zero_point=0)
        >>> linear(x, w, np.float32([0, 1]), scale=0.1, zero_point=0).int_repr()
        array([[ 5, 30]], dtype=uint8)
    """
    xq, tx = _act(input, "input")
    wq, cs, tw = _weight(weight, 1, True, i2s=True)
    if wq.codes.ndim != 2:
        raise ValueError(f"weight must have 2 dimensions (out_features, in_features), got shape {wq.codes.shape}")
    n = wq.codes.shape[0]
    if xq.codes.ndim == 0 or xq.codes.shape[-1] != wq.codes.shape[1]:
        raise ValueError(f"input must have shape (..., {wq.codes.shape[1]}), got {xq.codes.shape}")
    oq = _output((*xq.codes.shape[:-1], n), xq.codes.dtype, scale, zero_point)
    qops.linear(xq, wq, _bias(bias, n), cs, oq, relu=check_bool(relu, "relu"))
    return _result(oq, tx or tw)


def linear_dynamic(
    input: ArrayLike,  # noqa: A002 (torch's name)
    weight: object,
    bias: ArrayLike | None = None,
    *,
    reduce_range: bool = True,
) -> np.ndarray | torch.Tensor:
    """``torch.ao.nn.quantized.dynamic.Linear``'s forward: float32 ``input`` quantized per call, float32 out.

    The activations get torch's dynamic quantization parameters (fbgemm's
    ``ChooseQuantizationParams`` over the input's min and max, [0, 255], or [0, 127] with
    ``reduce_range``, torch's default), the product is exact in int32, and
    ``out = float32(raw) * float32(sa*sw) + bias``. Matches torch to float32 rounding of the
    activation quantization (fbgemm's fused multiply-add; see the tests for the tolerance).

    Args:
        input: float32 (..., in_features): numpy, lists, or torch CPU tensors.
        weight: int8 per tensor or per channel, or a ternary weight (one scale per row or tensor).
        bias: None or float32 (out_features,).
        reduce_range: quantize the activations to 7 bits (torch's default for x86).

    Returns:
        float32 (..., out_features): numpy, or a torch tensor for torch input.

    Example:
        >>> import numpy as np, bitnet_go
        >>> w = bitnet_go.quantize(np.float32([[1, 2], [3, 4]]), "int8", scale=0.1, zero_point=0)
        >>> linear_dynamic(np.float32([[1.0, 1.0]]), w).round(2)
        array([[3., 7.]], dtype=float32)
    """
    from ._conv import as_input_kind

    x = as_float32(input, "input")
    if x.ndim == 0:
        raise ValueError("input must have shape (..., in_features), got a 0-d array")
    x = np.ascontiguousarray(x)
    wq, cs, _ = _weight(weight, 1, False)
    if wq.codes.ndim != 2:
        raise ValueError(f"weight must have 2 dimensions (out_features, in_features), got shape {wq.codes.shape}")
    n = wq.codes.shape[0]
    if x.ndim == 0 or x.shape[-1] != wq.codes.shape[1]:
        raise ValueError(f"input must have shape (..., {wq.codes.shape[1]}), got {x.shape}")
    out = np.empty((*x.shape[:-1], n), np.float32)
    if out.size:
        qops.linear(Q(x, None, None), wq, _bias(bias, n), cs, Q(out, None, None), relu=False,
                    reduce_range=check_bool(reduce_range, "reduce_range"))  # fmt: skip
    return as_input_kind(out, input)


def matmul(qa: object, qb: object, *, scale: float, zero_point: int) -> QuantizedTensor | torch.Tensor:
    """``torch.ops.quantized.matmul``: ``qa @ qb`` (..., M, K) x (..., K, N), requantized; the batch
    dimensions (...) broadcast as ``torch.matmul``'s do.

    Both operands per tensor and of one dtype (uint8 or int8); the product is exact in int32 and
    requantized as :func:`linear` does (torch computes it in float32 after dequantizing, so torch's
    result can differ from this exact one by one code where a value lies near a rounding boundary).

    Example:
        >>> import numpy as np, bitnet_go
        >>> a = bitnet_go.quantize(np.float32([[1, 2]]), "uint8", scale=1.0, zero_point=0)
        >>> b = bitnet_go.quantize(np.float32([[3], [4]]), "uint8", scale=1.0, zero_point=0)
        >>> matmul(a, b, scale=1.0, zero_point=0).int_repr()
        array([[11]], dtype=uint8)
    """
    aq, ta = _act(qa, "qa")
    bq, tb = _act(qb, "qb")
    if aq.codes.dtype != bq.codes.dtype:
        raise TypeError(f"qa and qb must have one dtype, got {aq.codes.dtype} and {bq.codes.dtype}")
    if aq.codes.ndim < 2 or bq.codes.ndim < 2:
        raise ValueError(f"qa and qb must have at least 2 dimensions, got {aq.codes.shape} and {bq.codes.shape}")
    ba, bb = aq.codes.shape[:-2], bq.codes.shape[:-2]
    if ba != bb:  # batch dimensions broadcast, as torch.matmul's: the codes repeated where they do
        try:
            batch = np.broadcast_shapes(ba, bb)
        except ValueError:
            raise ValueError(f"qa's batch dimensions {ba} and qb's {bb} do not broadcast") from None
        aq, bq = (q._replace(codes=np.ascontiguousarray(np.broadcast_to(q.codes, (*batch, *q.codes.shape[-2:]))),
                             desc=None) for q in (aq, bq))  # fmt: skip
    oq = _output((*aq.codes.shape[:-1], bq.codes.shape[-1]), aq.codes.dtype, scale, zero_point)
    qops.matmul(aq, bq, oq)
    return _result(oq, ta or tb)


def conv2d(
    input: object,  # noqa: A002 (torch's name)
    weight: object,
    bias: ArrayLike | None = None,
    *,
    stride: IntPair = 1,
    padding: IntPair | str = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    scale: float,
    zero_point: int,
    relu: bool = False,
) -> QuantizedTensor | torch.Tensor:
    """``torch.ao.nn.quantized.functional.conv2d``: quantized 2-D convolution, requantized.

    Geometry as :func:`bitnet_go.conv2d_quantized` (``padding`` an int, a pair, ``"valid"`` or
    ``"same"``); padded positions hold the input's zero point (fbgemm's rule).

    Args:
        input: uint8 or int8 (N, C, H, W), per tensor.
        weight: int8 (O, C/groups, kH, kW), per tensor or per output channel (axis 0), or a
            :class:`~bitnet_go.TernaryTensor` with one scale per tensor or per output channel.
        bias: None or float32 (O,).
        scale, zero_point: the output's quantization. relu: fuse a ReLU.

    Example:
        >>> import numpy as np, bitnet_go
        >>> x = bitnet_go.quantize(np.ones((1, 1, 3, 3), np.float32), "uint8", scale=1.0, zero_point=0)
        >>> w = bitnet_go.quantize(np.ones((1, 1, 2, 2), np.float32), "int8", scale=1.0, zero_point=0)
        >>> conv2d(x, w, scale=1.0, zero_point=0, padding=1).int_repr()[0, 0]
        array([[1, 2, 2, 1],
               [2, 4, 4, 2],
               [2, 4, 4, 2],
               [1, 2, 2, 1]], dtype=uint8)
    """
    xq, tx = _act(input, "input")
    wq, _, tw = _weight(weight, 3, False)
    if xq.codes.ndim != 4 or wq.codes.ndim != 4:
        raise ValueError(f"input and weight must have 4 dimensions, got shapes {xq.codes.shape} and {wq.codes.shape}")
    if wq.block_size:
        raise TypeError("conv2d takes weights with per-tensor or per-channel scales, not per-group ones")
    sh, sw = _pair(stride, "stride", 1)
    dh, dw = _pair(dilation, "dilation", 1)
    kh, kw = wq.codes.shape[2:]
    pad = _padding(padding, (kh, kw), (sh, sw), (dh, dw))
    g = check_int(groups, "groups")
    n, c, h, w_ = xq.codes.shape
    o = wq.codes.shape[0]
    if g < 1 or c % g or o % g or wq.codes.shape[1] != c // g:
        raise ValueError(f"weight {wq.codes.shape} does not fit input channels {c} in groups={groups}")
    ho = (h + pad[0] + pad[2] - dh * (kh - 1) - 1) // sh + 1
    wo = (w_ + pad[1] + pad[3] - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"the kernel {(kh, kw)} (dilation {(dh, dw)}) is larger than the padded input")
    oq = _output((n, o, ho, wo), xq.codes.dtype, scale, zero_point)
    qops.conv2d(xq, wq, _bias(bias, o), oq, stride=(sh, sw), padding=pad, dilation=(dh, dw),
                groups=g, relu=check_bool(relu, "relu"))  # fmt: skip
    return _result(oq, tx or tw)
