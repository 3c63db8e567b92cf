"""Ternary 2-D convolution: :func:`conv2d_quantized` and :func:`quantize_conv_weight`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np
from numpy.typing import ArrayLike

from ._core import ops
from ._core.arrays import (
    MAX_ELEMENTS,
    Derived,
    as_float32,
    check_bool,
    check_int,
    fits_int64,
    is_torch_tensor,
    weight_id,
)
from ._core.devices import DeviceArray, framework_of, is_cuda_array
from ._core.params import parameters_of
from ._core.types import Algorithm, Method
from ._ternary import _FLOAT32, TernaryTensor, _check_method, quantize_i2s

if TYPE_CHECKING:  # torch is imported only when a torch tensor is passed in
    import torch

ALGORITHMS: tuple[Algorithm, ...] = ("auto", "naive", "im2col", "direct", "lut")
"""Algorithm names accepted by :func:`conv2d_quantized`."""

MAX_DIM = 1 << 31
"""Largest size, stride, padding or dilation the kernels accept (gokern/conv.MaxDim)."""

IntPair = Union[int, Sequence[int]]
"""An int, or a sequence of one or two ints (height, width)."""


def _pair(v: object, name: str, lo: int) -> tuple[int, int]:
    """An int or a sequence of one or two ints, each >= lo, as a pair."""
    if type(v) is int and lo <= v <= MAX_DIM:  # the common case, checked at once
        return v, v
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")
    if isinstance(v, (int, np.integer)):
        vals: Sequence[object] = (v, v)
    elif isinstance(v, (tuple, list)) and len(v) in (1, 2):
        vals = tuple(v) * (2 // len(v))
    else:
        raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")
    out = []
    for e in vals:
        if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer)):
            raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")
        if e < lo:  # type: ignore[operator]
            raise ValueError(f"{name} must be >= {lo}, got {v!r}")
        if e > MAX_DIM:  # type: ignore[operator]
            raise ValueError(f"{name} must be <= {MAX_DIM}, got {v!r}")
        out.append(int(e))  # type: ignore[arg-type]
    return out[0], out[1]


def _padding(
    padding: object, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int]
) -> tuple[int, int, int, int]:
    """Resolve ``padding`` to (top, left, bottom, right) as torch does.

    ``"same"`` pads d*(k-1) in total per dimension, the smaller half before
    (top/left) and the larger after, which is torch's choice for even kernels.
    """
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"padding='same' is not supported for strided convolutions (stride={stride})")
            (kh, kw), (dh, dw) = kernel, dilation
            th, tw = dh * (kh - 1), dw * (kw - 1)
            return th // 2, tw // 2, th - th // 2, tw - tw // 2
        raise ValueError(f"padding must be an int, a pair of ints, 'valid' or 'same', got {padding!r}")
    ph, pw = _pair(padding, "padding", 0)
    return ph, pw, ph, pw


def check_weight(weight: object, op: str, dims: tuple[str, ...], make: str, device_ok: bool = False) -> TernaryTensor:
    """``weight`` if it is a host TernaryTensor (or, with ``device_ok``, one on a GPU) with one
    dimension per name in ``dims``; else a ``ValueError`` (on a GPU, wrong rank) or ``TypeError``
    (anything else: a float array is told to call ``make``) naming ``op``.

    Example:
        >>> import bitnet_go
        >>> w = bitnet_go.quantize_i2s(np.ones((2, 3), np.float32))
        >>> check_weight(w, "linear_quantized", ("out_features", "in_features"), "bitnet_go.quantize_i2s(w)").shape
        (2, 3)
    """
    if isinstance(weight, TernaryTensor):
        if weight.on_device and not device_ok:
            raise ValueError(
                f"weight is on {weight.device}; {op} runs on the CPU for host x: pass weight.cpu() "
                f"(or x on the weight's GPU)"
            )
        if weight.ndim != len(dims):
            raise ValueError(f"weight must have {len(dims)} dimensions ({', '.join(dims)}), got shape {weight.shape}")
        return weight
    if isinstance(weight, np.ndarray) or is_torch_tensor(weight) or isinstance(weight, (list, tuple)):
        shape = tuple(np.shape(weight)) if not is_torch_tensor(weight) else tuple(weight.shape)  # type: ignore
        raise TypeError(
            f"weight must be a TernaryTensor, got a float {type(weight).__name__} of shape {shape}; "
            f"quantize it first: weight = {make}"
        )
    raise TypeError(f"weight must be a TernaryTensor (see {make}), got {type(weight).__name__}")


def check_host(op: str, **arrays: object) -> None:
    """A ``ValueError`` naming the first of ``arrays`` that lives on a GPU (``op`` runs on the CPU).

    Example:
        >>> check_host(op="linear_quantized", x=np.ones(3), bias=None)
    """
    for name, v in arrays.items():
        if v is not None and is_cuda_array(v):
            raise ValueError(
                f"{name} is a GPU array, but {op} runs on the CPU: copy it to the host "
                f"(torch: {name}.cpu(); CuPy: {name}.get())"
            )


def _check_weight(weight: object, device_ok: bool = False) -> TernaryTensor:
    return check_weight(
        weight, "conv2d_quantized", ("O", "C/groups", "kH", "kW"), "bitnet_go.quantize_conv_weight(w)", device_ok
    )


def adopt_gpu(x: object, op: str) -> DeviceArray:
    """``adopt(x)``; when that fails where no CUDA GPU can be used, a ``RuntimeError`` saying so.

    Example:
        >>> import bitnet_go.cuda
        >>> try:
        ...     adopt_gpu(object(), "conv2d_quantized")  # not a GPU array: adopt fails
        ... except Exception as e:  # without a usable GPU it says so; with one, adopt's own error
        ...     assert ("no CUDA GPU can be used" in str(e)) != bitnet_go.cuda.is_available()
    """
    from ._core.devices import adopt

    try:
        return adopt(x)
    except Exception as e:
        from .cuda import unavailable_reason

        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"{op}: x is a GPU array but no CUDA GPU can be used: {reason}") from e
        raise


def _check_groups(groups: object) -> int:
    """An int that can cross the C ABI; its range is Go's to check (same message)."""
    g = check_int(groups, "groups")
    if not fits_int64(g):
        raise ValueError(f"groups must be {'>= 1' if g < 1 else f'<= {MAX_DIM}'}, got {g}")
    return g


