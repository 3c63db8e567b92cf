"""Ternary (BitNet b1.58) quantization: ``quantize_i2s``, ``quantize_tq2_0``, ``quantize_tq1_0``, ``TernaryTensor``."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._core import ops
from ._core.arrays import as_float32, check_bool, check_int, check_positive_int, fits_int64, is_torch_tensor
from ._core.devices import DeviceArray, device_index, is_cuda_array, resolve_device, touch_driver
from ._core.params import parameters_of
from ._core.types import Device, Method, QType
from ._gpu import quantize as _gpu_quantize
from ._gpu import to_device as _to_device
from ._gpu import to_gpu as _to_gpu
from ._gpu import values as _gpu_values
from ._quantized import QuantizedTensor, check_shape, rows_of

METHODS = ops.METHOD_CODES
"""Scale methods and their C ABI numbers."""

QTYPES = ops.QTYPE_CODES
"""Ternary packed formats and their C ABI numbers."""

BITNET_CPP_TAIL = 32
"""bitnet.cpp stores an I2_S tensor as its packed bytes plus a 32-byte tail."""

TQ_BLOCK = 256
"""Values per block of the llama.cpp formats TQ2_0 and TQ1_0 (one float16 scale each)."""

TQ_PAYLOAD: dict[str, int] = {"tq2_0": 64, "tq1_0": 52}
"""Payload bytes of one 256-value block (a GGUF block adds its 2-byte float16 scale)."""

GGUF_QTYPES = ("i2_s", "tq2_0", "tq1_0")
"""The qtypes :meth:`TernaryTensor.to_gguf_bytes` writes and :meth:`TernaryTensor.from_gguf_bytes` reads."""


def packed_len(n: int, qtype: QType = "i2_s", rows: int = 1) -> int:
    """Bytes of packed data for ``n`` values in ``rows`` rows (asks the Go side).

    I2_S takes 32 bytes per started group of 128 values; TL1 and TL2 are laid
    out per row (see :func:`quantize_tl1`, :func:`quantize_tl2`). ``n`` must be
    in [1, 2**60] and ``rows`` in [1, n], dividing ``n`` (``ValueError``).

    Example:
        >>> packed_len(129), packed_len(10, "tl1", 2), packed_len(6, "tl2")
        (64, 4, 2)
    """
    return ops.packed_len(_check_qtype(qtype), _check_count(n, "n"), _check_count(rows, "rows"))


def _check_count(v: object, name: str) -> int:
    """An int argument of the C ABI: bool and non-ints are ``TypeError``; the
    range is the Go side's to check, past int64 a ``ValueError`` here."""
    v = check_int(v, name)
    if not fits_int64(v):
        raise ValueError(f"{name} must fit in int64, got {v}")
    return v


def _check_qtype(qtype: object) -> QType:
    if not isinstance(qtype, str):
        raise TypeError(f"qtype must be a str, one of {sorted(QTYPES)}, got {type(qtype).__name__} {qtype!r}")
    if qtype not in QTYPES:
        raise ValueError(f"qtype must be one of {sorted(QTYPES)}, got {qtype!r}")
    return qtype  # type: ignore[return-value]


def _check_method(method: object) -> Method:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {sorted(METHODS)}, got {method!r}")
    return method  # type: ignore[return-value]


