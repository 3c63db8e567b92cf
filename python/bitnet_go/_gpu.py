"""The GPU side of quantized tensors: I2_S ops on device arrays, results as raw device buffers.

The quantized-tensor classes wrap what these return; this module knows
nothing of them (it imports only the core). Outputs are allocated by the
input's framework (torch or CuPy) on the input's device, and the kernels
are enqueued on that framework's current stream there (see
``bitnet_go.cuda`` for the user-facing contract).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

import numpy as np

from ._core import descriptor, lib, ops
from ._core.devices import (
    DeviceArray,
    Framework,
    adopt,
    check_same_device,
    framework_of,
    is_cuda_array,
    touch_driver,
)
from ._core.types import Method

_T = ctypes.POINTER(descriptor.Tensor)
lib.declare(
    {
        # x, weight, bias, out, work, params, info
        "bng_cuda_conv2d": (
            lib.I32,
            [_T, _T, _T, _T, _T, ctypes.POINTER(descriptor.Conv2dParams), ctypes.POINTER(descriptor.OpInfo)],
            True,
        ),
        # n, c, h, w, out
        "bng_cuda_conv2d_workspace": (
            lib.I32,
            [lib.I64, lib.I64, lib.I64, lib.I64, ctypes.POINTER(ctypes.c_int64)],
            True,
        ),
    }
)


def quantize(
    x: object, block_size: int | None, method: Method, check_finite: bool, device: str
) -> tuple[tuple[int, ...], DeviceArray, DeviceArray]:
    """I2_S-quantize the GPU array ``x``: returns ``(shape, packed, scales)``, both on ``x``'s device.

    ``device`` is ``"cuda"`` (the input's device) or ``"cuda:N"`` (must be it).
    """
    touch_driver()
    x = adopt(x)
    fw = framework_of(x)
    check_same_device(device, fw.index)
    shape = tuple(int(d) for d in x.shape)  # type: ignore[attr-defined]
    a = fw.as_float32(x)
    n = fw.numel(a)
    if n == 0:
        raise ValueError(f"x must have at least one element, got shape {shape}")
    plen, nb, ws = ops.packed_len("i2_s", n, 1), ops.num_blocks(n, block_size), ops.cuda_workspace_size(n, block_size)
    packed, scales, work = fw.empty(plen, "uint8"), fw.empty(nb, "float32"), fw.empty(ws, "uint8")
    ops.cuda_quantize(
        fw.index, fw.ptr(a), n, block_size, method, check_finite,
        fw.ptr(packed), plen, fw.ptr(scales), nb, fw.ptr(work), ws, fw.stream(),
    )  # fmt: skip
    return shape, packed, scales


def values(packed: DeviceArray, shape: tuple[int, ...], size: int) -> DeviceArray:
    """The int8 values of I2_S ``packed`` (a GPU array), as a new array of ``shape`` on its device."""
    fw = framework_of(packed)
    out = fw.empty(size, "int8")
    ops.cuda_unpack(fw.index, fw.ptr(packed), fw.numel(packed), fw.ptr(out), size, fw.stream())
    return out.reshape(shape)  # type: ignore[attr-defined]


def dequantize(
    packed: DeviceArray, scales: DeviceArray, block_size: int | None, shape: tuple[int, ...], size: int
) -> DeviceArray:
    """``value * scale`` of I2_S ``packed`` and ``scales`` (GPU arrays), float32 of ``shape`` on their device."""
    fw = framework_of(packed)
    out = fw.empty(size, "float32")
    ops.cuda_dequantize(
        fw.index, fw.ptr(packed), fw.numel(packed), block_size, fw.ptr(scales), fw.numel(scales),
        fw.ptr(out), size, fw.stream(),
    )  # fmt: skip
    return out.reshape(shape)  # type: ignore[attr-defined]


def to_device(like: DeviceArray, a: np.ndarray) -> DeviceArray:
    """A copy of host array ``a`` on the device of GPU array ``like``, with ``like``'s framework."""
    return _to_device(framework_of(like), a)


def to_gpu(a: np.ndarray | DeviceArray, index: int) -> DeviceArray:
    """A copy of ``a`` (a host array, or a GPU array on another device) on GPU ``index``.

    A GPU array keeps its framework (``a`` itself when already there); a host
    array becomes a torch CUDA tensor (a CuPy array when torch is not
    installed). ``RuntimeError`` with the reason when no CUDA GPU can be used.
    """
    touch_driver()
    if is_cuda_array(a):
        fw = framework_of(a)
        if fw.index == index:
            return a
        if fw.name == "torch":
            return a.to(f"cuda:{index}")  # type: ignore[attr-defined]
        with fw.lib.cuda.Device(index):  # type: ignore[attr-defined]
            return fw.lib.asarray(a)  # type: ignore[attr-defined]
    from .cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"cuda: cannot move a tensor to cuda:{index}: {reason}")
    host = np.ascontiguousarray(a)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        return _torch_copy(torch, host, f"cuda:{index}")
    try:
        import cupy
    except ImportError:
        raise TypeError("moving a tensor to a CUDA device needs torch or cupy installed") from None
    with cupy.cuda.Device(index):
        return cupy.asarray(host)


def _torch_copy(torch: ModuleType, a: np.ndarray, device: object) -> DeviceArray:
    """A copy of host array ``a`` on torch's ``device``.

    ``torch.from_numpy`` warns about a read-only array (a weight's codes, say) even though the copy
    to the device never writes it: such an array is copied on the host first.
    """
    return torch.from_numpy(np.require(a, requirements="CW")).to(device)