def _geometry(
    stride: object, dilation: object, groups: object, act_bits: object, algorithm: object
) -> tuple[int, tuple[int, int], tuple[int, int]]:
    """Check ``act_bits`` and ``algorithm``; ``groups``, ``stride`` and ``dilation`` as ints."""
    if act_bits is not None and (
        isinstance(act_bits, (bool, np.bool_)) or not isinstance(act_bits, (int, np.integer)) or act_bits != 8
    ):  # an int: 8.0, 8+0j and arrays equal to 8 are refused
        raise ValueError(f"act_bits must be None (float32 activations) or 8, got {act_bits!r}")
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {list(ALGORITHMS)}, got {algorithm!r}")
    if algorithm == "lut" and act_bits is None:
        raise ValueError(
            "algorithm='lut' needs act_bits=8 (the lookup tables hold int8 partial sums); "
            "with act_bits=None use 'auto', 'im2col' or 'direct'"
        )
    return _check_groups(groups), _pair(stride, "stride", 1), _pair(dilation, "dilation", 1)


MAX_PLANS = 64
"""Most plans kept with one weight (:func:`kept_plan`): a layer has one; more come only from a
caller that keeps changing the geometry arguments."""


def _plain(v: object) -> bool:
    """Whether ``v`` is an int, a str, None or a tuple of ints: a key that no other value of
    another meaning equals (``True == 1``: a bool must reach the checks)."""
    t = type(v)
    return t is int or t is str or v is None or (t is tuple and all(type(e) is int for e in v))  # type: ignore[attr-defined]


