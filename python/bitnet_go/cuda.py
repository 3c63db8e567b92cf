"""NVIDIA GPUs: ``quantize_i2s(..., device="cuda")`` and the CUDA status.

The kernels are CUDA C++ compiled to PTX and embedded in the Go library; the
NVIDIA driver (``libcuda.so.1``) is loaded with dlopen at the first call that
needs it. Importing ``bitnet_go`` or ``bitnet_go.cuda`` never fails on a
machine without a GPU or driver: there :func:`is_available` is False,
:func:`device_count` is 0, :func:`unavailable_reason` says which is missing,
and every call that needs a GPU (``device="cuda"``, :func:`device_name`,
:func:`memory_info`) raises ``RuntimeError`` with that reason. CUDA errors are
``RuntimeError("cuda: <call> failed: <CUDA_ERROR_NAME>: <description>")``;
running out of device memory is ``MemoryError`` with the sizes.

What ``quantize_i2s`` does with each kind of input:

- **Host input** (numpy arrays, lists, CPU torch tensors) with
  ``device="cuda"`` or ``"cuda:N"`` (``"cuda"`` is ``"cuda:0"``): the float32
  values are copied to the GPU through a pool of device buffers, quantized,
  and copied back. The result is an ordinary numpy-backed
  :class:`~bitnet_go.TernaryTensor`, byte for byte the one ``device="cpu"``
  gives. The pool keeps its buffers between calls; :func:`empty_cache` frees
  them (it also runs at exit).
- **GPU input**: torch CUDA tensors, CuPy arrays, and other objects with
  ``__cuda_array_interface__`` or a CUDA DLPack device (those are wrapped
  zero-copy as torch tensors, or CuPy arrays when torch is not installed).
  ``device="auto"`` (the default) and ``"cuda"`` use the input's device;
  ``"cuda:N"`` must name it (``ValueError`` otherwise: move the tensor with
  ``x.to("cuda:N")``). Nothing goes through host memory. float16, bfloat16,
  float64, integer and bool input, and non-contiguous input, are first
  converted by the input's framework (``x.float().contiguous()`` for torch,
  ``cupy.ascontiguousarray(x, dtype=cupy.float32)`` for CuPy: one copy on the
  GPU, float64 rounded to nearest as on the CPU path). ``packed`` (uint8) and
  ``scales`` (float32) of the result are allocated by that framework on that
  device (``torch.empty(..., device=x.device)``), so they follow its memory
  pool and stream rules.
- **Streams**: the kernels are enqueued on the framework's current stream
  for the input's device (``torch.cuda.current_stream(x.device)``,
  ``cupy.cuda.get_current_stream()``), after whatever produced ``x`` there,
  and the call returns without waiting for them, except that
  ``check_finite=True`` (the default) waits for that stream to read back the
  index of the first NaN/Inf (one small device-to-host copy). Pass
  ``check_finite=False`` for a call that never blocks. A tensor on a device
  other than the current one works: the kernels run in that device's primary
  context (the one PyTorch and CuPy use), on the current stream of that
  device.
- **Results on the GPU**: ``t.packed`` and ``t.scales`` are tensors of the
  input's framework; ``t.device`` is ``"cuda:N"``; ``t.values()`` (int8) and
  ``t.dequantize()`` (float32) return tensors of the same framework on the
  same device, of shape ``t.shape``, computed by small GPU kernels on the
  current stream without synchronising (codes are not validated there: a
  code 3, which ``quantize_i2s`` never writes, reads as 2, where the CPU path
  raises ``ValueError``); ``t.cpu()`` gives the numpy-backed tensor (it waits
  for the copy); ``t.to("tl1")`` needs ``t.cpu()`` first. ``t.to("cuda:N")``
  moves a tensor to a GPU (host tensors arrive as torch CUDA tensors, or
  CuPy arrays without torch), ``t.to("cpu")`` is ``t.cpu()``.
- **Convolutions and linear layers**: ``conv2d_quantized``,
  ``linear_quantized`` and frozen ``bitnet_go.nn`` layers take GPU input
  (see :func:`bitnet_go.conv2d_quantized`): ``act_bits=8`` runs W1.58A8
  with the CPU path's bits (per-sample int8 activations, int32 sums with
  dp4a, the same float folds); ``act_bits=None`` float32 activations,
  within float32 rounding of ``F.conv2d(x, w.dequantize())``. The weight
  stays 2 bits a value on the GPU (``w.to("cuda")``, or a host weight moved
  once and kept); tensors on two GPUs are a ``ValueError``.

Bit-exactness: both paths compute the absmean scale as the float64 sum of
|x| divided by the count in float64 and rounded once to float32 (the
float32 does not depend on the summation order), the absmax
scale as max|x|, and the codes with IEEE float32 division semantics; the GPU
sums in a fixed order, so its results are also the same from run to run.

All functions are thread-safe; a call releases the GIL while the Go library
runs, and concurrent calls use separate pooled buffers and streams.

Example:
    >>> import numpy as np, bitnet_go, bitnet_go.cuda
    >>> x = np.linspace(-1, 1, 300, dtype=np.float32)
    >>> dev = "cuda" if bitnet_go.cuda.is_available() else "cpu"
    >>> t = bitnet_go.quantize_i2s(x, block_size=128, device=dev)
    >>> t.packed.tobytes() == bitnet_go.quantize_i2s(x, block_size=128).packed.tobytes()
    True
"""

