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
  for the copy); ``t.to("tl1")`` needs ``t.cpu()`` first.

Bit-exactness: both paths compute the absmean scale as the float64 sum of
|x| divided by the count in float64 and rounded once to float32 (see
DESIGN.md: the float32 does not depend on the summation order), the absmax
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
import re
from typing import Any

import numpy as np

from . import _lib
from ._arrays import as_float32, is_torch_tensor
from ._ternary import METHODS, TernaryTensor, is_cuda_array, num_blocks, packed_len

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

_U64 = ctypes.c_uint64
_I32, _I64, _STR = _lib.I32, _lib.I64, _lib.STR
_PI64 = ctypes.POINTER(ctypes.c_int64)
_PF64 = ctypes.POINTER(ctypes.c_double)

_lib.declare(
    {
        "bng_cuda_status": (_I32, [_STR, _I64], True),
        "bng_cuda_ptx_info": (_I32, [_STR, _I64], True),
        "bng_cuda_pool_stats": (_I32, [_STR, _I64], True),
        "bng_cuda_plan": (_I32, [_I64, _I64, _STR, _I64], True),
        "bng_cuda_device_name": (_I32, [_I32, _STR, _I64], True),
        "bng_cuda_mem_info": (_I32, [_I32, _PI64, _PI64], True),
        "bng_cuda_empty_cache": (_I32, [], True),
        "bng_cuda_workspace_size": (_I32, [_I64, _I64, _PI64], True),
        # dev, x, n, block_size, method, check_finite, packed, packed_len, scales, n_scales, work, work_len, stream
        "bng_cuda_quantize_i2s": (
            _I32,
            [_I32, _U64, _I64, _I64, _I32, _I32, _U64, _I64, _U64, _I64, _U64, _I64, _U64],
            True,
        ),
        # dev, x (host), n, block_size, method, check_finite, packed (host), packed_len, scales (host), n_scales
        "bng_cuda_quantize_i2s_host": (
            _I32,
            [_I32, _lib.PTR, _I64, _I64, _I32, _I32, _lib.PTR, _I64, _lib.PTR, _I64],
            True,
        ),
        # dev, packed, packed_len, out (int8), n, stream
        "bng_cuda_unpack_i2s": (_I32, [_I32, _U64, _I64, _U64, _I64, _U64], True),
        # dev, packed, packed_len, block_size, scales, n_scales, out (float32), n, stream
        "bng_cuda_dequantize_i2s": (_I32, [_I32, _U64, _I64, _I64, _U64, _I64, _U64, _I64, _U64], True),
        # as bng_cuda_quantize_i2s without check_finite, then repeat, out ms
        "bng_cuda_time_quantize": (
            _I32,
            [_I32, _U64, _I64, _I64, _I32, _U64, _I64, _U64, _I64, _U64, _I64, _U64, _I64, _PF64],
            True,
        ),
        # dev, dst, src, nbytes, stream, repeat, out ms
        "bng_cuda_time_copy": (_I32, [_I32, _U64, _U64, _I64, _U64, _I64, _PF64], True),
    }
)

_driver_touched = False
"""True once a call may have loaded the driver (empty_cache at exit only then)."""


def _json_call(name: str, *args: Any, size: int = 16384) -> Any:
    buf = ctypes.create_string_buffer(size)
    _lib.call(name, *args, buf, len(buf))
    return json.loads(buf.value.decode())


def _status() -> dict[str, Any]:
    global _driver_touched
    _driver_touched = True
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


def _index(device: Any) -> int:
    """Device ordinal of an int, ``"cuda"`` (0) or ``"cuda:N"``."""
    if isinstance(device, (bool, np.bool_)):
        raise TypeError(f"device must be an int or 'cuda:N', got {device!r}")
    if isinstance(device, (int, np.integer)):
        if device < 0:
            raise ValueError(f"device index must be >= 0, got {device}")
        return int(device)
    if isinstance(device, str):
        if device == "cuda":
            return 0
        m = re.fullmatch(r"cuda:(\d+)", device)
        if m:
            return int(m.group(1))
        raise ValueError(f"device must be 'cuda' or 'cuda:N', got {device!r}")
    raise TypeError(f"device must be an int or 'cuda:N', got {type(device).__name__}")


def device_name(device: int | str = 0) -> str:
    """The GPU's name, e.g. ``"NVIDIA H100 80GB HBM3"``.

    Raises ``RuntimeError`` without driver or GPU, ``ValueError`` for an index
    out of range.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> cuda.device_name(0) if cuda.is_available() else "no GPU"  # doctest: +ELLIPSIS
        '...'
    """
    global _driver_touched
    i = _index(device)
    _driver_touched = True
    buf = ctypes.create_string_buffer(512)
    _lib.call("bng_cuda_device_name", i, buf, len(buf))
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
    global _driver_touched
    i = _index(device)
    _driver_touched = True
    free, total = ctypes.c_int64(), ctypes.c_int64()
    _lib.call("bng_cuda_mem_info", i, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)