def plan_key(
    stride: object,
    padding: object,
    dilation: object,
    groups: object,
    act_bits: object,
    algorithm: object,
    check_finite: object,
) -> tuple[object, ...] | None:
    """The key a conv2d plan is kept under (:data:`TernaryTensor._plans`), or None when an
    argument is not plain (:func:`_plain`; ``check_finite`` a bool): such a call is
    checked and planned afresh.

    Example:
        >>> plan_key(1, "same", (1, 1), 1, None, "auto", True) is not None, plan_key(True, 0, 1, 1, None, "auto", True)
        (True, None)
    """
    key = (stride, padding, dilation, groups, act_bits, algorithm, check_finite)
    t = type
    if (t(stride) is int and t(dilation) is int and t(groups) is int and t(algorithm) is str
            and t(check_finite) is bool and (act_bits is None or t(act_bits) is int)
            and (t(padding) is int or t(padding) is str)):  # fmt: skip
        return key  # what a layer passes call after call, told by the types alone
    if type(check_finite) is not bool or not all(map(_plain, key[:6])):
        return None
    return key


Plan = tuple[tuple[int, int, int, int], ops.ConvPlan]
"""A kept conv2d plan: the padding (top, left, bottom, right) and :class:`ops.ConvPlan`."""


def kept_plan(w: TernaryTensor, key: tuple[object, ...] | None) -> Plan | None:
    """The padding (top, left, bottom, right) and plan kept with ``w`` under ``key``, or None.

    Example:
        >>> import bitnet_go
        >>> w = bitnet_go.quantize_conv_weight(np.ones((2, 1, 3, 3), np.float32))
        >>> key = plan_key(1, "same", 1, 1, None, "auto", True)
        >>> x = np.ones((1, 4, 4), np.float32)
        >>> kept_plan(w, key) is None, bitnet_go.conv2d_quantized(x, w, padding="same").shape
        (True, (2, 4, 4))
        >>> kept_plan(w, key)[0]
        (1, 1, 1, 1)
    """
    plans = w._plans
    return None if key is None or plans is None else plans.get(key)  # type: ignore[no-any-return]


def _keep_plan(w: TernaryTensor, key: tuple[object, ...] | None, hit: Plan) -> None:
    if key is None:
        return
    plans = w._plans
    if plans is None:
        plans = {}
        object.__setattr__(w, "_plans", plans)
    if len(plans) < MAX_PLANS:
        plans[key] = hit