def _to_device(fw: object, a: np.ndarray) -> DeviceArray:
    """A copy of host array ``a`` on the framework's device."""
    if fw.name == "torch":  # type: ignore[attr-defined]
        return _torch_copy(fw.lib, a, fw.device)  # type: ignore[attr-defined]
    with fw.device:  # type: ignore[attr-defined]
        return fw.lib.asarray(a)  # type: ignore[attr-defined]


class ConvCall(NamedTuple):
    """The device operands of one convolution: x's framework, x as float32, bias, out, workspace, shapes."""

    fw: Framework
    x: DeviceArray
    bias: DeviceArray | None
    out: DeviceArray
    work: DeviceArray
    x_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]


def conv_call(x: DeviceArray, w_shape: tuple[int, ...], bias: object, stride: tuple[int, int],
               padding: tuple[int, int, int, int], dilation: tuple[int, int]) -> ConvCall:  # fmt: skip
    """Check ``bias``'s device and shape and allocate the output and workspace on ``x``'s device."""
    touch_driver()
    fw = framework_of(x)
    a = _oom(fw, lambda: fw.as_float32(x), "x as contiguous float32")
    n, c, h, wd = (int(v) for v in a.shape)  # type: ignore[attr-defined]
    o, _, kh, kw = w_shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = stride, padding, dilation
    ho = max((h + pt + pb - dh * (kh - 1) - 1) // sh + 1, 0)
    wo = max((wd + pl + pr - dw * (kw - 1) - 1) // sw + 1, 0)
    b = None
    if bias is not None:
        if is_cuda_array(bias):
            bf = framework_of(adopt(bias))
            if bf.index != fw.index:
                raise ValueError(f"bias is on cuda:{bf.index} and x on cuda:{fw.index}: tensors on two different GPUs")
            b = bf.as_float32(adopt(bias))
        else:
            b = _to_device(fw, np.asarray(bias, np.float32))
        if tuple(b.shape) != (o,):  # type: ignore[attr-defined]
            raise ValueError(f"bias must have shape (O,) = ({o},), got {tuple(b.shape)}")  # type: ignore[attr-defined]
    out = _empty(fw, n * o * ho * wo, "float32", "conv2d_quantized's output")
    size = ctypes.c_int64()
    lib.call("bng_cuda_conv2d_workspace", n, c, h, wd, ctypes.byref(size))
    work = _empty(fw, size.value, "uint8", "conv2d_quantized's workspace")
    return ConvCall(fw, a, b, out, work, (n, c, h, wd), (n, o, ho, wo))


def conv2d(
    x: DeviceArray,
    packed: DeviceArray,
    scales: DeviceArray,
    w_shape: tuple[int, ...],
    block_size: int | None,
    bias: object,
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
    act_bits: int | None,
    check_finite: bool,
) -> tuple[DeviceArray, ops.ConvInfo]:
    """Convolution of the GPU array ``x`` (N, C, H, W) with an I2_S weight on ``x``'s device and stream.

    ``act_bits`` 8: W1.58A8 (the CPU's bits); None: float32 activations.

    ``packed`` and ``scales`` are the weight's arrays (of shape ``w_shape``,
    (O, C/groups, kH, kW)) on ``x``'s device.

    Returns ``(out, info)``, ``out`` float32 (N, O, Ho, Wo) of ``x``'s framework.
    ``bias``: None, a host array (copied) or a GPU array on ``x``'s device.
    """
    k = conv_call(x, w_shape, bias, stride, padding, dilation)
    fw, o = k.fw, w_shape[0]
    dev, stream = fw.index, fw.stream()
    p = ops._conv_params(stride, padding, dilation, groups, act_bits or 0, 0, 1 if check_finite else 0)
    pw = framework_of(packed)
    xt = descriptor.device(fw.ptr(k.x), fw.nbytes(k.x), "float32", k.x_shape, dev, stream=stream)
    wdesc = descriptor.device(pw.ptr(packed), pw.nbytes(packed), "i2_s", w_shape, dev,
                              scales=pw.ptr(scales), n_scales=pw.numel(scales), block_size=block_size,
                              stream=stream)  # fmt: skip
    bt = None
    if k.bias is not None:
        bt = ctypes.byref(descriptor.device(fw.ptr(k.bias), fw.nbytes(k.bias), "float32", (o,), dev, stream=stream))
    ot = descriptor.device(fw.ptr(k.out), fw.nbytes(k.out), "float32", k.out_shape, dev, stream=stream)
    nw = fw.numel(k.work)
    kt = descriptor.device(fw.ptr(k.work), nw, "uint8", (nw,), dev, stream=stream)
    info = descriptor.OpInfo(descriptor.OP_INFO_V1)
    lib.call("bng_cuda_conv2d", ctypes.byref(xt), ctypes.byref(wdesc), bt, ctypes.byref(ot), ctypes.byref(kt),
             ctypes.byref(p), ctypes.byref(info))  # fmt: skip
    return k.out.reshape(k.out_shape), ops.ConvInfo("im2col", info.kernel.decode())  # type: ignore[attr-defined]


def _empty(fw: object, n: int, dtype: str, what: str) -> DeviceArray:
    """``fw.empty(n, dtype)``; the framework's out-of-memory error becomes ``MemoryError`` naming ``what``."""
    return _oom(fw, lambda: fw.empty(n, dtype), f"{what} ({n} x {dtype})")  # type: ignore[attr-defined]


def _oom(fw: object, make: Callable[[], DeviceArray], what: str) -> DeviceArray:
    """``make()``; the framework's out-of-memory error becomes ``MemoryError`` naming ``what``."""
    try:
        return make()
    except Exception as e:
        if "OutOfMemory" in type(e).__name__ or "out of memory" in str(e).lower():
            raise MemoryError(f"cuda: out of memory on cuda:{fw.index} allocating {what}: {e}") from e  # type: ignore[attr-defined]
        raise
