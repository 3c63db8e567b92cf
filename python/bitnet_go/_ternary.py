"""Ternary (BitNet b1.58) quantization: ``quantize_i2s`` and ``TernaryTensor``."""

from __future__ import annotations

import ctypes
import functools
import math
import operator
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _lib
from ._arrays import MAX_ELEMENTS, as_float32, check_int, check_positive_int, fits_int64, is_torch_tensor

METHODS = {"absmean": 0, "absmax": 1}
"""Scale methods and their C ABI numbers."""

QTYPES = {"i2_s": 0, "tl1": 1, "tl2": 2}
"""Packed formats and their C ABI numbers."""

GROUP_VALUES = 128
GROUP_BYTES = 32
BITNET_CPP_TAIL = 32
"""bitnet.cpp stores an I2_S tensor as its packed bytes plus a 32-byte tail."""


def packed_len(n: int, qtype: str = "i2_s", rows: int = 1) -> int:
    """Bytes of packed data for ``n`` values in ``rows`` rows (asks the Go side).

    I2_S takes 32 bytes per started group of 128 values; TL1 and TL2 are laid
    out per row (see :func:`quantize_tl1`, :func:`quantize_tl2`). ``n`` must be
    in [1, 2**60] and ``rows`` in [1, n], dividing ``n`` (``ValueError``).

    Example:
        >>> packed_len(129), packed_len(10, "tl1", 2), packed_len(6, "tl2")
        (64, 4, 2)
    """
    q = _check_qtype(qtype)
    return _packed_len(QTYPES[q], _check_count(n, "n"), _check_count(rows, "rows"))


@functools.lru_cache(maxsize=1024)
def _packed_len(q: int, n: int, rows: int) -> int:
    # Cached: _make checks every tensor's packed length, and a C call costs
    # microseconds. Errors are raised, so never cached.
    out = ctypes.c_int64(0)
    _lib.call("bng_packed_len", q, n, rows, ctypes.addressof(out))
    return out.value


def _check_count(v: Any, name: str) -> int:
    """An int argument of the C ABI: bool and non-ints are ``TypeError``; the
    range is the Go side's to check, past int64 a ``ValueError`` here."""
    v = check_int(v, name)
    if not fits_int64(v):
        raise ValueError(f"{name} must fit in int64, got {v}")
    return v


def _check_qtype(qtype: Any) -> str:
    if not isinstance(qtype, str):
        raise TypeError(f"qtype must be a str, one of {sorted(QTYPES)}, got {type(qtype).__name__} {qtype!r}")
    if qtype not in QTYPES:
        raise ValueError(f"qtype must be one of {sorted(QTYPES)}, got {qtype!r}")
    return qtype


def rows_of(shape: tuple[int, ...]) -> int:
    """Rows of the rows x K view TL formats use: ``shape[0]``, or 1 for rank <= 1.

    Example:
        >>> rows_of((8, 3, 3, 3)), rows_of((5,))
        (8, 1)
    """
    return shape[0] if len(shape) >= 2 else 1


def num_blocks(n: int, block_size: int | None) -> int:
    """Number of scales for ``n`` values (``block_size=None``: one).

    Example:
        >>> num_blocks(100, 32)
        4
    """
    if block_size is None or block_size >= n:
        return 1
    return -(-n // block_size)


def _check_method(method: Any) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    return method


def _max_dims() -> int:
    """numpy's limit on dimensions (64 in numpy 2, 32 before)."""
    try:
        np.empty((1,) * 64)
        return 64
    except ValueError:
        return 32


MAX_DIMS = _max_dims()
"""Most dimensions a tensor may have (numpy's limit: ``values()`` must be able to reshape)."""


def _check_shape(shape: Any) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(d) is int for d in shape):
        dims = shape  # the common case (an ndarray's shape), without conversions
    else:
        try:
            dims = tuple(int(operator_index(d)) for d in shape)
        except TypeError:
            raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from None
    if len(dims) > MAX_DIMS:
        raise ValueError(f"shape must have at most {MAX_DIMS} dimensions, got {len(dims)}")
    if any(d < 0 for d in dims):
        raise ValueError(f"shape must not have negative dimensions, got {dims}")
    n = math.prod(dims)
    if n > MAX_ELEMENTS:
        raise ValueError(f"shape {dims} has {n} elements: the size overflows (limit {MAX_ELEMENTS})")
    if n == 0:
        raise ValueError(f"shape {dims} has no elements")
    return dims


