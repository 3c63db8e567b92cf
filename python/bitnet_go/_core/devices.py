"""GPU arrays: telling them apart, adopting them, their frameworks, device strings.

A GPU array here is a torch CUDA tensor or a CuPy array (what bitnet_go
allocates its GPU results with); other objects with
``__cuda_array_interface__`` or a CUDA DLPack device are adopted as one of
those, zero-copy (:func:`adopt`). torch and CuPy are imported only when such
an array is in hand.

Example:
    >>> import numpy as np
    >>> is_cuda_array(np.zeros(3)), resolve_device(np.zeros(3), "auto"), device_index("cuda:1")
    (False, 'cpu', 1)
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType
from typing import Any

import numpy as np

from .arrays import is_torch_tensor
from .types import Device

DeviceArray = object
"""A torch CUDA tensor or a CuPy array (typed loosely: neither library is a dependency)."""


class DriverState:
    """Whether a call may have loaded the CUDA driver (``bitnet_go.cuda.empty_cache`` at exit runs only then)."""

    touched = False


def touch_driver() -> None:
    """Record that the CUDA driver may be loaded from now on.

    Example:
        >>> touch_driver(); DriverState.touched
        True
    """
    DriverState.touched = True


def is_cupy_array(x: object) -> bool:
    """True for a CuPy array (checked without importing CuPy).

    Example:
        >>> is_cupy_array(np.zeros(2))
        False
    """
    return type(x).__module__.split(".")[0] == "cupy"


def is_cuda_array(x: object) -> bool:
    """True for arrays that live on an NVIDIA GPU (CUDA array interface or DLPack).

    Example:
        >>> is_cuda_array(np.zeros(3))
        False
    """
    if type(x) is np.ndarray:  # the common case, answered before any attribute lookup
        return False
    if is_torch_tensor(x):
        # Not the interface: torch raises RuntimeError for it on tensors that
        # require grad.
        return bool(x.is_cuda)  # type: ignore[attr-defined]
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and not isinstance(x, np.ndarray):
        try:
            return int(dl()[0]) in (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def resolve_device(x: object, device: Device) -> str:
    """Resolve a ``device`` argument to ``"cpu"`` or ``"cuda"`` / ``"cuda:N"``.

    Example:
        >>> resolve_device(np.zeros(2), "auto")
        'cpu'
    """
    if not isinstance(device, str):
        raise TypeError(f"device must be a str ('auto', 'cpu', 'cuda' or 'cuda:N'), got {type(device).__name__}")
    if device == "auto":
        return "cuda" if is_cuda_array(x) else "cpu"
    if device == "cpu":
        if is_cuda_array(x):
            raise ValueError(
                "x is a GPU array but device='cpu': pass device='cuda' (or 'auto'), or copy it to the host"
            )
        return "cpu"
    if device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit()):
        return device
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}")


def device_index(device: int | str) -> int:
    """Device ordinal of an int, ``"cuda"`` (0) or ``"cuda:N"``.

    Example:
        >>> device_index("cuda"), device_index(2)
        (0, 2)
    """
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


def check_same_device(device: str, index: int) -> None:
    """``ValueError`` unless ``device`` ("cuda" or "cuda:N") may run on an input on device ``index``.

    Example:
        >>> check_same_device("cuda", 3); check_same_device("cuda:3", 3)
    """
    if device.startswith("cuda:") and int(device[5:]) != index:
        raise ValueError(
            f"x is on cuda:{index} but device={device!r}: move it first (e.g. x.to({device!r})) or pass device='cuda'"
        )


# ---------------------------------------------------------------- frameworks


class Framework:
    """What the GPU paths need of an array library: allocation, pointers, current stream.

    ``lib`` is the library (module ``name``, imported when a framework is
    made, that is when one of its arrays is in hand), ``device`` the
    library's device object of the array it was made for.
    """

    name = ""

    def __init__(self, like: DeviceArray) -> None:
        self.lib: ModuleType = importlib.import_module(self.name)
        self.device: Any = like.device  # type: ignore[attr-defined]

    @property
    def index(self) -> int:
        """The device ordinal."""
        raise NotImplementedError

    def stream(self) -> int:
        """The framework's current stream on this device (a ``CUstream`` as an int)."""
        raise NotImplementedError

    def empty(self, n: int, dtype: str) -> DeviceArray:
        """A new 1-D array of ``n`` elements of ``dtype`` (a numpy dtype name) on this device."""
        raise NotImplementedError

    def ptr(self, a: DeviceArray) -> int:
        """The device address of ``a``'s data."""
        raise NotImplementedError

    def numel(self, a: DeviceArray) -> int:
        """The number of elements of ``a``."""
        raise NotImplementedError

    def nbytes(self, a: DeviceArray) -> int:
        """The bytes of ``a``'s data."""
        raise NotImplementedError

    def as_float32(self, x: DeviceArray) -> DeviceArray:
        """``x`` as a C-contiguous float32 array on its device (one copy if needed)."""
        raise NotImplementedError