class TernaryTensor(QuantizedTensor):
    """An immutable ternary tensor: values in {-1, 0, +1} with float32 scales.

    The ternary case of :class:`~bitnet_go.QuantizedTensor` (``zero_points``
    and ``axis`` are None). Made by :func:`quantize_i2s` (or
    :meth:`from_bitnet_cpp_bytes`), never by hand. ``value * scale`` of its
    block reconstructs each element.

    Attributes:
        qtype: the packing: ``"i2_s"``, ``"tl1"``, ``"tl2"``, ``"tq2_0"`` or ``"tq1_0"``.
        shape: the tensor's shape.
        block_size: elements per scale over the flattened (C-order) tensor, or
            ``None`` for one scale.
        method: ``"absmean"``, ``"absmax"``, or ``None`` when unknown (imported
            from bitnet.cpp bytes).
        packed: the packed values, read-only ``np.uint8``. I2_S layout: code q+1
            in 2 bits; groups of 128 values take 32 bytes, value j of a group in
            byte j % 32 at bit shift 6 - 2*(j // 32); a short last group is
            padded with code 1. TL1/TL2: see :func:`quantize_tl1` and
            :func:`quantize_tl2`; TQ2_0/TQ1_0: the blocks' payloads without
            their scales, see :func:`quantize_tq2_0` and :func:`quantize_tq1_0`.
        scales: read-only ``np.float32``, one per block (TQ2_0/TQ1_0: one
            per 256 values, each a float16 value, ``block_size=256``).

    Example:
        >>> import numpy as np, bitnet_go
        >>> t = bitnet_go.quantize_i2s(np.array([0.9, -0.1, -2.0, 1.2], np.float32))
        >>> t.values()
        array([ 1,  0, -1,  1], dtype=int8)
        >>> t.scales
        array([1.05], dtype=float32)
    """

    __slots__ = ("method", "_view4", "_plans")
    method: Method | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("TernaryTensor is made by bitnet_go.quantize_i2s(), not constructed directly")

    @classmethod
    def _make(
        cls,
        qtype: str,
        shape: tuple[int, ...],
        block_size: int | None,
        method: str | None,
        packed: np.ndarray | DeviceArray,
        scales: np.ndarray | DeviceArray,
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
        q, dims, bs, m, packed, scales = _check_fields(qtype, shape, block_size, method, packed, scales)
        return cls._trusted(q, dims, bs, m, packed, scales)

    @classmethod
    def _trusted(
        cls,
        qtype: QType,
        shape: tuple[int, ...],
        block_size: int | None,
        method: Method | None,
        packed: np.ndarray | DeviceArray,
        scales: np.ndarray | DeviceArray,
    ) -> TernaryTensor:
        """A new tensor from checked fields (:func:`_check_fields`'s result, or the fresh arrays of
        the right sizes a quantize function just filled), without checking them again.

        Example:
            >>> p, s = np.zeros(32, np.uint8), np.ones(1, np.float32)
            >>> TernaryTensor._trusted("i2_s", (3,), None, "absmax", p, s).shape
            (3,)
        """
        self = object.__new__(cls)
        self._init(qtype, shape, block_size, packed, scales)
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "_view4", None)
        object.__setattr__(self, "_plans", None)  # conv2d's plans for it (bitnet_go._conv.kept_plan)
        return self

    def _as_1x1(self) -> TernaryTensor:
        """This (out_features, in_features) weight as the (O, I, 1, 1) weight of a 1x1 convolution:
        the same arrays, made once and kept with the tensor (``linear_quantized`` runs as that
        convolution on every call).

        Example:
            >>> import numpy as np, bitnet_go
            >>> w = bitnet_go.quantize_i2s(np.ones((2, 128), np.float32))
            >>> v = w._as_1x1()
            >>> v.shape, v.packed is w.packed, w._as_1x1() is v
            ((2, 128, 1, 1), True, True)
        """
        v = self._view4
        if v is None:
            o, i = self.shape
            v = TernaryTensor._trusted(self.qtype, (o, i, 1, 1), self.block_size, self.method, self.packed, self.scales)
            object.__setattr__(self, "_view4", v)
        return v

    def _reduce_host(self) -> tuple[Callable[..., TernaryTensor], tuple[object, ...]]:
        # the pickle format of every version: bitnet_go._ternary._rebuild and these six fields
        return (_rebuild, (self.qtype, self.shape, self.block_size, self.method, np.array(self.packed),
                           np.array(self.scales)))  # fmt: skip

    def _with_arrays(self, packed: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None) -> TernaryTensor:
        return TernaryTensor._make(self.qtype, self.shape, self.block_size, self.method, packed, scales)

    def values(self) -> np.ndarray:
        """The ternary values as a new ``np.int8`` array of ``shape``.

        For a GPU tensor, an int8 array of its framework on its device
        (see ``bitnet_go.cuda``).

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([[3.0, -3.0], [0.0, 0.1]]).values()
            array([[ 1, -1],
                   [ 0,  0]], dtype=int8)
        """
        if self.on_device:
            return _gpu_values(self.packed, self.shape, self.size)  # type: ignore[return-value]
        out = np.empty(self.size, np.int8)
        ops.unpack(self.qtype, self.packed, rows_of(self.shape), out)
        return out.reshape(self.shape)

    def to(self, qtype: QType | str) -> TernaryTensor:
        """The same values packed as ``qtype`` (``"i2_s"``, ``"tl1"``, ``"tl2"``, ``"tq2_0"``, ``"tq1_0"``),
        or on a device (``"cpu"``, ``"cuda"``, ``"cuda:N"``).

        **Devices.** ``to("cuda")`` (``"cuda:0"``) or ``to("cuda:N")`` copies
        the packed codes and the scales to that GPU once: the weight stays 2
        bits a value in device memory, and :func:`conv2d_quantized` /
        :func:`linear_quantized` with GPU input on that device use it with no
        further copy. The arrays become torch CUDA tensors (CuPy arrays when
        torch is not installed); a tensor already on a GPU is copied with its
        own framework, and returned as is when already on that device. The
        GPU kernels read I2_S, so TL1, TL2, TQ2_0 and TQ1_0 tensors arrive as
        I2_S (the same values and scales). ``to("cpu")`` is :meth:`cpu`.
        ``RuntimeError`` (with the reason) when no CUDA GPU can be used.
        Passing a host weight with GPU input also works (it is moved to the
        input's GPU once and the copy kept while the weight lives); a weight
        on one GPU with input on another is a ``ValueError``.

        Returns ``self`` when already in that format. The ternary values are
        always kept exactly. Between I2_S, TL1 and TL2, and from TQ2_0/TQ1_0
        to any format, the scales and ``block_size`` are kept as they are
        (shared). To TQ2_0/TQ1_0 from I2_S/TL1/TL2, the tensor's scales
        become one per 256-value block (``block_size=256``): each block takes
        the scale its values had, which needs ``block_size`` None or a
        multiple of 256 (``ValueError`` otherwise: a block would hold two
        scales), and that scale is rounded to the nearest float16 (ties to
        even, as the formats store it; a relative change below 2**-11 for
        scales from 6.1e-5 to 65504, smaller ones lose precision and those
        below 2**-25 become 0). A scale of 65520 or more, past float16's
        range, is a ``ValueError``. Rows must hold a multiple of 256 values
        (see :func:`quantize_tq2_0`).

        Example:
            >>> import numpy as np, bitnet_go
            >>> t = bitnet_go.quantize_i2s(np.linspace(-1, 1, 30, dtype=np.float32).reshape(3, 10))
            >>> u = t.to("tl2")
            >>> u.qtype, bool((u.values() == t.values()).all()), u.to("i2_s").packed.tobytes() == t.packed.tobytes()
            ('tl2', True, True)
            >>> w = bitnet_go.quantize_i2s(np.full((2, 256), 0.1, np.float32)).to("tq1_0")
            >>> w.block_size, w.scales, w.values()[0, :3]
            (256, array([0.09997559, 0.09997559], dtype=float32), array([1, 1, 1], dtype=int8))
            >>> import bitnet_go.cuda
            >>> dev = "cuda" if bitnet_go.cuda.is_available() else "cpu"
            >>> g = t.to(dev)  # on a GPU: packed stays 2 bits a value there
            >>> g.device in ("cpu", "cuda:0"), g.to("cpu").packed.tobytes() == t.packed.tobytes()
            (True, True)
        """
        if isinstance(qtype, str) and qtype == "cpu":
            return self.cpu()
        if isinstance(qtype, str) and (qtype == "cuda" or qtype.startswith("cuda:")):
            return self._to_cuda(device_index(qtype))
        if not isinstance(qtype, str) or qtype not in QTYPES:
            raise ValueError(
                f"qtype must be one of {sorted(QTYPES)}, or a device ('cpu', 'cuda', 'cuda:N'), got {qtype!r}"
            )
        if qtype == self.qtype:
            return self
        if self.on_device:
            raise ValueError(f"TernaryTensor.to({qtype!r}) works on host tensors: call .cpu() first")
        block_size, scales = self.block_size, self.scales
        if qtype in TQ_PAYLOAD and self.qtype not in TQ_PAYLOAD:
            _check_tq_shape(self.shape, qtype)
            block_size, scales = TQ_BLOCK, _tq_scales(self.scales, self.block_size, self.size, qtype)
        values = self.values().reshape(-1)
        rows = rows_of(self.shape)
        packed = np.empty(ops.packed_len(qtype, values.size, rows), np.uint8)
        ops.pack(qtype, values, rows, packed)
        return TernaryTensor._make(qtype, self.shape, block_size, self.method, packed, scales)

    def _to_cuda(self, index: int, like: DeviceArray | None = None) -> TernaryTensor:
        """This tensor's values as I2_S on GPU ``index`` (``self`` when already there); see :meth:`to`.

        ``like``: a GPU array on that device whose framework (and so stream)
        makes the copies of a host tensor.
        """
        if self.on_device and self.device == f"cuda:{index}":
            return self
        h = self if self.qtype == "i2_s" or self.on_device else self.to("i2_s")

        def move(a: np.ndarray | DeviceArray) -> DeviceArray:
            return _to_gpu(a, index) if like is None or is_cuda_array(a) else _to_device(like, a)  # type: ignore[arg-type]

        return TernaryTensor._trusted(h.qtype, h.shape, h.block_size, h.method, move(h.packed), move(h.scales))

    def to_gguf_bytes(self) -> bytes:
        """The tensor's data exactly as a GGUF file stores it (the shape and type go in the header).

        - ``"tq2_0"`` / ``"tq1_0"`` (llama.cpp's GGML types 35 / 34): per
          256-value block, its payload (64 / 52 bytes, the ``packed`` bytes of
          that block) followed by its scale as an IEEE float16, little-endian:
          66 / 54 bytes a block, the bytes ``gguf.quants.quantize`` writes.
          Blocks run over the flattened tensor; a GGUF file needs its
          tensor's innermost dimension (``shape[-1]``, its ``ne[0]``) to be a
          multiple of 256, so write a tensor whose last dimension is not
          (a conv weight) with the 2-D shape (``shape[0]``, K): the bytes are
          the same.
        - ``"i2_s"``: bitnet.cpp's layout, :meth:`to_bitnet_cpp_bytes` (a
          per-tensor scale in a 32-byte tail).
        - ``"tl1"`` / ``"tl2"``: not written (``ValueError``). bitnet.cpp's
          converter (utils/convert-hf-to-gguf-bitnet.py) tiles their indices
          in an order that depends on kernel parameters (BM, BK, bm) generated
          for each model's matrix shapes (include/kernel_config.ini), and it
          stores the scale apart, as an F32 tensor named ``<name>_scale``; the
          bytes of this tensor's layout (:func:`quantize_tl1`) are not that.
          Convert with ``.to("i2_s")`` or ``.to("tq2_0")``.

        Example:
            >>> import numpy as np, bitnet_go
            >>> t = bitnet_go.quantize_tq2_0(np.linspace(-1, 1, 512, dtype=np.float32))
            >>> b = t.to_gguf_bytes(); len(b), b[64:66].hex()
            (132, '003c')
        """
        if self.qtype == "i2_s":
            return self.to_bitnet_cpp_bytes()
        if self.qtype not in TQ_PAYLOAD:
            raise ValueError(
                f"to_gguf_bytes writes {list(GGUF_QTYPES)}, got qtype {self.qtype!r}: bitnet.cpp stores TL1/TL2 "
                "tiled by kernel parameters generated per model (include/kernel_config.ini), with the scale as a "
                "separate F32 tensor '<name>_scale'; convert with .to('i2_s') or .to('tq2_0') first"
            )
        nb = self.size // TQ_BLOCK
        blocks = np.empty((nb, TQ_PAYLOAD[self.qtype] + 2), np.uint8)
        blocks[:, :-2] = self.packed.reshape(nb, -1)
        blocks[:, -2:] = self.scales.astype("<f2").view(np.uint8).reshape(nb, 2)
        return blocks.tobytes()

    @classmethod
    def from_gguf_bytes(cls, data: object, shape: object, qtype: object) -> TernaryTensor:
        """Read a tensor's data as a GGUF file stores it (:meth:`to_gguf_bytes`).

        ``data`` is any C-contiguous buffer (as for
        :meth:`from_bitnet_cpp_bytes`) of exactly the bytes ``shape`` takes
        in ``qtype``: ``"tq2_0"`` (66 bytes per 256 values), ``"tq1_0"`` (54)
        or ``"i2_s"`` (:meth:`from_bitnet_cpp_bytes`). ``shape`` is the
        tensor's shape in numpy order (GGUF's ``ne`` reversed); for the TQ
        formats its rows (the product of the dimensions after the first) hold
        a multiple of 256 values. The result has ``method=None``; a TQ
        tensor has ``block_size=256`` and the float16 scales as float32.
        ``ValueError`` for a wrong length, shape or qtype, and for bytes the
        format never writes (a TQ2_0 code 3, a TQ1_0 byte that is not the
        base-3 encoding of any codes, bad I2_S codes or padding).

        Example:
            >>> import numpy as np, bitnet_go
            >>> t = bitnet_go.quantize_tq1_0(np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256))
            >>> u = bitnet_go.TernaryTensor.from_gguf_bytes(t.to_gguf_bytes(), (2, 256), "tq1_0")
            >>> bool((u.values() == t.values()).all()), u.scales
            (True, array([1., 1.], dtype=float32))
        """
        if not isinstance(qtype, str):
            raise TypeError(f"qtype must be a str, one of {list(GGUF_QTYPES)}, got {type(qtype).__name__} {qtype!r}")
        if qtype not in GGUF_QTYPES:
            why = " (bitnet.cpp's TL1/TL2 GGUF layout is tiled per model: see to_gguf_bytes)" if qtype in QTYPES else ""
            raise ValueError(f"qtype must be one of {list(GGUF_QTYPES)}, got {qtype!r}{why}")
        if qtype == "i2_s":
            return cls.from_bitnet_cpp_bytes(data, shape)
        dims = check_shape(shape)
        _check_tq_shape(dims, qtype)
        buf = _raw_bytes(data, "data")
        nb = math.prod(dims) // TQ_BLOCK
        size = TQ_PAYLOAD[qtype] + 2
        if buf.size != nb * size:
            raise ValueError(
                f"data must have {nb * size} bytes for shape {dims} in {qtype} ({nb} blocks of {size} bytes), "
                f"got {buf.size}"
            )
        blocks = buf.reshape(nb, size)
        packed = np.ascontiguousarray(blocks[:, :-2]).reshape(-1)
        scales = np.ascontiguousarray(blocks[:, -2:]).view("<f2").reshape(-1).astype(np.float32)
        t = cls._make(qtype, dims, TQ_BLOCK, None, packed, scales)
        t.values()  # validates every byte
        return t

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
    def from_bitnet_cpp_bytes(cls, data: object, shape: object) -> TernaryTensor:
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
        dims = check_shape(shape)
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