def conv2d_with_info(
    x: ArrayLike,
    weight: TernaryTensor,
    bias: ArrayLike | None = None,
    *,
    stride: IntPair = 1,
    padding: IntPair | str = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    act_bits: int | None = None,
    algorithm: Algorithm = "auto",
    check_finite: bool = True,
) -> tuple[np.ndarray, ops.ConvInfo]:
    """:func:`bitnet_go.conv2d_quantized` (same arguments, same result), with what ran.

    ``ConvInfo.algorithm`` is the algorithm the planner ran (``"naive"``,
    ``"im2col"``, ``"direct"``, ``"depthwise"``, ``"gemm1x1"``, ``"lut"``);
    ``ConvInfo.kernel`` the micro-kernel, None while the library does not
    report it.

    Example:
        >>> import numpy as np, bitnet_go
        >>> from bitnet_go import diagnostics
        >>> w = bitnet_go.quantize_conv_weight(np.ones((2, 1, 3, 3), np.float32))
        >>> out, info = diagnostics.conv2d_with_info(np.ones((2, 4, 4), np.float32), w, groups=2)
        >>> out.shape, info.algorithm
        ((2, 2, 2), 'depthwise')

    Python checks what it needs to build the call: types, the ranks to read
    the shapes, the output size to allocate, the bias shape (Go checks only
    its length); Go checks the channels, groups, block size and values with
    the messages users see.
    """
    if type(x) is np.ndarray and bias is None and isinstance(weight, TernaryTensor):
        # a layer's later calls: a plan kept for these arguments and a call this thread prepared
        # for x's shape (ops.conv2d_run_kept) run without the checks they passed the first time
        key = plan_key(stride, padding, dilation, groups, act_bits, algorithm, check_finite)
        hit = None if key is None else kept_plan(weight, key)
        if hit is not None and x.dtype is _FLOAT32 and x.ndim == 4 and x.flags.c_contiguous:
            done = ops.conv2d_run_kept(hit[1], x)
            if done is not None:
                return done
    on_gpu = is_cuda_array(x)
    w = _check_weight(weight, device_ok=on_gpu)
    if type(check_finite) is not bool:  # the common case costs one test: numpy bools pass, others are refused
        check_finite = check_bool(check_finite, "check_finite")
    if on_gpu:
        g, st, dl = _geometry(stride, dilation, groups, act_bits, algorithm)
        return _conv2d_gpu(x, w, bias, st, padding, dl, g, act_bits, check_finite)

    # A layer's later calls find their checked geometry and plan kept with the weight; a first
    # call checks in the order the messages have always come: arguments, x, then the padding.
    key = plan_key(stride, padding, dilation, groups, act_bits, algorithm, check_finite)
    hit = kept_plan(w, key)
    if hit is None:
        g, st, dl = _geometry(stride, dilation, groups, act_bits, algorithm)
    check_host(op="conv2d_quantized", x=x, bias=bias)
    a = as_float32(x, "x")
    if a.ndim not in (3, 4):
        raise ValueError(f"x must have 3 (C, H, W) or 4 (N, C, H, W) dimensions, got shape {a.shape}")
    unbatched = a.ndim == 3
    if unbatched:
        a = a[None]
    n, c, h, wd = a.shape
    if c < 1 or h < 1 or wd < 1:  # Go's message names one dimension: "x: channels C must be >= 1, got 0"
        raise ValueError(f"x must have at least one channel, row and column, got shape {tuple(a.shape)}")
    o, _, kh, kw = w.shape
    if hit is None:
        pads = _padding(padding, (kh, kw), st, dl)
        hit = pads, ops.conv2d_plan(w.packed, w.scales, w.qtype, w.block_size, w.shape, st, pads, dl, g,  # type: ignore[arg-type]
                                    act_bits, algorithm, check_finite, w._addrs,  # type: ignore[arg-type]
                                    weight_id(w.packed))  # fmt: skip  # Go uses the number for i2_s codes only
        _keep_plan(w, key, hit)
    (pt, pl, pb, pr), plan = hit
    (sh, sw), (dh, dw) = plan.stride, plan.dilation
    # the output size, to allocate it; below 1, Go reports the geometry
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        ho, wo = max(ho, 0), max(wo, 0)
    if n * o * ho * wo > MAX_ELEMENTS:  # numpy would refuse to allocate it first
        raise ValueError(f"output shape {(n, o, ho, wo)} has more than {MAX_ELEMENTS} elements")

    b = None
    if bias is not None:
        b = as_float32(bias, "bias")
        if b.shape != (o,):  # Go sees a length: a (O, 1) bias would pass there
            raise ValueError(f"bias must have shape (O,) = ({o},), got {b.shape}")

    out = np.empty((n, o, ho, wo), np.float32)
    ran = ops.conv2d_run(plan, a, b, out)
    return (out[0] if unbatched else out), ran


