"""Turning user input into the C-contiguous float32 arrays the kernels take."""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

MAX_ELEMENTS = 1 << 60
"""Largest tensor the kernels accept (matches gokern/ternary.MaxElements)."""


_TORCH_TYPES: dict[type, bool] = {}
""":func:`is_torch_tensor`'s answer by type (a call takes 0.05 us against 0.3 for the test; the
calls of an op with a torch input ask it four times)."""


def is_torch_tensor(x: object) -> bool:
    """True for a ``torch.Tensor`` (checked without importing torch: a type of a ``torch`` module
    with ``detach`` and ``device``).

    Example:
        >>> is_torch_tensor(np.zeros(2))
        False
    """
    t = type(x)
    known = _TORCH_TYPES.get(t)
    if known is None:
        known = _TORCH_TYPES[t] = (
            t.__module__.split(".")[0] == "torch" and hasattr(t, "detach") and hasattr(t, "device")
        )
    return known


def as_host(x: ArrayLike, name: str, *, float32: bool = False) -> np.ndarray:
    """Return ``x`` as a numpy array over host memory, without a dtype conversion of its own.

    CPU torch tensors are read through ``.numpy()`` (bfloat16, which numpy lacks, converted to
    float32 in torch; with ``float32``, every floating type, and complex tensors are a
    ``TypeError``, as :func:`as_float32` wants). A torch tensor on another device is a
    ``ValueError``, a masked array (``numpy.ma``: the mask would be ignored) a ``TypeError``.

    Example:
        >>> as_host([1, 2], "x").dtype.kind, as_host(np.int32([1]), "zero_point").dtype
        ('i', dtype('int32'))
    """
    if type(x) is np.ndarray:  # the common case, before the checks it passes anyway
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array: masks are not supported (the masked entries would be used as they are); "
            f"pass {name}.filled(value) or np.asarray({name}) if that is what you mean"
        )
    if is_torch_tensor(x):
        t = x.detach() if x.requires_grad else x  # type: ignore[attr-defined]  # .numpy() refuses grad
        if not t.is_cpu:
            raise ValueError(
                f"{name} is a torch tensor on {t.device}; this function takes host memory (move it with .cpu())"
            )
        dt = t.dtype
        if dt != _torch_float32():  # float32, the common case, passes as it is
            if float32 and t.is_complex():
                raise TypeError(f"{name} must be real, got complex dtype {dt}")
            if dt.is_floating_point and (float32 or str(dt) == "torch.bfloat16"):
                t = t.float()  # bfloat16/float16/float64 -> float32 in torch (numpy has no bfloat16)
        x = t.numpy()
    return np.asarray(x)


def as_float32(x: ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a C-contiguous float32 ndarray, copying only if needed.

    Accepts anything :func:`numpy.asarray` accepts, CPU torch tensors included,
    of a real dtype (bool, integers, floats; a float64 beyond float32's range
    becomes +-Inf without a warning, as ``torch.Tensor.float()``). Complex, object and string input,
    and masked arrays (``numpy.ma``: the mask would be ignored), are a
    ``TypeError``; a torch tensor on another device is a ``ValueError`` (see :func:`as_host`).

    Example:
        >>> as_float32([1, 2, 3], "x").dtype
        dtype('float32')
    """
    a = as_host(x, name, float32=True)
    check_real(a, name)
    if a.size > MAX_ELEMENTS:
        raise ValueError(f"{name} has {a.size} elements, more than the supported {MAX_ELEMENTS}")
    if a.dtype == np.float32:
        return np.asarray(a, order="C")  # copies only if needed; keeps 0-d shape
    with np.errstate(over="ignore"):  # a float64 beyond float32's range is +-Inf, as torch's .float() gives it
        return np.asarray(a, dtype=np.float32, order="C")


@functools.cache
def _torch_float32() -> object:
    """``torch.float32``, looked up once (torch is imported only when a torch tensor comes)."""
    import torch  # only reached with a torch tensor in hand

    return torch.float32


def check_real(a: np.ndarray, name: str) -> None:
    """Raise ``TypeError`` unless ``a`` has a real numeric (or bool) dtype.

    Example:
        >>> check_real(np.zeros(1, np.complex64), "x")
        Traceback (most recent call last):
        TypeError: x must be a real numeric array, got complex64
    """
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got {a.dtype}")


def check_int(v: object, name: str, *, or_none: bool = False) -> int:
    """Return ``v`` as a Python int; ``bool``, floats and other types are ``TypeError``.

    Example:
        >>> check_int(np.int32(-3), "n")
        -3
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int{' or None' if or_none else ''}, got {type(v).__name__} {v!r}")
    return int(v)  # type: ignore[arg-type]


def check_bool(v: object, name: str) -> bool:
    """``v`` if it is a bool (Python or NumPy), else ``TypeError`` (an int, a string such as
    ``"no"`` or None is not taken for one).

    Example:
        >>> check_bool(np.bool_(True), "check_finite")
        True
    """
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__} {v!r}")
    return bool(v)


