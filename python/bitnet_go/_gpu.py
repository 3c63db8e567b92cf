"""The GPU side of quantized tensors: I2_S ops on device arrays, results as raw device buffers.

The quantized-tensor classes wrap what these return; this module knows
nothing of them (it imports only the core). Outputs are allocated by the
input's framework (torch or CuPy) on the input's device, and the kernels
are enqueued on that framework's current stream there (see
``bitnet_go.cuda`` for the user-facing contract).
"""

from __future__ import annotations

from ._core import ops
from ._core.devices import DeviceArray, adopt, check_same_device, framework_of, touch_driver
from ._core.types import Method


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