def empty_cache() -> None:
    """Free the device buffers and streams that host-input calls keep for reuse.

    Buffers of calls still running are left alone. A no-op before the first
    GPU call; runs at interpreter exit too.

    Example:
        >>> import bitnet_go.cuda as cuda
        >>> cuda.empty_cache()
    """
    if _driver_touched:
        _lib.call("bng_cuda_empty_cache")


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


def _plan(n: int, block_size: int | None) -> dict[str, Any]:
    """How ``n`` values in blocks of ``block_size`` run: passes over x, tile, workspace bytes.

    Example:
        >>> _plan(1 << 20, 128)["passes"], _plan(1 << 20, None)["passes"]
        (1, 2)
    """
    return _json_call("bng_cuda_plan", n, block_size or 0)


def _workspace_size(n: int, block_size: int | None) -> int:
    out = ctypes.c_int64()
    _lib.call("bng_cuda_workspace_size", n, block_size or 0, ctypes.byref(out))
    return int(out.value)


@atexit.register
def _at_exit() -> None:
    try:
        empty_cache()
    except Exception:  # the driver may already be shutting down
        pass


# ---------------------------------------------------------------- frameworks


class _Torch:
    """Device arrays of PyTorch: allocation, pointers, current stream."""

    name = "torch"

    def __init__(self, like: Any) -> None:
        import torch

        self.torch = torch
        self.device = like.device

    @property
    def index(self) -> int:
        return int(self.device.index if self.device.index is not None else self.torch.cuda.current_device())

    def stream(self) -> int:
        return int(self.torch.cuda.current_stream(self.device).cuda_stream)

    def empty(self, n: int, dtype: str) -> Any:
        return self.torch.empty(n, dtype=getattr(self.torch, dtype), device=self.device)

    @staticmethod
    def ptr(a: Any) -> int:
        return int(a.data_ptr())

    @staticmethod
    def numel(a: Any) -> int:
        return int(a.numel())

    def as_float32(self, x: Any) -> Any:
        t = x.detach()
        if t.is_complex():
            raise TypeError(f"x must be real, got complex dtype {t.dtype}")
        if t.dtype != self.torch.float32:
            t = t.float()
        return t.contiguous()


class _CuPy:
    """Device arrays of CuPy: allocation, pointers, current stream."""

    name = "cupy"

    def __init__(self, like: Any) -> None:
        import cupy

        self.cupy = cupy
        self.dev = like.device

    @property
    def index(self) -> int:
        return int(self.dev.id)

    def stream(self) -> int:
        with self.dev:
            return int(self.cupy.cuda.get_current_stream().ptr)

    def empty(self, n: int, dtype: str) -> Any:
        with self.dev:
            return self.cupy.empty(n, dtype=dtype)

    @staticmethod
    def ptr(a: Any) -> int:
        return int(a.data.ptr)

    @staticmethod
    def numel(a: Any) -> int:
        return int(a.size)

    def as_float32(self, x: Any) -> Any:
        if x.dtype.kind not in "biuf":
            raise TypeError(f"x must be a real numeric array, got {x.dtype}")
        if x.dtype == np.float32 and x.flags.c_contiguous:
            return x
        with self.dev:
            return self.cupy.ascontiguousarray(x, dtype=self.cupy.float32)


def _framework_of(a: Any) -> _Torch | _CuPy:
    if is_torch_tensor(a):
        return _Torch(a)
    if type(a).__module__.split(".")[0] == "cupy":
        return _CuPy(a)
    raise TypeError(f"expected a torch tensor or CuPy array, got {type(a).__name__}")


def _adopt(x: Any) -> Any:
    """A torch tensor or CuPy array viewing the GPU array x (zero-copy)."""
    if is_torch_tensor(x) or type(x).__module__.split(".")[0] == "cupy":
        return x
    cai = getattr(x, "__cuda_array_interface__", None)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        if cai is not None:
            t = torch.as_tensor(x)  # zero-copy, on the device of the data
            _wait_cai_stream(torch, t, cai)
            return t
        return torch.from_dlpack(x)
    try:
        import cupy
    except ImportError:
        raise TypeError(
            f"x is a GPU array of type {type(x).__name__}: bitnet_go.cuda needs torch or cupy "
            f"installed to allocate its results"
        ) from None
    return cupy.asarray(x) if cai is not None else cupy.from_dlpack(x)