def check_float(v: object, name: str) -> float:
    """``v`` as a Python float: a real number (an int or a float, Python's or NumPy's); anything
    else, a bool, None or a str included, is a ``TypeError`` naming ``name``, an int too large
    for a float a ``ValueError``.

    Example:
        >>> check_float(np.float32(0.5), "percentile")
        0.5
        >>> check_float("a", "eps")
        Traceback (most recent call last):
        TypeError: eps must be a real number, got str 'a'
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__} {v!r}")
    try:
        return float(v)
    except OverflowError:  # a Python int past float's range
        raise ValueError(f"{name} is too large for a float, got {v}") from None


def check_positive_float32(v: object, name: str) -> float:
    """``v`` as a Python float (:func:`check_float`, unrounded) that is finite and > 0 in float32
    too, the type it is used in (``ValueError`` otherwise: ``1e-50`` is 0 there, ``1e39`` infinite).

    Example:
        >>> check_positive_float32(0.25, "bin_width")
        0.25
        >>> check_positive_float32(1e-50, "eps")
        Traceback (most recent call last):
        ValueError: eps must be finite and > 0 (in float32, as it is used), got 1e-50
    """
    f = check_float(v, name)
    with np.errstate(over="ignore"):
        f32 = np.float32(f)
    if not (np.isfinite(f32) and f32 > 0):
        raise ValueError(f"{name} must be finite and > 0 (in float32, as it is used), got {v!r}")
    return f


def fits_int64(v: int) -> bool:
    """Whether ``v`` can cross the C ABI as an int64 (the Go side checks its range).

    Example:
        >>> fits_int64(2**63), fits_int64(-(2**63))
        (False, True)
    """
    return -(2**63) <= v < 2**63


def check_positive_int(v: object, name: str, *, allow_none: bool = False) -> int | None:
    """Validate an integer argument that must be >= 1 (``None`` if allowed).

    ``bool`` and floats are ``TypeError`` (``2.0`` is not a size); values < 1 are
    ``ValueError``.

    Example:
        >>> check_positive_int(np.int64(4), "block_size")
        4
    """
    if v is None and allow_none:
        return None
    v = check_int(v, name, or_none=allow_none)
    if v < 1:
        raise ValueError(f"{name} must be >= 1, got {v}")
    if v > MAX_ELEMENTS:
        raise ValueError(f"{name} must be <= {MAX_ELEMENTS}, got {v}")
    return int(v)


class Derived:
    """Values derived from arrays, each kept while its array lives.

    ``get(a, key, build)`` returns what ``build()`` returned for the same
    array object ``a`` and ``key`` before, else calls it and keeps the
    result until ``a`` is freed (a weak reference: nothing here keeps ``a``
    alive, and an address that a new array reuses never finds the old
    entry). Meant for immutable arrays, such as a quantized tensor's
    ``packed``: a weight's int8 codes and row sums, its copy on a GPU.

    Example:
        >>> d, a = Derived(), np.arange(3)
        >>> d.get(a, "sum", lambda: int(a.sum())), d.get(a, "sum", lambda: -1)
        (3, 3)
        >>> del a; len(d)
        0
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a weak reference's callback may run under it (a GC)
        self._by_id: dict[int, tuple[weakref.ref[Any], dict[Hashable, object]]] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, a: object, key: Hashable, build: Callable[[], object]) -> Any:  # noqa: ANN401 (what build gives)
        i = id(a)
        with self._lock:
            entry = self._by_id.get(i)
            if entry is not None and entry[0]() is a and key in entry[1]:
                return entry[1][key]
        value = build()  # outside the lock: concurrent first calls may build twice
        with self._lock:
            entry = self._by_id.get(i)
            if entry is None or entry[0]() is not a:
                ref = weakref.ref(a, lambda r, i=i: self._forget(i, r))
                entry = self._by_id[i] = (ref, {})
            return entry[1].setdefault(key, value)

    def _forget(self, i: int, ref: weakref.ref[Any]) -> None:
        with self._lock:
            entry = self._by_id.get(i)
            if entry is not None and entry[0] is ref:  # not a newer array's entry at the same id
                del self._by_id[i]


def immutable(a: object) -> bool:
    """Whether no writable array holds ``a``'s memory: ``a`` and every array it views read-only,
    down to memory of its own or an immutable ``bytes``. A tensor's ``packed`` array made by the
    library is; one that views a caller's writable array is not (its codes may change in place).

    Example:
        >>> w = np.zeros(4, np.int8)
        >>> v = w[:2]; v.setflags(write=False)
        >>> immutable(v), immutable(np.frombuffer(bytes(4), np.int8))
        (False, True)
    """
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return a is None or isinstance(a, bytes)


_weight_ids = itertools.count(1)
_ids = Derived()


def new_weight_id() -> int:
    """A number never returned before in this process, for one array of codes that never changes
    (see :func:`weight_id`; an operand derived once from such an array takes one of its own).

    Example:
        >>> new_weight_id() != new_weight_id()
        True
    """
    return next(_weight_ids)


def vouched_weight_id(a: np.ndarray) -> int:
    """:func:`weight_id` for an array a writable one may reach, whose caller vouches that its codes
    do not change while ``a`` lives: it describes them with a new array object whenever they may
    have changed (a frozen ``bitnet_go.nn`` layer's buffers, by torch's version counters). Must be
    asked before :func:`weight_id` is (that would keep 0 for ``a``).

    Example:
        >>> a = np.zeros(8, np.uint8)
        >>> vouched_weight_id(a) == weight_id(a) > 0, weight_id(np.zeros(8, np.uint8))
        (True, 0)
    """
    return _ids.get(a, "id", new_weight_id)  # type: ignore[no-any-return]


def weight_id(a: np.ndarray) -> int:
    """The number Go keeps what it derives from ``a``'s codes under (the ``weight_id`` of
    ``bng_qops_params`` and ``bng_conv2d_params``): one per array for as long as it lives, never
    given to another array in this process; 0 where ``a`` is not :func:`immutable` when first
    asked (its codes may change in place: Go then compares or checks them on every call).

    Example:
        >>> a = np.frombuffer(bytes(8), np.uint8)
        >>> weight_id(a) == weight_id(a) != weight_id(np.frombuffer(bytes(8), np.uint8)) > 0
        True
        >>> weight_id(np.zeros(8, np.uint8))
        0
    """
    return _ids.get(a, "id", lambda: new_weight_id() if immutable(a) else 0)  # type: ignore[no-any-return]