def _conv2d_gpu(
    x: object,
    w: TernaryTensor,
    bias: object,
    stride: tuple[int, int],
    padding: IntPair | str,
    dilation: tuple[int, int],
    groups: int,
    act_bits: int | None,
    check_finite: bool,
) -> tuple[Any, ops.ConvInfo]:
    """:func:`conv2d_with_info` for a GPU ``x`` (see ``bitnet_go._gpu.conv2d``)."""
    from . import _gpu

    a = adopt_gpu(x, "conv2d_quantized")
    if a.ndim not in (3, 4):  # type: ignore[attr-defined]
        raise ValueError(f"x must have 3 (C, H, W) or 4 (N, C, H, W) dimensions, got shape {tuple(a.shape)}")  # type: ignore[attr-defined]
    unbatched = a.ndim == 3  # type: ignore[attr-defined]
    if unbatched:
        a = a[None]  # type: ignore[index]
    pads = _padding(padding, w.shape[2:], stride, dilation)  # type: ignore[arg-type]
    wt = _weight_on(w, a)
    if wt.qtype != "i2_s":
        raise ValueError(f"weight: on a CUDA device only i2_s weights are supported, got {wt.qtype}")
    out, info = _gpu.conv2d(a, wt.packed, wt.scales, wt.shape, wt.block_size, bias, stride, pads, dilation, groups,
                            act_bits, check_finite)  # fmt: skip
    return (out[0] if unbatched else out), info  # type: ignore[index]


# Host weights moved to a GPU, kept while their packed array lives: (packed, ("cuda", index)) -> tensor.
_moved = Derived()


def _weight_on(w: TernaryTensor, like: DeviceArray) -> TernaryTensor:
    """``w`` on the device of the GPU array ``like``.

    A host weight is copied there once (with the framework of ``like``; TL1,
    TL2, TQ2_0 and TQ1_0 weights as I2_S, the same values) and the copy kept
    for later calls while ``w.packed`` lives; a weight on another GPU is a
    ``ValueError``.
    """
    fw = framework_of(like)
    if w.on_device:
        if framework_of(w.packed).index != fw.index:
            raise ValueError(
                f"weight is on {w.device} and x on cuda:{fw.index}: tensors on two different GPUs; "
                f"move one of them (weight.cpu() is moved to x's GPU once)"
            )
        return w

    return _moved.get(w.packed, ("cuda", fw.index), lambda: w._to_cuda(fw.index, like))  # type: ignore[no-any-return]


def as_input_kind(out: np.ndarray, x: object) -> np.ndarray | torch.Tensor:
    """``out`` as the kind of ``x``: a CPU torch tensor for a torch ``x``, else ``out`` itself.

    ``out`` is a fresh array the caller allocated and holds nowhere else, so
    the tensor (made with ``torch.from_numpy``) shares memory with nothing of
    the library's.
    """
    if is_cuda_array(out):
        return out  # already a tensor of x's framework on x's GPU
    if is_torch_tensor(x):
        import torch  # already imported: x is a torch tensor

        return torch.from_numpy(out)
    return out