def _raw_bytes(data: object, name: str) -> np.ndarray:
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
        mv = memoryview(data)  # type: ignore[arg-type]
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


def _check_tq_shape(dims: tuple[int, ...], qtype: str) -> None:
    """``ValueError`` naming the shape when its rows do not hold a multiple of 256 values.

    Example:
        >>> _check_tq_shape((4, 3, 3), "tq2_0")
        Traceback (most recent call last):
        ValueError: tq2_0 packs blocks of 256 values along rows: shape (4, 3, 3) has rows of K = 9 values ...
    """
    k = math.prod(dims[1:]) if len(dims) >= 2 else math.prod(dims)
    if k % TQ_BLOCK or k == 0:
        raise ValueError(
            f"{qtype} packs blocks of {TQ_BLOCK} values along rows: shape {dims} has rows of K = {k} values (the "
            f"product of the dimensions after the first; a 1-D tensor is one row), not a multiple of {TQ_BLOCK}"
        )


def _tq_scales(scales: np.ndarray, block_size: int | None, n: int, qtype: str) -> np.ndarray:
    """One float16-rounded scale per 256 values from ``scales`` in blocks of ``block_size`` (see ``to``).

    Example:
        >>> _tq_scales(np.array([0.1, 3.0], np.float32), 512, 1024, "tq2_0")
        array([0.09997559, 0.09997559, 3.        , 3.        ], dtype=float32)
    """
    nb = n // TQ_BLOCK
    if scales.shape[0] == 1:
        per = np.repeat(scales, nb)
    elif block_size is not None and block_size % TQ_BLOCK == 0:
        per = np.repeat(scales, block_size // TQ_BLOCK)[:nb]
    else:
        raise ValueError(
            f"{qtype} has one scale per block of {TQ_BLOCK} values: a tensor with block_size={block_size} "
            f"changes scale inside such a block; only block_size None or a multiple of {TQ_BLOCK} converts"
        )
    with np.errstate(over="ignore"):
        half = per.astype(np.float16)
    big = np.flatnonzero(np.isinf(half) & ~np.isinf(per))
    if big.size:
        i = int(big[0])
        raise ValueError(
            f"{qtype} stores its scales as float16 (at most 65504): scale {per[i]!s} of block {i} is past it"
        )
    return half.astype(np.float32)


def _check_tq_scales(scales: np.ndarray, qtype: str) -> None:
    """``ValueError`` unless every scale of a TQ tensor is a float16 value (NaN included).

    Example:
        >>> _check_tq_scales(np.array([0.5, 0.1], np.float32), "tq1_0")
        Traceback (most recent call last):
        ValueError: scales of a tq1_0 tensor are float16 values (as GGUF stores them): scales[1] = 0.1 is not; ...
    """
    with np.errstate(over="ignore"):
        back = scales.astype(np.float16).astype(np.float32)
    bad = np.flatnonzero((back != scales) & ~np.isnan(scales))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"scales of a {qtype} tensor are float16 values (as GGUF stores them): scales[{i}] = {scales[i]!s} is "
            "not; TernaryTensor.to() rounds them"
        )