def _wait_cai_stream(torch: Any, t: Any, cai: dict[str, Any]) -> None:
    """Order torch's current stream after the stream a __cuda_array_interface__ v3 names."""
    s = cai.get("stream")
    if s is None:
        return  # no synchronisation required
    if s == 0:
        raise ValueError("__cuda_array_interface__ 'stream' 0 is not allowed (v3): use None, 1, 2 or a stream")
    current = torch.cuda.current_stream(t.device)
    if int(s) != current.cuda_stream:
        current.wait_stream(torch.cuda.ExternalStream(int(s), device=t.device))


def _check_device(device: str, index: int) -> None:
    if device.startswith("cuda:") and int(device[5:]) != index:
        raise ValueError(
            f"x is on cuda:{index} but device={device!r}: move it first (e.g. x.to({device!r})) or pass device='cuda'"
        )


# ---------------------------------------------------------------- hooks of _ternary


def _quantize_i2s(x: Any, *, block_size: int | None, method: str, check_finite: bool, device: str) -> TernaryTensor:
    """``quantize_i2s`` for ``device`` "cuda"/"cuda:N", or "auto" with a GPU array."""
    global _driver_touched
    _driver_touched = True
    if is_cuda_array(x):
        return _quantize_device(_adopt(x), block_size, method, check_finite, device)
    a = as_float32(x, "x")
    if a.size == 0:
        raise ValueError(f"x must have at least one element, got shape {a.shape}")
    n = a.size
    packed = np.empty(packed_len(n), np.uint8)
    scales = np.empty(num_blocks(n, block_size), np.float32)
    _lib.call(
        "bng_cuda_quantize_i2s_host",
        _index(device),
        _lib.ptr(a),
        n,
        block_size or 0,
        METHODS[method],
        1 if check_finite else 0,
        _lib.ptr(packed),
        packed.size,
        _lib.ptr(scales),
        scales.size,
    )
    return TernaryTensor._make("i2_s", a.shape, block_size, method, packed, scales)


def _quantize_device(x: Any, block_size: int | None, method: str, check_finite: bool, device: str) -> TernaryTensor:
    fw = _framework_of(x)
    _check_device(device, fw.index)
    shape = tuple(int(d) for d in x.shape)
    a = fw.as_float32(x)
    n = fw.numel(a)
    if n == 0:
        raise ValueError(f"x must have at least one element, got shape {shape}")
    plen, nb, ws = packed_len(n), num_blocks(n, block_size), _workspace_size(n, block_size)
    packed, scales, work = fw.empty(plen, "uint8"), fw.empty(nb, "float32"), fw.empty(ws, "uint8")
    _lib.call(
        "bng_cuda_quantize_i2s",
        fw.index,
        fw.ptr(a),
        n,
        block_size or 0,
        METHODS[method],
        1 if check_finite else 0,
        fw.ptr(packed),
        plen,
        fw.ptr(scales),
        nb,
        fw.ptr(work),
        ws,
        fw.stream(),
    )
    return TernaryTensor._make("i2_s", shape, block_size, method, packed, scales)


def _check_tensor(t: TernaryTensor) -> _Torch | _CuPy:
    if t.qtype != "i2_s":
        raise ValueError(f"GPU tensors are I2_S, got qtype {t.qtype!r}")
    return _framework_of(t.packed)


def _values(t: TernaryTensor) -> Any:
    """``t.values()`` of a GPU tensor: int8 tensor of ``t.shape`` on its device."""
    fw = _check_tensor(t)
    out = fw.empty(t.size, "int8")
    _lib.call("bng_cuda_unpack_i2s", fw.index, fw.ptr(t.packed), fw.numel(t.packed), fw.ptr(out), t.size, fw.stream())
    return out.reshape(t.shape)


def _dequantize(t: TernaryTensor) -> Any:
    """``t.dequantize()`` of a GPU tensor: float32 tensor of ``t.shape`` on its device."""
    fw = _check_tensor(t)
    out = fw.empty(t.size, "float32")
    _lib.call(
        "bng_cuda_dequantize_i2s",
        fw.index,
        fw.ptr(t.packed),
        fw.numel(t.packed),
        t.block_size or 0,
        fw.ptr(t.scales),
        fw.numel(t.scales),
        fw.ptr(out),
        t.size,
        fw.stream(),
    )
    return out.reshape(t.shape)


def _to_host(arr: Any) -> np.ndarray:
    """A numpy copy of a torch CUDA tensor or CuPy array (waits for the current stream)."""
    if is_torch_tensor(arr):
        return np.ascontiguousarray(arr.detach().cpu().numpy())
    if type(arr).__module__.split(".")[0] == "cupy":
        return np.ascontiguousarray(arr.get())
    raise TypeError(f"expected a torch tensor or CuPy array, got {type(arr).__name__}")


def _device_of(arr: Any) -> str:
    """``"cuda:N"`` for a torch CUDA tensor or CuPy array."""
    return f"cuda:{_framework_of(arr).index}"