def operator_index(d: Any) -> int:
    """``operator.index`` that also rejects bool (a shape of ``True`` is a bug).

    Example:
        >>> operator_index(np.int64(3))
        3
    """
    if isinstance(d, (bool, np.bool_)):
        raise TypeError("bool is not a dimension")
    return operator.index(d)


class TernaryTensor:
    """An immutable ternary tensor: values in {-1, 0, +1} with float32 scales.

    Made by :func:`quantize_i2s` (or :meth:`from_bitnet_cpp_bytes`), never by
    hand. ``value * scale`` of its block reconstructs each element.

    Attributes:
        qtype: the packing: ``"i2_s"``, ``"tl1"`` or ``"tl2"``.
        shape: the tensor's shape.
        block_size: elements per scale over the flattened (C-order) tensor, or
            ``None`` for one scale.
        method: ``"absmean"``, ``"absmax"``, or ``None`` when unknown (imported
            from bitnet.cpp bytes).
        packed: the packed values, read-only ``np.uint8``. I2_S layout: code q+1
            in 2 bits; groups of 128 values take 32 bytes, value j of a group in
            byte j % 32 at bit shift 6 - 2*(j // 32); a short last group is
            padded with code 1. TL1/TL2: see :func:`quantize_tl1` and
            :func:`quantize_tl2`.
        scales: read-only ``np.float32``, one per block.

    Example:
        >>> import numpy as np, bitnet_go
        >>> t = bitnet_go.quantize_i2s(np.array([0.9, -0.1, -2.0, 1.2], np.float32))
        >>> t.values()
        array([ 1,  0, -1,  1], dtype=int8)
        >>> t.scales
        array([1.05], dtype=float32)
    """

    __slots__ = ("qtype", "shape", "block_size", "method", "packed", "scales", "_addrs")
    qtype: str
    shape: tuple[int, ...]
    block_size: int | None
    method: str | None
    packed: np.ndarray
    scales: np.ndarray

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("TernaryTensor is made by bitnet_go.quantize_i2s(), not constructed directly")

    @classmethod
    def _make(
        cls,
        qtype: str,
        shape: tuple[int, ...],
        block_size: int | None,
        method: str | None,
        packed: Any,
        scales: Any,
    ) -> TernaryTensor:
        """Every tensor is made here, its fields checked (see :func:`_check_fields`).

        ``packed`` and ``scales`` are numpy arrays, or both GPU arrays (torch
        CUDA tensors or CuPy arrays, from ``bitnet_go.cuda``); numpy arrays are
        made read-only.

        Example:
            >>> import numpy as np
            >>> TernaryTensor._make("tl1", (2, 3), None, None, np.array([0x14, 0x14], np.uint8),
            ...                     np.ones(1, np.float32)).values()
            array([[ 0,  0, -1],
                   [ 0,  0, -1]], dtype=int8)
            >>> TernaryTensor._make("i2_s", (3,), None, None, np.zeros(31, np.uint8), np.ones(1, np.float32))
            Traceback (most recent call last):
            ValueError: packed must be a 1-D ... uint8 array of 32 bytes (i2_s, 3 values, rows=1), got shape (31,)
        """
        fields = _check_fields(qtype, shape, block_size, method, packed, scales)
        qtype, shape, block_size, method, packed, scales = fields
        self = object.__new__(cls)
        host = isinstance(packed, np.ndarray)
        if host:
            packed.flags.writeable = False
            scales.flags.writeable = False
        for k, v in (
            ("qtype", qtype),
            ("shape", shape),
            ("block_size", block_size),
            ("method", method),
            ("packed", packed),
            ("scales", scales),
        ):
            object.__setattr__(self, k, v)
        # the arrays' addresses for the C calls (numpy only; fixed, as the
        # tensor is immutable and its arrays checked above): ndarray.ctypes
        # costs microseconds a call
        addrs = (int(packed.ctypes.data), int(scales.ctypes.data)) if host else None
        object.__setattr__(self, "_addrs", addrs)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TernaryTensor is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TernaryTensor is immutable (cannot delete {name!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        h = self.cpu()  # pickles hold host arrays
        return (_rebuild, (h.qtype, h.shape, h.block_size, h.method, np.array(h.packed), np.array(h.scales)))

    @property
    def device(self) -> str:
        """``"cpu"`` for numpy arrays, else the device of ``packed`` (e.g. ``"cuda:0"``)."""
        if isinstance(self.packed, np.ndarray):
            return "cpu"
        from . import cuda

        return cuda._device_of(self.packed)

    @property
    def on_device(self) -> bool:
        """True when ``packed`` and ``scales`` are GPU arrays (see ``bitnet_go.cuda``)."""
        return not isinstance(self.packed, np.ndarray)

    def cpu(self) -> TernaryTensor:
        """This tensor with ``packed`` and ``scales`` as numpy arrays (self if already).

        Example:
            >>> import bitnet_go
            >>> t = bitnet_go.quantize_i2s([1.0, -1.0])
            >>> t.cpu() is t
            True
        """
        if not self.on_device:
            return self
        from . import cuda

        packed, scales = cuda._to_host(self.packed), cuda._to_host(self.scales)
        return TernaryTensor._make(self.qtype, self.shape, self.block_size, self.method, packed, scales)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes held: packed codes plus scales."""
        return int(self.packed.nbytes) + int(self.scales.nbytes)

    @property
    def bits_per_weight(self) -> float:
        """Storage bits per element, scales included."""
        return self.nbytes * 8 / self.size

    def values(self) -> np.ndarray:
        """The ternary values as a new ``np.int8`` array of ``shape``.

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([[3.0, -3.0], [0.0, 0.1]]).values()
            array([[ 1, -1],
                   [ 0,  0]], dtype=int8)
        """
        if self.on_device:
            from . import cuda

            return cuda._values(self)
        out = np.empty(self.size, np.int8)
        _lib.call(
            "bng_unpack",
            QTYPES[self.qtype],
            _lib.ptr(self.packed),
            self.packed.size,
            rows_of(self.shape),
            _lib.ptr(out),
            out.size,
        )
        return out.reshape(self.shape)

    def dequantize(self) -> np.ndarray:
        """``value * scale`` as a new float32 array of ``shape``.

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([2.0, -2.0, 0.0], method="absmax").dequantize()
            array([ 2., -2.,  0.], dtype=float32)
        """
        if self.on_device:
            from . import cuda

            return cuda._dequantize(self)
        out = np.empty(self.size, np.float32)
        _lib.call(
            "bng_dequantize",
            QTYPES[self.qtype],
            _lib.ptr(self.packed),
            self.packed.size,
            rows_of(self.shape),
            self.block_size or 0,
            _lib.ptr(self.scales),
            self.scales.size,
            _lib.ptr(out),
            out.size,
        )
        return out.reshape(self.shape)

    def to(self, qtype: str) -> TernaryTensor:
        """The same values and scales packed as ``qtype`` (``"i2_s"``, ``"tl1"``, ``"tl2"``).

        Returns ``self`` when already in that format; the scales are shared.

        Example:
            >>> import numpy as np, bitnet_go
            >>> t = bitnet_go.quantize_i2s(np.linspace(-1, 1, 30, dtype=np.float32).reshape(3, 10))
            >>> u = t.to("tl2")
            >>> u.qtype, bool((u.values() == t.values()).all()), u.to("i2_s").packed.tobytes() == t.packed.tobytes()
            ('tl2', True, True)
        """
        if not isinstance(qtype, str) or qtype not in QTYPES:
            raise ValueError(f"qtype must be one of {sorted(QTYPES)}, got {qtype!r}")
        if qtype == self.qtype:
            return self
        if self.on_device:
            raise ValueError(f"TernaryTensor.to({qtype!r}) works on host tensors: call .cpu() first")
        values = self.values().reshape(-1)
        rows = rows_of(self.shape)
        packed = np.empty(packed_len(values.size, qtype, rows), np.uint8)
        _lib.call("bng_pack", QTYPES[qtype], _lib.ptr(values), values.size, rows, _lib.ptr(packed), packed.size)
        return TernaryTensor._make(qtype, self.shape, self.block_size, self.method, packed, self.scales)

    def to_bitnet_cpp_bytes(self) -> bytes:
        """Serialise a per-tensor I2_S tensor as bitnet.cpp stores it.

        Layout: the ``packed`` bytes (``ceil(n/128) * 32`` bytes, the layout
        described on the class), then a 32-byte tail whose first 4 bytes are
        the float32 scale, little-endian, and whose other 28 bytes are zero.
        Total ``len(packed) + 32`` bytes. The shape is not stored.

        Example:
            >>> import bitnet_go
            >>> t = bitnet_go.quantize_i2s([1.0] * 128)
            >>> len(t.to_bitnet_cpp_bytes())
            64
        """
        if self.qtype != "i2_s" or self.scales.shape[0] != 1:
            raise ValueError(
                "to_bitnet_cpp_bytes needs a per-tensor I2_S tensor (block_size=None), "
                f"got qtype={self.qtype!r} with {self.scales.shape[0]} scales"
            )
        host = self.cpu()
        tail = struct.pack("<f", float(host.scales[0])) + bytes(BITNET_CPP_TAIL - 4)
        return host.packed.tobytes() + tail

    @classmethod
    def from_bitnet_cpp_bytes(cls, data: Any, shape: Any) -> TernaryTensor:
        """Read bytes in the layout of :meth:`to_bitnet_cpp_bytes`.

        ``data`` is any C-contiguous buffer (bytes, bytearray, memoryview, a
        numpy array of any dtype and rank, read as its raw bytes) of exactly
        ``ceil(n/128) * 32 + 32`` bytes for ``n = prod(shape)``; a
        non-contiguous one is a ``TypeError``. The result has
        ``block_size=None`` and ``method=None`` (bitnet.cpp does not record
        it). A ``ValueError`` for: a code 3 anywhere, a code other than 1 in the
        padding of a short last group of 128, or a non-zero byte among the 28
        reserved bytes of the tail.

        Example:
            >>> import bitnet_go
            >>> t = bitnet_go.quantize_i2s([0.5, -1.0, 2.0])
            >>> u = bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(t.to_bitnet_cpp_bytes(), (3,))
            >>> bool((u.values() == t.values()).all() and u.scales[0] == t.scales[0])
            True
        """
        dims = _check_shape(shape)
        buf = _raw_bytes(data, "data")
        n = math.prod(dims)
        want = packed_len(n) + BITNET_CPP_TAIL
        if buf.size != want:
            raise ValueError(f"data must have {want} bytes for shape {dims} ({n} values), got {buf.size}")
        end = want - BITNET_CPP_TAIL
        reserved = np.flatnonzero(buf[end + 4 :])
        if reserved.size:
            k = int(reserved[0]) + 4
            raise ValueError(
                f"data: the 28 reserved bytes of the 32-byte tail must be zero, got {int(buf[end + k]):#04x} "
                f"at tail byte {k} (data byte {end + k})"
            )
        packed = buf[:end].copy()
        scales = buf[end : end + 4].copy().view("<f4").astype(np.float32)
        t = cls._make("i2_s", dims, None, None, packed, scales)
        t.values()  # validates every code and the padding
        return t

    def __repr__(self) -> str:
        return (
            f"TernaryTensor(qtype={self.qtype!r}, shape={self.shape}, block_size={self.block_size}, "
            f"method={self.method!r}, scales={self.scales.shape[0]}, nbytes={self.nbytes}, "
            f"bits_per_weight={self.bits_per_weight:.3f})"
        )


def _raw_bytes(data: Any, name: str) -> np.ndarray:
    """The bytes of a C-contiguous buffer as a 1-D uint8 view (no copy).

    Example:
        >>> _raw_bytes(np.ones((2, 1), np.float32), "data").size
        8
    """
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise TypeError(f"{name} must hold bytes, got an array of Python objects (dtype {data.dtype})")
        if not data.flags.c_contiguous:
            raise TypeError(f"{name} must be contiguous (C order), got an array with strides {data.strides}")
        return data.reshape(-1).view(np.uint8)
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(
            f"{name} must be a bytes-like object (bytes, bytearray, memoryview, numpy array), got {type(data).__name__}"
        ) from None
    if not mv.c_contiguous:
        raise TypeError(f"{name} must be contiguous (C order), got a {type(data).__name__} that is not")
    if "O" in mv.format:
        raise TypeError(f"{name} must hold bytes, got a buffer of Python objects (format {mv.format!r})")
    return np.frombuffer(mv, np.uint8)


def _rebuild(
    qtype: str,
    shape: tuple[int, ...],
    block_size: int | None,
    method: str | None,
    packed: np.ndarray,
    scales: np.ndarray,
) -> TernaryTensor:
    """Unpickle a :class:`TernaryTensor` (see ``__reduce__``): pickles hold numpy
    arrays, and every field is checked as :meth:`TernaryTensor._make` does.

    Example:
        >>> import pickle, bitnet_go
        >>> t = bitnet_go.quantize_i2s([1.0, -1.0, 0.0])
        >>> pickle.loads(pickle.dumps(t)).values()
        array([ 1, -1,  0], dtype=int8)
    """
    for name, a in (("packed", packed), ("scales", scales)):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray in a pickled TernaryTensor, got {type(a).__name__}")
    return TernaryTensor._make(qtype, shape, block_size, method, packed, scales)


_UINT8, _FLOAT32 = np.dtype(np.uint8), np.dtype(np.float32)


def _check_fields(
    qtype: Any, shape: Any, block_size: Any, method: Any, packed: Any, scales: Any
) -> tuple[str, tuple[int, ...], int | None, str | None, Any, Any]:
    """Check the fields of a :class:`TernaryTensor` and return them normalised.

    ``qtype`` a known format; ``shape`` a tuple of non-negative ints whose
    product is in [1, 2**60]; ``block_size`` None or an int >= 1; ``method``
    None or a known method; ``packed`` a 1-D C-contiguous uint8 array of
    exactly :func:`packed_len` bytes; ``scales`` a 1-D C-contiguous float32
    array of exactly :func:`num_blocks` entries (NaN and Inf are data). Both
    are numpy arrays (a subclass is viewed as ndarray), or both GPU arrays of
    an I2_S tensor. Raises ``TypeError`` for a wrong kind of value,
    ``ValueError`` for a wrong value; the codes themselves are checked when
    read (``values()``).

    Example:
        >>> _check_fields("i2_s", (2, 3), None, "absmax", np.zeros(32, np.uint8), np.ones(1, np.float32))[:4]
        ('i2_s', (2, 3), None, 'absmax')
    """
    q = _check_qtype(qtype)
    if not isinstance(shape, tuple):
        raise TypeError(f"shape must be a tuple of ints, got {type(shape).__name__} {shape!r}")
    dims = _check_shape(shape)
    bs = check_positive_int(block_size, "block_size", allow_none=True)
    if method is not None:
        if not isinstance(method, str):
            raise TypeError(f"method must be None or a str, one of {sorted(METHODS)}, got {type(method).__name__}")
        _check_method(method)
    n = math.prod(dims)
    rows = rows_of(dims)
    plen = _packed_len(QTYPES[q], n, rows)
    nb = num_blocks(n, bs)

    def what(i: int) -> str:  # for the messages only: formatting costs a microsecond
        if i == 0:
            return f"{plen} bytes ({q}, {n} values, rows={rows})"
        return f"{nb} entries (block_size={bs}, {n} values)"

    if isinstance(packed, np.ndarray):
        if not isinstance(scales, np.ndarray):
            raise TypeError(f"scales must be a numpy.ndarray like packed, got {type(scales).__name__}")
        packed = _check_host(packed, "packed", _UINT8, plen, what, 0)
        scales = _check_host(scales, "scales", _FLOAT32, nb, what, 1)
    else:
        if not is_cuda_array(packed):
            raise TypeError(f"packed must be a numpy.ndarray (or a GPU array), got {type(packed).__name__}")
        if not is_cuda_array(scales):
            raise TypeError(f"scales must be a GPU array like packed, got {type(scales).__name__}")
        if q != "i2_s":
            raise ValueError(f"GPU tensors are I2_S, got qtype {q!r}")
        _check_device(packed, "packed", "uint8", plen, what(0))
        _check_device(scales, "scales", "float32", nb, what(1))
    return q, dims, bs, method, packed, scales


def _check_host(a: np.ndarray, name: str, dtype: np.dtype, size: int, what: Callable[[int], str], i: int) -> np.ndarray:
    if type(a) is not np.ndarray:
        a = a.view(np.ndarray)  # a subclass's overrides play no part
    f = a.flags
    if a.dtype == dtype and a.ndim == 1 and f.c_contiguous and f.aligned and a.size == size:
        return a
    expect = f"{name} must be a 1-D C-contiguous aligned {dtype} array of {what(i)}"
    if a.dtype != dtype:
        raise TypeError(f"{expect}, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{expect}, got shape {a.shape}")
    if not f.c_contiguous:
        raise ValueError(f"{expect}, got strides {a.strides}")
    if not f.aligned:
        raise ValueError(f"{expect}, got an unaligned array (address {a.ctypes.data:#x})")
    raise ValueError(f"{expect}, got shape {a.shape}")


def _check_device(a: Any, name: str, dtype: str, size: int, what: str) -> None:
    # torch tensors and CuPy arrays: shape, dtype and contiguity, no GPU call
    shape = tuple(int(d) for d in a.shape)
    dt = str(a.dtype).removeprefix("torch.")
    contiguous = a.is_contiguous() if is_torch_tensor(a) else bool(a.flags.c_contiguous)
    if dt != dtype or len(shape) != 1 or not contiguous or shape[0] != size:
        raise ValueError(
            f"{name} must be a 1-D contiguous {dtype} array of {what}, "
            f"got dtype {dt}, shape {shape}{'' if contiguous else ', not contiguous'}"
        )


def quantize_i2s(
    x: Any,
    *,
    block_size: int | None = None,
    method: str = "absmean",
    check_finite: bool = True,
    device: str = "auto",
) -> TernaryTensor:
    """Quantize a float tensor to ternary values packed as I2_S (2 bits each).

    Args:
        x: anything ``np.asarray`` accepts (numpy arrays, lists, CPU torch
            tensors) of a real dtype; cast to float32 (a copy only if needed;
            non-contiguous input is copied once).
        block_size: one scale per ``block_size`` consecutive elements of the
            flattened (C-order) tensor, the last block short if the size does
            not divide; ``None`` for one scale for the whole tensor.
        method: ``"absmean"`` (BitNet b1.58): scale = max(mean|x|, 1e-5), the
            mean summed in float64 and rounded once to float32;
            q = clamp(round_half_even(x / scale), -1, 1).
            ``"absmax"``: scale = max(max|x|, 1e-8); q = +1 where
            x / scale > 0.5, -1 where < -0.5, else 0. Divisions are float32.
        check_finite: raise ``ValueError`` naming the first NaN/Inf index.
            With ``False`` nothing crashes and the result is defined: a NaN
            element quantizes to 0; a block holding ±Inf gets scale +Inf
            (absmean and absmax), so all its values become 0; under absmean a
            block holding NaN gets scale NaN (always the quiet NaN
            0x7FC00000, on the CPU and the GPU; values 0), under absmax NaN
            is left out of the maximum.
        device: ``"cpu"``, ``"cuda"`` (or ``"cuda:N"``), or ``"auto"``: the GPU
            for CUDA arrays (``__cuda_array_interface__`` or a CUDA DLPack
            device, e.g. torch CUDA tensors), the CPU for everything else. See
            ``bitnet_go.cuda`` for what a GPU result holds.

    Returns:
        A :class:`TernaryTensor` with ``qtype="i2_s"``.

    Example:
        >>> import numpy as np, bitnet_go
        >>> w = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
        >>> t = bitnet_go.quantize_i2s(w, block_size=128)
        >>> t.packed.shape, t.scales.shape
        ((2048,), (64,))
    """
    bs = check_positive_int(block_size, "block_size", allow_none=True)
    m = _check_method(method)
    if resolve_device(x, device) != "cpu":
        from . import cuda

        return cuda._quantize_i2s(x, block_size=bs, method=m, check_finite=check_finite, device=device)
    a = as_float32(x, "x")
    if a.size == 0:
        raise ValueError(f"x must have at least one element, got shape {a.shape}")
    n = a.size
    packed = np.empty(packed_len(n), np.uint8)  # i2_s
    scales = np.empty(num_blocks(n, bs), np.float32)
    _lib.call(
        "bng_quantize_i2s",
        _lib.ptr(a),
        n,
        bs or 0,
        METHODS[m],
        1 if check_finite else 0,
        _lib.ptr(packed),
        packed.size,
        _lib.ptr(scales),
        scales.size,
    )
    return TernaryTensor._make("i2_s", a.shape, bs, m, packed, scales)


def quantize_tl1(
    x: Any,
    *,
    block_size: int | None = None,
    method: str = "absmean",
    check_finite: bool = True,
) -> TernaryTensor:
    """Quantize like :func:`quantize_i2s` and pack as TL1 (bitnet.cpp's 2-value LUT format).

    Same ternary values and scales as ``quantize_i2s`` on the same input.
    Layout: the tensor is seen as rows x K with rows = ``shape[0]`` and K the
    product of the other dimensions (a conv weight's flattened C/groups*kH*kW;
    rank 0 or 1 is one row). Each row takes ceil(ceil(K/2)/2) bytes: pair i of
    the row, (w[2i], w[2i+1]) (a missing last w is 0), is the index
    3*w0 + w1 + 4 (0..8) in the low nibble of byte i//2 when i is even, the
    high nibble when odd. Example row [+1, -1, 0, +1, -1] -> bytes 0x56, 0x01.
    2.0 bits per weight plus scales.

    Example:
        >>> import bitnet_go
        >>> bitnet_go.quantize_tl1([[1.0, -1.0, 0.0, 1.0, -1.0]], method="absmax").packed.tobytes().hex()
        '5601'
    """
    return quantize_i2s(x, block_size=block_size, method=method, check_finite=check_finite, device="cpu").to("tl1")


def quantize_tl2(
    x: Any,
    *,
    block_size: int | None = None,
    method: str = "absmean",
    check_finite: bool = True,
) -> TernaryTensor:
    """Quantize like :func:`quantize_i2s` and pack as TL2 (bitnet.cpp's 3-value LUT format).

    Same ternary values and scales as ``quantize_i2s``. Rows x K as in
    :func:`quantize_tl1`. Each row holds T = K // 3 triples
    v = 9*w0 + 3*w1 + w2 (-13..13), then: ceil(T/2) bytes of |v| (triple i in
    the low nibble of byte i//2 when i is even, high when odd); ceil(T/8)
    bytes of signs (bit i%8 of byte i//8 set when v < 0); and, when K % 3 != 0,
    one byte whose low nibble is the TL1 index of the last K % 3 values
    (padded with 0). About 1.67 bits per weight plus scales.

    Example:
        >>> import bitnet_go
        >>> bitnet_go.quantize_tl2([1.0, 1.0, 1.0, -1.0, 0.0, 0.0], method="absmax").packed.tobytes().hex()
        '9d02'
    """
    return quantize_i2s(x, block_size=block_size, method=method, check_finite=check_finite, device="cpu").to("tl2")


def is_cuda_array(x: Any) -> bool:
    """True for arrays that live on an NVIDIA GPU (CUDA array interface or DLPack).

    Example:
        >>> is_cuda_array(np.zeros(3))
        False
    """
    if is_torch_tensor(x):
        # Not the interface: torch raises RuntimeError for it on tensors that
        # require grad.
        return bool(x.is_cuda)
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None and not isinstance(x, np.ndarray):
        try:
            return int(dl()[0]) in (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def resolve_device(x: Any, device: str) -> str:
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


def dequantize(t: TernaryTensor) -> np.ndarray:
    """Reconstruct float32 values from a :class:`TernaryTensor` (``t.dequantize()``).

    Example:
        >>> import bitnet_go
        >>> bitnet_go.dequantize(bitnet_go.quantize_i2s([1.0, -1.0]))
        array([ 1., -1.], dtype=float32)
    """
    if not isinstance(t, TernaryTensor):
        raise TypeError(f"t must be a TernaryTensor, got {type(t).__name__}")
    return t.dequantize()