@parameters_of(conv2d_with_info)
def conv2d_quantized(*args: Any, **kwargs: Any) -> np.ndarray | torch.Tensor:  # noqa: ANN401 (the parameters are conv2d_with_info's)
    """2-D convolution with a ternary weight, as ``torch.nn.functional.conv2d``.

    Args:
        x: input of shape (N, C, H, W), or (C, H, W) unbatched; anything
            ``np.asarray`` takes (CPU torch tensors included) of a real dtype,
            cast to float32 (non-contiguous input is copied once).
        weight: a :class:`TernaryTensor` of shape (O, C/groups, kH, kW), from
            :func:`quantize_conv_weight` (or :func:`quantize_i2s`); its
            ``block_size`` must be None (one scale) or divide
            K = C/groups*kH*kW (``block_size=K``: one scale per output channel;
            smaller divisors give each channel several scales). A
            ``block_size`` of at least the weight's size is one scale too.
        bias: None or shape (O,), cast to float32.
        stride, dilation: an int or a pair (height, width), each >= 1.
        padding: an int or a pair (zero padding on both sides), ``"valid"``
            (none) or ``"same"`` (stride 1 only; output size = input size; an
            odd total d*(k-1) puts the extra row/column at the bottom/right,
            as torch does).
        groups: input and output channels are split into this many groups.
        act_bits: None: float32 activations; the result equals
            ``F.conv2d(x, weight.dequantize(), bias, ...)`` to float32
            rounding (sums of ±x per scale block in float32, times the scale).
            8: W1.58A8 as BitNet does it. Each sample n gets one activation
            scale ``a = 127 / max(max|x_n|, 1e-5)`` (float32, absmax over the
            sample), ``q = clamp(round_half_even(x * a), -128, 127)`` (the
            product in float32); the ternary x int8 products of each weight
            scale block b are summed exactly in int32 (``acc_b``); then, every
            operation in float32 and in this order,
            ``t_b = (float32(acc_b) / a) * s_b`` and
            ``out = ((t_0 + t_1) + ...) + bias``, so that all algorithms give
            identical bits.
        algorithm: ``"auto"`` (the planner: depthwise kernel when groups == C,
            a GEMM straight on the input for 1x1 / stride 1 / no padding, else
            im2col), ``"im2col"`` (tiled im2col + GEMM; the column buffer is
            bounded by a tile), ``"direct"`` (no column buffer: the depthwise
            or 1x1 kernel where they apply, else a direct kernel), or
            ``"naive"`` (seven plain loops, the reference), or ``"lut"``
            (``act_bits=8`` only, else ``ValueError``: lookup tables of the
            partial sums of pairs (TL1 / I2_S weights) or triples (TL2) of
            int8 activations, selected by the weight indices; with
            ``act_bits=8`` the planner picks it only for TL1 / TL2 weights on
            linear-layer shapes (1x1, at most 8 output positions a sample,
            16 or more output channels) where no SIMD kernel family runs
            (``cpu_features()["kernels"]["conv_lut"] == "generic"``): with
            SIMD kernels the multiply-add algorithms on the weight's cached
            I2_S conversion are faster on every shape measured). Every
            algorithm gives the same result (the same bits with
            ``act_bits=8``).
        check_finite: raise ``ValueError`` naming the first NaN/Inf of ``x``,
            ``bias`` or the weight's scales. With False nothing crashes: NaN and
            Inf propagate in the float path; with ``act_bits=8`` NaN
            activations quantize to 0 and an Inf in a sample makes ``a = 0``,
            so that sample's outputs are NaN.

    Returns:
        float32 ndarray (N, O, H_out, W_out), or (O, H_out, W_out) for an
        unbatched ``x``; a float32 CPU ``torch.Tensor`` of that shape when
        ``x`` is a torch tensor (a new tensor that shares memory with nothing
        else, not attached to autograd), where H_out = (H + pads - dilation*(kH-1) - 1) //
        stride + 1 (likewise W_out). Runs on ``bitnet_go.get_num_threads()``
        threads and releases the GIL.

    Memory: besides the output, a call needs the weight in the kernels'
    layout (2 bits a weight, about ``weight.packed.nbytes``; one byte a
    weight for the int8 implicit GEMM), per-thread tiles of at most about
    128 KiB (the im2col buffer never holds more than a tile), and with
    ``act_bits=8`` a one-byte copy of ``x``. The weight layouts are kept for
    later calls with the same ``weight.packed`` array and bytes (checked on
    every call), up to ``BITNET_GO_WEIGHT_CACHE_MB`` megabytes (default
    256). A TL1 / TL2 / TQ weight's conversion to I2_S, which the kernels
    read, is kept the same way, and the layouts derived from it with it.
    The float32 input is used in place when it is C-contiguous float32.

    GPU input (torch CUDA tensors, CuPy arrays, ``__cuda_array_interface__``
    objects): the convolution runs on ``x``'s device, on its framework's
    current stream, and returns a float32 array of ``x``'s framework there
    (``algorithm`` is not used: one GPU kernel per shape). With
    ``act_bits=8`` the result has the same bits as on the CPU; with
    ``act_bits=None`` (float32 activations, an implicit GEMM with float
    multiply-adds) it is within float32 rounding of
    ``F.conv2d(x, weight.dequantize(), bias)``, as the CPU's float path. An
    I2_S ``weight`` on that GPU (``weight.to("cuda")``, or
    ``quantize_i2s(w, device="cuda")``) is used as it is, 2 bits a weight; a
    host ``weight`` is copied to the GPU once and the copy kept while
    ``weight.packed`` lives; a weight or bias on another GPU is a
    ``ValueError``. With ``check_finite`` (the default) the call waits for
    the stream to read back x's first NaN/Inf and the weight's first invalid
    code 3 (found by a GPU kernel) and copies the bias and scales to the host
    to check them: the CPU path's errors in its order; pass
    ``check_finite=False`` for a call that never blocks (then a code 3 reads
    as 2, where the CPU path still raises). Besides the output, the GPU call takes a workspace
    of one byte per value of ``x`` (the int8 activations) from the
    framework's allocator. See ``bitnet_go.cuda``.

    Raises:
        TypeError: ``weight`` is not a TernaryTensor (a float array: quantize
            it with :func:`quantize_conv_weight`), or a non-real dtype.
        ValueError: wrong ranks, channel counts, groups, strides, padding,
            dilation, bias length, block size, an output size below 1, NaN/Inf.

    Example:
        >>> import numpy as np, bitnet_go
        >>> rng = np.random.default_rng(0)
        >>> x = rng.standard_normal((1, 3, 8, 8), dtype=np.float32)
        >>> w = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 3, 3, 3), dtype=np.float32))
        >>> bitnet_go.conv2d_quantized(x, w, padding="same").shape
        (1, 4, 8, 8)
        >>> bitnet_go.conv2d_quantized(x[0], w, stride=2, act_bits=8).shape
        (4, 3, 3)
    """
    x = args[0] if args else kwargs.get("x")
    return as_input_kind(conv2d_with_info(*args, **kwargs)[0], x)