from __future__ import annotations

import atexit
import ctypes
import json
from typing import Any

from ._core import lib
from ._core.devices import DriverState, device_index, touch_driver

__all__ = [
    "device_count",
    "device_name",
    "driver_version",
    "empty_cache",
    "is_available",
    "memory_info",
    "ptx_info",
    "unavailable_reason",
]

_I32, _I64, _STR = lib.I32, lib.I64, lib.STR
_PI64 = ctypes.POINTER(ctypes.c_int64)

lib.declare(
    {
        "bng_cuda_status": (_I32, [_STR, _I64], True),
        "bng_cuda_ptx_info": (_I32, [_STR, _I64], True),
        "bng_cuda_pool_stats": (_I32, [_STR, _I64], True),
        "bng_cuda_device_name": (_I32, [_I32, _STR, _I64], True),
        "bng_cuda_mem_info": (_I32, [_I32, _PI64, _PI64], True),
        "bng_cuda_empty_cache": (_I32, [], True),
    }
)


def _json_call(name: str, *args: object, size: int = 16384) -> dict[str, Any]:
    buf = ctypes.create_string_buffer(size)
    lib.call(name, *args, buf, len(buf))
    return dict(json.loads(buf.value.decode()))


def _status() -> dict[str, Any]:
    touch_driver()
    return _json_call("bng_cuda_status")


def is_available() -> bool:
    """True when the NVIDIA driver loads and sees at least one CUDA GPU.

    The first call loads the driver (``cuInit``); it never raises.

    Example:
        >>> import bitnet_go.cuda
        >>> bitnet_go.cuda.is_available() in (True, False)
        True
    """
    return bool(_status()["available"])


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used here (no driver, no GPU, ...), or None when it can.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> (cuda.unavailable_reason() is None) == cuda.is_available()
        True
    """
    s = _status()
    return None if s["available"] else str(s["reason"])


def driver_version() -> int | None:
    """The CUDA version of the driver (e.g. 13000 for 13.0), or None without a driver.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> v = cuda.driver_version()
        >>> v is None or v >= 1000
        True
    """
    v = int(_status()["driver_version"])
    return v or None


def device_count() -> int:
    """Number of CUDA GPUs visible (``CUDA_VISIBLE_DEVICES`` applies); 0 without driver or GPU.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> cuda.device_count() >= 0
        True
    """
    return int(_status()["device_count"])


def device_name(device: int | str = 0) -> str:
    """The GPU's name, e.g. ``"NVIDIA H100 80GB HBM3"``.

    Raises ``RuntimeError`` without driver or GPU, ``ValueError`` for an index
    out of range.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> cuda.device_name(0) if cuda.is_available() else "no GPU"  # doctest: +ELLIPSIS
        '...'
    """
    i = device_index(device)
    touch_driver()
    buf = ctypes.create_string_buffer(512)
    lib.call("bng_cuda_device_name", i, buf, len(buf))
    return buf.value.decode("utf-8", "replace")


def memory_info(device: int | str = 0) -> tuple[int, int]:
    """``(free, total)`` device memory in bytes, as the driver reports it (``cuMemGetInfo``).

    Free memory counts every user of the GPU (PyTorch's cache included).

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> free, total = cuda.memory_info() if cuda.is_available() else (0, 0)
        >>> 0 <= free <= total
        True
    """
    i = device_index(device)
    touch_driver()
    free, total = ctypes.c_int64(), ctypes.c_int64()
    lib.call("bng_cuda_mem_info", i, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)


def empty_cache() -> None:
    """Free the device buffers and streams that host-input calls keep for reuse.

    Buffers of calls still running are left alone. A no-op before the first
    GPU call; runs at interpreter exit too.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> cuda.empty_cache()
    """
    if DriverState.touched:
        lib.call("bng_cuda_empty_cache")


def ptx_info() -> dict[str, Any]:
    """Facts about the embedded PTX module (needs no GPU).

    Keys: ``version`` (PTX ISA), ``target`` (e.g. ``"sm_75"``), ``entries``
    (kernel names), ``source_sha256``, ``compiler``, ``bytes``.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> info = cuda.ptx_info()
        >>> info["target"], "bng_i2s_fused_absmean" in info["entries"]
        ('sm_75', True)
    """
    return _json_call("bng_cuda_ptx_info")


def _pool_stats() -> dict[str, Any]:
    """Statistics of the host-input pool (idle/in-use buffers and streams)."""
    return _json_call("bng_cuda_pool_stats")


@atexit.register
def _at_exit() -> None:
    try:
        empty_cache()
    except Exception:  # the driver may already be shutting down
        pass