class Torch(Framework):
    """Device arrays of PyTorch."""

    name = "torch"

    @property
    def index(self) -> int:
        return int(self.device.index if self.device.index is not None else self.lib.cuda.current_device())

    def stream(self) -> int:
        return int(self.lib.cuda.current_stream(self.device).cuda_stream)

    def empty(self, n: int, dtype: str) -> DeviceArray:
        return self.lib.empty(n, dtype=getattr(self.lib, dtype), device=self.device)

    def ptr(self, a: DeviceArray) -> int:
        return int(a.data_ptr())  # type: ignore[attr-defined]

    def numel(self, a: DeviceArray) -> int:
        return int(a.numel())  # type: ignore[attr-defined]

    def nbytes(self, a: DeviceArray) -> int:
        return int(a.numel()) * int(a.element_size())  # type: ignore[attr-defined]

    def as_float32(self, x: DeviceArray) -> DeviceArray:
        t = x.detach()  # type: ignore[attr-defined]
        if t.is_complex():
            raise TypeError(f"x must be real, got complex dtype {t.dtype}")
        if t.dtype != self.lib.float32:
            t = t.float()
        return t.contiguous()


class CuPy(Framework):
    """Device arrays of CuPy."""

    name = "cupy"

    @property
    def index(self) -> int:
        return int(self.device.id)

    def stream(self) -> int:
        with self.device:
            return int(self.lib.cuda.get_current_stream().ptr)

    def empty(self, n: int, dtype: str) -> DeviceArray:
        with self.device:
            return self.lib.empty(n, dtype=dtype)

    def ptr(self, a: DeviceArray) -> int:
        return int(a.data.ptr)  # type: ignore[attr-defined]

    def numel(self, a: DeviceArray) -> int:
        return int(a.size)  # type: ignore[attr-defined]

    def nbytes(self, a: DeviceArray) -> int:
        return int(a.nbytes)  # type: ignore[attr-defined]

    def as_float32(self, x: DeviceArray) -> DeviceArray:
        dt = x.dtype  # type: ignore[attr-defined]
        if dt.kind not in "biuf":
            raise TypeError(f"x must be a real numeric array, got {dt}")
        if dt == np.float32 and x.flags.c_contiguous:  # type: ignore[attr-defined]
            return x
        with self.device:
            return self.lib.ascontiguousarray(x, dtype=self.lib.float32)


def framework_of(a: DeviceArray) -> Framework:
    """The framework of a torch tensor or CuPy array (``TypeError`` for anything else).

    Example:
        >>> framework_of(np.zeros(1))
        Traceback (most recent call last):
        TypeError: expected a torch tensor or CuPy array, got ndarray
    """
    if is_torch_tensor(a):
        return Torch(a)
    if is_cupy_array(a):
        return CuPy(a)
    raise TypeError(f"expected a torch tensor or CuPy array, got {type(a).__name__}")


def adopt(x: object) -> DeviceArray:
    """A torch tensor or CuPy array viewing the GPU array ``x`` (zero-copy).

    torch is preferred when installed; ``TypeError`` when neither is.
    """
    if is_torch_tensor(x) or is_cupy_array(x):
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


def _wait_cai_stream(torch: object, t: DeviceArray, cai: dict[str, object]) -> None:
    """Order torch's current stream after the stream a __cuda_array_interface__ v3 names."""
    s = cai.get("stream")
    if s is None:
        return  # no synchronisation required
    if s == 0:
        raise ValueError("__cuda_array_interface__ 'stream' 0 is not allowed (v3): use None, 1, 2 or a stream")
    tc = torch.cuda  # type: ignore[attr-defined]
    current = tc.current_stream(t.device)  # type: ignore[attr-defined]
    if int(s) != current.cuda_stream:  # type: ignore[call-overload]
        current.wait_stream(tc.ExternalStream(int(s), device=t.device))  # type: ignore[call-overload,attr-defined]


def to_host(arr: DeviceArray) -> np.ndarray:
    """A numpy copy of a torch CUDA tensor or CuPy array (waits for the current stream).

    Example:
        >>> to_host([1])
        Traceback (most recent call last):
        TypeError: expected a torch tensor or CuPy array, got list
    """
    if is_torch_tensor(arr):
        return np.ascontiguousarray(arr.detach().cpu().numpy())  # type: ignore[attr-defined]
    if is_cupy_array(arr):
        return np.ascontiguousarray(arr.get())  # type: ignore[attr-defined]
    raise TypeError(f"expected a torch tensor or CuPy array, got {type(arr).__name__}")


def device_of(arr: DeviceArray) -> str:
    """``"cuda:N"`` for a torch CUDA tensor or CuPy array."""
    return f"cuda:{framework_of(arr).index}"