def _check_fields(
    qtype: object, shape: object, block_size: object, method: object, packed: object, scales: object
) -> tuple[QType, tuple[int, ...], int | None, Method | None, np.ndarray | DeviceArray, np.ndarray | DeviceArray]:
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
    dims = check_shape(shape)
    bs = check_positive_int(block_size, "block_size", allow_none=True)
    if method is not None:
        if not isinstance(method, str):
            raise TypeError(f"method must be None or a str, one of {sorted(METHODS)}, got {type(method).__name__}")
        _check_method(method)
    n = math.prod(dims)
    rows = rows_of(dims)
    if q in TQ_PAYLOAD:
        _check_tq_shape(dims, q)
        if bs != TQ_BLOCK:
            raise ValueError(f"a {q} tensor has block_size={TQ_BLOCK} (one scale per block), got {bs}")
    plen = ops.packed_len(q, n, rows)
    nb = ops.num_blocks(n, bs)

    def what(i: int) -> str:  # for the messages only: formatting costs a microsecond
        if i == 0:
            return f"{plen} bytes ({q}, {n} values, rows={rows})"
        return f"{nb} entries (block_size={bs}, {n} values)"

    if isinstance(packed, np.ndarray):
        if not isinstance(scales, np.ndarray):
            raise TypeError(f"scales must be a numpy.ndarray like packed, got {type(scales).__name__}")
        packed = _check_host(packed, "packed", _UINT8, plen, what, 0)
        scales = _check_host(scales, "scales", _FLOAT32, nb, what, 1)
        if q in TQ_PAYLOAD:
            _check_tq_scales(scales, q)
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