def quantize_conv_weight(
    w: ArrayLike, *, per_channel: bool = True, method: Method = "absmean", check_finite: bool = True
) -> TernaryTensor:
    """Quantize a float conv weight (O, C/groups, kH, kW) for :func:`conv2d_quantized`.

    Args:
        w: the float weight; anything ``np.asarray`` takes (CPU torch tensors
            included).
        per_channel: one scale per output channel (``block_size`` =
            C/groups*kH*kW); False: one scale for the whole tensor.
        method: ``"absmean"`` (BitNet b1.58) or ``"absmax"``, as
            :func:`quantize_i2s`.
        check_finite: raise ``ValueError`` on NaN/Inf, as :func:`quantize_i2s`.

    Returns:
        A :class:`TernaryTensor` of ``w``'s shape.

    Example:
        >>> import numpy as np, bitnet_go
        >>> t = bitnet_go.quantize_conv_weight(np.ones((8, 3, 3, 3), np.float32))
        >>> t.block_size, t.scales.shape
        (27, (8,))
    """
    if isinstance(w, TernaryTensor):
        raise TypeError("w is already a TernaryTensor; pass it to conv2d_quantized as it is")
    m = _check_method(method)
    a = as_float32(w, "w")
    if a.ndim != 4:
        raise ValueError(f"w must have 4 dimensions (O, C/groups, kH, kW), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"w must have at least one element, got shape {a.shape}")
    k = a.shape[1] * a.shape[2] * a.shape[3]
    return quantize_i2s(a, block_size=k if per_channel else None, method=m, check_finite=check_finite, device="cpu")