def _check_device(a: DeviceArray, name: str, dtype: str, size: int, what: str) -> None:
    # torch tensors and CuPy arrays: shape, dtype and contiguity, no GPU call
    shape = tuple(int(d) for d in a.shape)  # type: ignore[attr-defined]
    dt = str(a.dtype).removeprefix("torch.")  # type: ignore[attr-defined]
    contiguous = a.is_contiguous() if is_torch_tensor(a) else bool(a.flags.c_contiguous)  # type: ignore[attr-defined]
    if dt != dtype or len(shape) != 1 or not contiguous or shape[0] != size:
        raise ValueError(
            f"{name} must be a 1-D contiguous {dtype} array of {what}, "
            f"got dtype {dt}, shape {shape}{'' if contiguous else ', not contiguous'}"
        )


def quantize_i2s(
    x: ArrayLike,
    *,
    block_size: int | None = None,
    method: Method = "absmean",
    check_finite: bool = True,
    device: Device = "auto",
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
    check_finite = check_bool(check_finite, "check_finite")
    dev = resolve_device(x, device)
    if dev != "cpu" and is_cuda_array(x):
        shape, packed, scales = _gpu_quantize(x, bs, m, check_finite, dev)
        return TernaryTensor._make("i2_s", shape, bs, m, packed, scales)
    a = as_float32(x, "x")
    if a.size == 0:
        raise ValueError(f"x must have at least one element, got shape {a.shape}")
    n = a.size
    packed = np.empty(ops.packed_len("i2_s", n, 1), np.uint8)
    scales = np.empty(ops.num_blocks(n, bs), np.float32)
    if dev == "cpu":
        ops.quantize(a, "i2_s", bs, m, check_finite, packed, scales)
    else:  # host input computed on the GPU: the same bytes
        touch_driver()
        ops.quantize(a, "i2_s", bs, m, check_finite, packed, scales, run_on_cuda=device_index(dev))
    return TernaryTensor._trusted("i2_s", a.shape, bs, m, packed, scales)  # the arrays made above, of a's sizes


def quantize_tl1(
    x: ArrayLike,
    *,
    block_size: int | None = None,
    method: Method = "absmean",
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


@parameters_of(quantize_tl1)
def quantize_tl2(*args: Any, **kwargs: Any) -> TernaryTensor:  # noqa: ANN401 (the parameters are quantize_tl1's)
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
    return quantize_i2s(*args, **kwargs, device="cpu").to("tl2")


def _quantize_tq(qtype: str, x: ArrayLike, *, method: Method = "absmax", check_finite: bool = True) -> TernaryTensor:
    """:func:`quantize_tq2_0` and :func:`quantize_tq1_0` for ``qtype``."""
    if method != "absmax":
        raise ValueError(f"quantize_{qtype} quantizes with method='absmax' (llama.cpp's rule) only, got {method!r}")
    check_finite = check_bool(check_finite, "check_finite")
    a = as_float32(x, "x")
    if a.size == 0:
        raise ValueError(f"x must have at least one element, got shape {a.shape}")
    _check_tq_shape(a.shape, qtype)
    n, rows = a.size, rows_of(a.shape)
    packed = np.empty(ops.packed_len(qtype, n, rows), np.uint8)  # type: ignore[arg-type]
    scales = np.empty(n // TQ_BLOCK, np.float32)
    ops.quantize(a, qtype, TQ_BLOCK, "absmax", check_finite, packed, scales, rows=rows)  # type: ignore[arg-type]
    return TernaryTensor._trusted(qtype, a.shape, TQ_BLOCK, "absmax", packed, scales)  # type: ignore[arg-type]


def quantize_tq2_0(x: ArrayLike, *, method: Method = "absmax", check_finite: bool = True) -> TernaryTensor:
    """Quantize a float tensor to llama.cpp's TQ2_0: 2 bits a value, a float16 scale per 256 values.

    Bit for bit what the ``gguf`` package's numpy quantizer
    (``gguf.quants.quantize(x, GGMLQuantizationType.TQ2_0)``) and llama.cpp's
    reference write, scales and codes (see :meth:`TernaryTensor.to_gguf_bytes`).

    Args:
        x: anything ``np.asarray`` accepts, of a real dtype; cast to float32.
            Seen as rows x K (rows = ``shape[0]``, K the product of the other
            dimensions; a 1-D tensor is one row): K must be a multiple of 256
            (``ValueError`` naming the shape), so that no block straddles two
            rows. A GGUF file wants its innermost dimension to be that
            multiple: for a 2-D weight (out, in) that is ``in``.
        method: ``"absmax"``, the formats' rule (the only one): per block of
            256 values d = max|x| (float32), id = 1/d in float32 (0 when d is
            0), q = round(x * id) with x * id in float32 and ties rounded
            *away from zero* (unlike :func:`quantize_i2s`): q = sign(x) where
            |x * id| >= 0.5, else 0. The block's scale is d rounded to the
            nearest float16 (ties to even), as the file stores it; the values
            come from the float32 d.
        check_finite: raise ``ValueError`` naming the first NaN/Inf index,
            and for a block whose max|x| is 65520 or more (past float16's
            range). With ``False`` nothing raises: NaN is left out of a
            block's maximum and quantizes to 0, a block holding ±Inf gets
            scale +Inf and values 0, and a scale past float16's range is
            stored as +Inf (as the gguf package does).

    Returns:
        A :class:`TernaryTensor` with ``qtype="tq2_0"``, ``block_size=256``,
        ``method="absmax"``. ``packed``: per block, 64 bytes: the block's
        halves of 128 values, each 32 bytes, value i of a half (code q+1) in
        byte i % 32 at bit shift 2*(i // 32) (I2_S's group with the 2-bit
        fields in the opposite order). ``scales``: the float16 scales as
        float32. Convert with :meth:`TernaryTensor.to`.

    Example:
        >>> import numpy as np, bitnet_go
        >>> t = bitnet_go.quantize_tq2_0(np.array([[1.0, -0.25, 2.0, -2.0] * 64], np.float32))
        >>> t.scales, t.values()[0, :4], t.packed[:2]  # 1.0 / 2.0 = 0.5 rounds away from zero, to 1
        (array([2.], dtype=float32), array([ 1,  0,  1, -1], dtype=int8), array([170,  85], dtype=uint8))
    """
    return _quantize_tq("tq2_0", x, method=method, check_finite=check_finite)


@parameters_of(quantize_tq2_0)
def quantize_tq1_0(*args: Any, **kwargs: Any) -> TernaryTensor:  # noqa: ANN401 (the parameters are quantize_tq2_0's)
    """Quantize like :func:`quantize_tq2_0` and pack as llama.cpp's TQ1_0: base 3, 1.6875 bits a value.

    The same values and scales as ``quantize_tq2_0``, bit for bit what
    ``gguf.quants.quantize(x, GGMLQuantizationType.TQ1_0)`` writes. ``packed``
    per block of 256 values: 52 bytes, 48 of ``qs`` then 4 of ``qh``, five
    codes c = q+1 a byte in base 3: ``qs`` byte j < 32 holds
    v = 81*c[j] + 27*c[32+j] + 9*c[64+j] + 3*c[96+j] + c[128+j], byte 32+j
    (j < 16) the same over c[160+j], c[176+j], ..., c[224+j]; ``qh`` byte
    j < 4 holds v = 81*c[240+j] + 27*c[244+j] + 9*c[248+j] + 3*c[252+j].
    Each v (0..242) is stored as ceil(v*256/243), so that code k (0 the most
    significant) is ``((byte * 3**k) % 256 * 3) >> 8``.

    Example:
        >>> import numpy as np, bitnet_go
        >>> t = bitnet_go.quantize_tq1_0(np.ones(256, np.float32))
        >>> t.packed[:2], t.packed[-4:], t.bits_per_weight
        (array([255, 255], dtype=uint8), array([253, 253, 253, 253], dtype=uint8), 1.75)
    """
    return _quantize_tq("tq1_0", *args, **kwargs)
