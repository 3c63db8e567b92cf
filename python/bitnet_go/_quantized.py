"""``QuantizedTensor``: what every quantized format holds, and the methods that do not depend on it.

A quantized tensor is immutable: ``packed`` data in its format (``qtype``),
float32 ``scales`` (one per block of ``block_size`` elements, or one),
``zero_points`` (None for symmetric formats such as the ternary ones), the
logical ``shape``, and ``axis`` (None: blocks run over the flattened, C-order
tensor). Its arrays are numpy arrays (read-only) or GPU arrays of one
framework (torch, CuPy) on one device. Each format is a subclass
(:class:`~bitnet_go.TernaryTensor` for ``"i2_s"``, ``"tl1"``, ``"tl2"``,
``"tq2_0"``, ``"tq1_0"``) that
makes and checks its tensors and says how they pickle.
"""

from __future__ import annotations

import html
import math
import operator
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ._core import descriptor, ops
from ._core.arrays import MAX_ELEMENTS
from ._core.devices import DeviceArray, device_of, to_host
from ._core.types import CODE_RANGES, PLAIN_DTYPES, TERNARY_QTYPES, QType
from ._gpu import dequantize as _gpu_dequantize

_Q = TypeVar("_Q", bound="QuantizedTensor")
"""A subclass of QuantizedTensor: methods that make a tensor of ``self``'s format return its type."""


def _max_dims() -> int:
    """numpy's limit on dimensions (64 in numpy 2, 32 before)."""
    try:
        np.empty((1,) * 64)
        return 64
    except ValueError:
        return 32


_TERNARY = TERNARY_QTYPES

MAX_DIMS = _max_dims()
"""Most dimensions a tensor may have (numpy's limit: its values must be able to take its shape)."""


def operator_index(d: object) -> int:
    """``operator.index`` that also rejects bool (a shape of ``True`` is a bug).

    Example:
        >>> operator_index(np.int64(3))
        3
    """
    if isinstance(d, (bool, np.bool_)):
        raise TypeError("bool is not a dimension")
    return operator.index(d)  # type: ignore[arg-type]


def check_shape(shape: object) -> tuple[int, ...]:
    """A shape as a tuple of ints: at most :data:`MAX_DIMS` dimensions, none negative, 1 to 2**60 elements.

    Example:
        >>> check_shape([2, np.int64(3)])
        (2, 3)
    """
    if type(shape) is tuple and all(type(d) is int for d in shape):
        dims: tuple[int, ...] = shape  # the common case (an ndarray's shape), without conversions
    else:
        try:
            dims = tuple(int(operator_index(d)) for d in shape)  # type: ignore[attr-defined]
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


def rows_of(shape: tuple[int, ...]) -> int:
    """Rows of the rows x K view that row-wise formats (TL1, TL2, TQ2_0, TQ1_0) use: ``shape[0]``, or 1 for rank <= 1.

    Example:
        >>> rows_of((8, 3, 3, 3)), rows_of((5,))
        (8, 1)
    """
    return shape[0] if len(shape) >= 2 else 1


class QuantizedTensor:
    """An immutable quantized tensor: packed data in format ``qtype`` with float32 scales.

    Made by the quantize functions (``bitnet_go.quantize_i2s``, ...), never by
    hand; each format is a subclass (:class:`~bitnet_go.TernaryTensor`).

    Attributes:
        qtype: the format (``"i2_s"``, ``"tl1"``, ``"tl2"``, ``"tq2_0"``, ``"tq1_0"``).
        shape: the logical shape.
        block_size: elements per scale, or ``None`` for one scale.
        axis: None: the blocks run over the flattened (C-order) tensor.
        packed: the packed data: read-only ``np.uint8``, or a GPU array.
        scales: float32, one per block: read-only numpy, or a GPU array.
        zero_points: None for symmetric formats.

    Example:
        >>> import bitnet_go
        >>> t = bitnet_go.quantize_i2s([1.0, -1.0, 0.0])
        >>> isinstance(t, bitnet_go.QuantizedTensor), t.zero_points, t.axis, t.device
        (True, None, None, 'cpu')
    """

    __slots__ = ("qtype", "shape", "block_size", "axis", "packed", "scales", "zero_points", "_addrs", "_desc")
    qtype: QType
    shape: tuple[int, ...]
    block_size: int | None
    axis: int | None
    packed: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(f"{type(self).__name__} is made by bitnet_go's quantize functions, not constructed directly")

    def _init(
        self,
        qtype: QType,
        shape: tuple[int, ...],
        block_size: int | None,
        packed: np.ndarray | DeviceArray,
        scales: np.ndarray | DeviceArray,
        *,
        zero_points: np.ndarray | DeviceArray | None = None,
        axis: int | None = None,
        desc: descriptor.Tensor | None = None,
    ) -> None:
        """Set the fields of a new tensor (already checked by the subclass); numpy arrays become read-only.

        ``desc``: the descriptor of these very arrays that the op which made them built (see
        :meth:`PlainTensor._descriptor`), kept for the next call.
        """
        host = isinstance(packed, np.ndarray)
        # the arrays' addresses for the C calls (numpy only; fixed, as the
        # tensor is immutable and its arrays checked): taken once, not per call
        if not host:
            addrs = None
        elif desc is not None:
            addrs = (desc.data, desc.scales)
        else:
            addrs = (descriptor.address(packed), descriptor.address(scales))  # type: ignore[arg-type]
        if host:  # setflags costs half of flags.writeable's setter
            packed.setflags(write=False)  # type: ignore[union-attr]
            scales.setflags(write=False)  # type: ignore[union-attr]
            if zero_points is not None:
                zero_points.setflags(write=False)  # type: ignore[union-attr]
        setattr_ = object.__setattr__
        setattr_(self, "qtype", qtype)
        setattr_(self, "shape", shape)
        setattr_(self, "block_size", block_size)
        setattr_(self, "axis", axis)
        setattr_(self, "packed", packed)
        setattr_(self, "scales", scales)
        setattr_(self, "zero_points", zero_points)
        setattr_(self, "_addrs", addrs)
        setattr_(self, "_desc", desc)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable (cannot delete {name!r})")

    # -- what each format provides

    def _reduce_host(self) -> tuple[Callable[..., QuantizedTensor], tuple[object, ...]]:
        """``__reduce__`` of this (host) tensor: the format's rebuild function and its arguments."""
        raise NotImplementedError

    def _with_arrays(self: _Q, packed: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None) -> _Q:
        """The same tensor holding these (host) arrays, checked as every new tensor is."""
        raise NotImplementedError

    # -- generic

    def __reduce__(self) -> tuple[Callable[..., QuantizedTensor], tuple[object, ...]]:
        return self.cpu()._reduce_host()  # pickles hold host arrays

    @property
    def device(self) -> str:
        """``"cpu"`` for numpy arrays, else the device of ``packed`` (e.g. ``"cuda:0"``)."""
        if isinstance(self.packed, np.ndarray):
            return "cpu"
        return device_of(self.packed)

    @property
    def on_device(self) -> bool:
        """True when the arrays are GPU arrays (see ``bitnet_go.cuda``)."""
        return not isinstance(self.packed, np.ndarray)

    def cpu(self: _Q) -> _Q:
        """This tensor with numpy arrays (``self`` if already; waits for the GPU copy).

        Example:
            >>> import bitnet_go
            >>> t = bitnet_go.quantize_i2s([1.0, -1.0])
            >>> t.cpu() is t
            True
        """
        if not self.on_device:
            return self
        zp = None if self.zero_points is None else to_host(self.zero_points)
        return self._with_arrays(to_host(self.packed), to_host(self.scales), zp)

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
        """Bytes held: packed data, scales and zero points."""
        zp = 0 if self.zero_points is None else int(self.zero_points.nbytes)
        return int(self.packed.nbytes) + int(self.scales.nbytes) + zp

    @property
    def bits_per_weight(self) -> float:
        """Storage bits per element, scales (and zero points) included."""
        return self.nbytes * 8 / self.size

    def dequantize(self) -> np.ndarray:
        """The reconstructed values as a new float32 array of ``shape``.

        For a GPU tensor, a float32 array of its framework on its device
        (see ``bitnet_go.cuda``).

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([2.0, -2.0, 0.0], method="absmax").dequantize()
            array([ 2., -2.,  0.], dtype=float32)
        """
        if self.on_device:
            return _gpu_dequantize(  # type: ignore[return-value]
                self.packed, self.scales, self.block_size, self.shape, self.size
            )
        out = np.empty(self.size, np.float32)
        ops.dequantize(self.qtype, self.packed, rows_of(self.shape), self.block_size, self.scales, out)
        return out.reshape(self.shape)

    # -- the names every quantized tensor answers (torch's and torchao's vocabulary)

    @property
    def dtype(self) -> str:
        """The element type: ``"ternary"`` (any ternary packing), ``"int8"``, ``"uint8"``, ``"int4"``,
        ``"uint4"`` or ``"binary"``.

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([1.0, -1.0]).dtype
            'ternary'
        """
        return "ternary" if self.qtype in _TERNARY else str(self.qtype)

    @property
    def scale(self) -> np.ndarray:
        """The float32 scales (``scales``): one (per tensor), one per channel along ``axis``, or one
        per group of ``group_size`` consecutive elements along the last axis."""
        return self.scales

    @property
    def zero_point(self) -> np.ndarray | None:
        """The int32 zero points, one per scale (None for ternary and binary tensors)."""
        return self.zero_points

    @property
    def group_size(self) -> int | None:
        """Elements per scale along the flattened tensor (per group along the last axis), or None."""
        return self.block_size

    def int_repr(self) -> np.ndarray:
        """The integer values as a new array of ``shape`` (int8; uint8 for unsigned types; binary
        gives -1/+1 and ternary -1/0/+1 as int8).

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([2.0, -2.0, 0.0]).int_repr()
            array([ 1, -1,  0], dtype=int8)
        """
        return self.values()  # type: ignore[attr-defined,no-any-return]  # ternary formats

    # -- array behaviour (numpy's vocabulary, for notebooks and generic code)

    def __len__(self) -> int:
        """The first dimension, as ``len()`` of a numpy array; ``TypeError`` for a 0-d tensor.

        ``bool(t)`` stays True whatever the shape (see :meth:`__bool__`).

        Example:
            >>> import bitnet_go
            >>> len(bitnet_go.quantize_i2s([[1.0, -1.0, 0.0], [0.5, 0.0, 2.0]]))
            2
            >>> len(bitnet_go.quantize_i2s(1.0))
            Traceback (most recent call last):
            TypeError: len() of a 0-d TernaryTensor (shape ()); use .size for the number of elements
        """
        if not self.shape:
            raise TypeError(f"len() of a 0-d {type(self).__name__} (shape ()); use .size for the number of elements")
        return self.shape[0]

    def __bool__(self) -> bool:
        """Always True, as before ``__len__`` existed (a tensor is never empty: it has >= 1 element).

        Example:
            >>> import bitnet_go
            >>> bool(bitnet_go.quantize_i2s(0.0))
            True
        """
        return True

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        """Refuse the implicit conversion to a numpy array: ``np.asarray(t)`` and ``np.array(t)`` raise
        ``TypeError`` (they would otherwise give a 0-d object array holding ``t``).

        A quantized tensor has two arrays one might mean: its integer codes (``values()`` for ternary
        tensors, ``int_repr()`` for every type) and the reconstructed floats (``dequantize()``).

        Example:
            >>> import numpy as np, bitnet_go
            >>> np.asarray(bitnet_go.quantize_i2s([1.0, -1.0]))
            Traceback (most recent call last):
            TypeError: TernaryTensor does not convert to a numpy array implicitly: call .values() ...
        """
        codes = ".values() (or .int_repr())" if self.qtype in _TERNARY else ".int_repr()"
        raise TypeError(
            f"{type(self).__name__} does not convert to a numpy array implicitly: call {codes} for the "
            f"integer codes or .dequantize() for the float32 values"
        )

    def _host_scales(self) -> np.ndarray:
        """The scales as a numpy array (a copy from the GPU for a device tensor)."""
        return self.scales if isinstance(self.scales, np.ndarray) else to_host(self.scales)

    def scales_summary(self) -> dict[str, float | int]:
        """Count, min, max and mean of the scales (NaN/Inf scales counted as ``non_finite`` and left
        out of min/max/mean, which are NaN when no scale is finite).

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([1.0, -3.0, 2.0, 0.0], block_size=2, method="absmax").scales_summary()
            {'count': 2, 'min': 2.0, 'max': 3.0, 'mean': 2.5, 'non_finite': 0}
        """
        s = self._host_scales().astype(np.float64)
        finite = s[np.isfinite(s)]
        if finite.size:
            lo, hi, mean = float(finite.min()), float(finite.max()), float(finite.mean())
        else:
            lo = hi = mean = math.nan
        return {"count": int(s.size), "min": lo, "max": hi, "mean": mean, "non_finite": int(s.size - finite.size)}

    def histogram(self) -> list[tuple[str, int]]:
        """Counts of the integer codes, as ``(label, count)`` pairs in code order.

        Ternary tensors: ``-1``, ``0``, ``+1``. binary: ``-1``, ``+1``. int4/uint4: each of the 16
        codes. int8/uint8: 16 bins of 16 codes (``"-128..-113"``, ...). Host tensors only
        (``ValueError`` for a GPU tensor: call ``.cpu()`` first). Counted in chunks, so the extra memory
        is the integer codes (one byte per element) and a chunk.

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize_i2s([2.0, -2.0, 0.0, 2.0], method="absmax").histogram()
            [('-1', 1), ('0', 1), ('+1', 2)]
            >>> bitnet_go.quantize([0.0, 1.0, 2.0], "uint4", scale=1.0, zero_point=0).histogram()[:3]
            [('0', 1), ('1', 1), ('2', 1)]
        """
        if self.on_device:
            raise ValueError(f"histogram() works on host tensors: call .cpu() first (this one is on {self.device})")
        codes = self.int_repr().reshape(-1).view(np.uint8)
        counts = np.zeros(256, np.int64)
        chunk = 1 << 20
        for i in range(0, codes.size, chunk):
            counts += np.bincount(codes[i : i + chunk], minlength=256)
        lo, hi = CODE_RANGES[self.dtype]
        width = 16 if hi - lo == 255 else 1  # 8-bit types: 16 bins of 16 codes
        signed = lo < 0  # a signed code c was counted at its byte, c & 0xFF
        out: list[tuple[str, int]] = []
        for start in range(lo, hi + 1, width):
            end = min(start + width - 1, hi)
            n = sum(int(counts[c & 0xFF if signed else c]) for c in range(start, end + 1))
            if self.dtype == "binary" and start == 0:
                continue  # binary has no code 0
            label = f"{start:+d}" if self.dtype in ("ternary", "binary") and start else str(start)
            out.append((label if width == 1 else f"{start}..{end}", n))
        return out

    def _repr_html_(self) -> str:
        """A small table for notebooks: shape, type, scales summary, a histogram of the codes,
        and the bytes held against float32's.

        Plain HTML (the histogram's bars are inline-styled spans, no plotting library).

        Example:
            >>> import bitnet_go
            >>> h = bitnet_go.quantize_i2s([1.0, -1.0, 0.0])._repr_html_()
            >>> "<table" in h and "+1" in h and "float32" in h
            True
        """
        esc = html.escape
        s = self.scales_summary()
        scales = f"{s['count']}: min {s['min']:.4g}, max {s['max']:.4g}, mean {s['mean']:.4g}"
        if s["non_finite"]:
            scales += f" ({s['non_finite']} NaN/Inf)"
        f32 = 4 * self.size
        rows = [("dtype", self.dtype), ("shape", self.shape), ("axis", self.axis), ("group_size", self.group_size),
                ("scales", scales), ("zero_points", None if self.zero_points is None else self._zp_summary()),
                ("nbytes", f"{self.nbytes:,} (float32: {f32:,}, {_ratio(f32, self.nbytes)})"),
                ("bits per element", f"{self.bits_per_weight:.3f}"), ("device", self.device)]  # fmt: skip
        if self.qtype in _TERNARY:
            rows.insert(1, ("packing", self.qtype))
        body = "".join(f"<tr><th style='text-align:left'>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in rows)
        if self.on_device:
            hist = "<tr><th style='text-align:left'>values</th><td>on the GPU: .cpu() shows the histogram</td></tr>"
        else:
            hist = self._histogram_html()
        return f"<table><caption>{esc(type(self).__name__)}</caption>{body}{hist}</table>"

    def _zp_summary(self) -> str:
        zp = self.zero_points if isinstance(self.zero_points, np.ndarray) else to_host(self.zero_points)
        return f"{zp.size}: min {int(zp.min())}, max {int(zp.max())}"

    def _histogram_html(self) -> str:
        """The histogram's rows: code (or bin), count, share, and a bar."""
        hist = self.histogram()
        top = max(n for _, n in hist) or 1
        cells = []
        for label, n in hist:
            width = round(120 * n / top)
            bar = f"<span style='display:inline-block;height:0.8em;width:{width}px;background:#4c72b0'></span>"
            cells.append(f"<tr><td style='text-align:right'>{html.escape(label)}</td>"
                         f"<td style='text-align:right'>{n:,}</td>"
                         f"<td style='text-align:right'>{100 * n / self.size:.1f}%</td>"
                         f"<td style='text-align:left'>{bar}</td></tr>")  # fmt: skip
        inner = "<table><tr><th>code</th><th>count</th><th>share</th><th></th></tr>" + "".join(cells) + "</table>"
        return f"<tr><th style='text-align:left;vertical-align:top'>values</th><td>{inner}</td></tr>"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(qtype={self.qtype!r}, shape={self.shape}, block_size={self.block_size}, "
            f"scales={self.scales.shape[0]}, nbytes={self.nbytes}, bits_per_weight={self.bits_per_weight:.3f})"
        )


def _ratio(f32: int, nbytes: int) -> str:
    """``"14.2x smaller"`` (or ``"2.2x larger"``, for tiny tensors whose scales outweigh the data).

    Example:
        >>> _ratio(32768, 2304), _ratio(4, 9)
        ('14.2x smaller', '2.2x larger')
    """
    return f"{f32 / nbytes:.1f}x smaller" if f32 >= nbytes else f"{nbytes / f32:.1f}x larger"


def dequantize(t: QuantizedTensor) -> np.ndarray:
    """Reconstruct float32 values from a quantized tensor (``t.dequantize()``).

    Example:
        >>> import bitnet_go
        >>> bitnet_go.dequantize(bitnet_go.quantize_i2s([1.0, -1.0]))
        array([ 1., -1.], dtype=float32)
    """
    if not isinstance(t, QuantizedTensor):
        raise TypeError(f"t must be a QuantizedTensor (e.g. a TernaryTensor), got {type(t).__name__}")
    return t.dequantize()


_INT_DTYPE = {"int8": np.int8, "uint8": np.uint8, "int4": np.int8, "uint4": np.uint8, "binary": np.int8}


class PlainTensor(QuantizedTensor):
    """A quantized tensor of int8, uint8, int4, uint4 or binary values (``bitnet_go.quantize``).

    ``packed`` holds the values' bytes: one per value (int8, uint8), two per byte
    (int4, uint4: element 2i in the low nibble of byte i, two's complement for int4,
    torch ``quint4x2``'s layout), or eight per byte (binary: bit b of byte j is element
    8j+b, set for +1). ``scales`` (float32) and ``zero_points`` (int32; None for binary)
    are per tensor (one), per channel along ``axis``, or per group of ``block_size``
    consecutive elements of the flattened tensor (groups along the last axis).
    ``dequantize()`` gives ``scale * (q - zero_point)``.

    Example:
        >>> import bitnet_go
        >>> q = bitnet_go.quantize([0.0, 1.0, 2.0], "uint8", scale=0.5, zero_point=3)
        >>> q.int_repr(), q.dequantize()
        (array([3, 5, 7], dtype=uint8), array([0., 1., 2.], dtype=float32))
    """

    __slots__ = ()

    @classmethod
    def _make(
        cls,
        dtype: str,
        shape: tuple[int, ...],
        axis: int | None,
        block_size: int | None,
        packed: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray | None,
    ) -> PlainTensor:
        """A new tensor from checked-here fields (host arrays); values are checked by Go when used."""
        if dtype not in PLAIN_DTYPES:
            raise ValueError(f"dtype must be one of {list(PLAIN_DTYPES)}, got {dtype!r}")
        dims = check_shape(shape) if shape != () else ()
        n = math.prod(dims)
        if axis is not None:
            axis = operator_index(axis)
            if not 0 <= axis < max(len(dims), 1):
                raise ValueError(f"axis must be in [0, {len(dims)}), got {axis}")
            groups = dims[axis] if dims else 1
            if block_size is not None:
                raise ValueError("a tensor has an axis or a block_size, not both")
        elif block_size is not None:
            block_size = operator_index(block_size)
            if block_size < 1:
                raise ValueError(f"block_size must be >= 1, got {block_size}")
            groups = -(-n // block_size)
        else:
            groups = 1
        for name, a, dt, size in (("packed", packed, np.uint8, ops.packed_bytes(dtype, n)),
                                  ("scales", scales, np.float32, groups),
                                  ("zero_points", zero_points, np.int32, groups)):  # fmt: skip
            if a is None:
                continue
            if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or not a.flags.c_contiguous:
                raise TypeError(f"{name} must be a 1-D C-contiguous numpy {np.dtype(dt).name} array")
            if a.size != size:
                raise ValueError(f"{name} must have {size} entries for this dtype, shape and grouping, got {a.size}")
        if dtype == "binary" and zero_points is not None:
            raise ValueError("binary tensors have no zero points")
        self = object.__new__(cls)
        self._init(dtype, dims, block_size, packed, scales, zero_points=zero_points, axis=axis)  # type: ignore[arg-type]
        return self

    @classmethod
    def _trusted(
        cls,
        dtype: str,
        shape: tuple[int, ...],
        axis: int | None,
        block_size: int | None,
        packed: np.ndarray,
        scales: np.ndarray,
        zero_points: np.ndarray | None,
        desc: descriptor.Tensor | None = None,
    ) -> PlainTensor:
        """A new tensor from the output of a bitnet_go op, without :meth:`_make`'s checks: the op
        made these host arrays (1-D, C-contiguous, of the right dtypes and sizes) and Go checked
        the fields; ``desc`` is the descriptor the op passed for them
        (:func:`bitnet_go._core.ops.grouped`), if it has one, kept for the tensor's next call.

        Example:
            >>> import numpy as np
            >>> from bitnet_go._core import ops
            >>> p, s, z = np.uint8([3, 5]), np.float32([0.5]), np.int32([3])
            >>> d = ops.grouped(p, "uint8", (2,), None, None, s, z)
            >>> q = PlainTensor._trusted("uint8", (2,), None, None, p, s, z, d)
            >>> q.dequantize(), q._descriptor() is q._desc
            (array([0., 1.], dtype=float32), True)
        """
        self = object.__new__(cls)
        self._init(dtype, shape, block_size, packed, scales, zero_points=zero_points, axis=axis, desc=desc)  # type: ignore[arg-type]
        return self

    def _descriptor(self) -> descriptor.Tensor:
        """This host tensor's descriptor (:func:`bitnet_go._core.ops.grouped`; a 0-d tensor as shape
        ``(1,)``), built at the first call and kept: the tensor and its arrays never change, and Go
        only reads it. Callers must not modify it."""
        d = self._desc
        if d is None:
            d = ops.grouped(self.packed, self.qtype, self.shape, self.axis, self.block_size, self.scales,
                            self.zero_points, self._addrs)  # fmt: skip
            object.__setattr__(self, "_desc", d)
        return d

    def _reduce_host(self) -> tuple[Callable[..., QuantizedTensor], tuple[object, ...]]:
        """Pickled as :meth:`_make` and its seven fields, checked again when unpickled.

        Example:
            >>> import pickle, bitnet_go
            >>> q = bitnet_go.quantize([1.0, -1.0], "int8", scale=0.5, zero_point=0)
            >>> pickle.loads(pickle.dumps(q)).int_repr()
            array([ 2, -2], dtype=int8)
        """
        zp = None if self.zero_points is None else np.array(self.zero_points)
        return (PlainTensor._make, (self.qtype, self.shape, self.axis, self.block_size, np.array(self.packed),
                                 np.array(self.scales), zp))  # fmt: skip

    def _with_arrays(self, packed: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None) -> QuantizedTensor:
        return PlainTensor._make(self.qtype, self.shape, self.axis, self.block_size, packed, scales, zero_points)

    def int_repr(self) -> np.ndarray:
        """The integer values as a new array of ``shape``: int8 (int8, int4, binary: -1/+1) or uint8.

        Example:
            >>> import bitnet_go
            >>> bitnet_go.quantize([-1.0, 2.0, 7.0], "int4", scale=1.0, zero_point=0).int_repr()
            array([-1,  2,  7], dtype=int8)
        """
        n, p = self.size, self.packed
        if self.qtype in ("int8", "uint8"):
            out = p.view(_INT_DTYPE[self.qtype]).copy()
        elif self.qtype in ("int4", "uint4"):
            nib = np.empty(2 * p.size, np.uint8)
            nib[0::2], nib[1::2] = p & 0x0F, p >> 4
            nib = nib[:n]
            out = nib.astype(np.int8) - ((nib >= 8) * 16).astype(np.int8) if self.qtype == "int4" else nib
        else:
            bits = np.unpackbits(p, bitorder="little")[:n].astype(np.int8)
            out = 2 * bits - 1
        return np.ascontiguousarray(out, _INT_DTYPE[self.qtype]).reshape(self.shape)

    def dequantize(self, out: np.ndarray | None = None) -> np.ndarray:
        """``scale * (q - zero_point)`` (binary: ``±scale``) as a new float32 array of ``shape``,
        or written into ``out`` (a writable C-contiguous float32 array of ``shape``) and returned.

        ``out`` saves the allocation: a fresh array's pages are faulted in and zeroed by the
        kernel on first write, which costs about as much as the dequantization itself for large
        tensors.

        Example:
            >>> import bitnet_go, numpy as np
            >>> q = bitnet_go.quantize([1.0, -3.0], "binary")
            >>> q.dequantize()
            array([ 2., -2.], dtype=float32)
            >>> buf = np.empty(2, np.float32); q.dequantize(out=buf) is buf
            True
        """
        if out is None:
            out = np.empty(self.shape, np.float32)
        else:
            if not isinstance(out, np.ndarray):
                raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
            if out.dtype != np.float32 or out.shape != self.shape:
                raise ValueError(f"out must be float32 of shape {self.shape}, got {out.dtype} {out.shape}")
            if not (out.flags.c_contiguous and out.flags.writeable):
                raise ValueError("out must be C-contiguous and writable")
        ops.dequantize_to(self._descriptor(), out)
        return out

    def to(self, device: str) -> PlainTensor:
        """This tensor on ``device``: ``"cpu"`` is :meth:`cpu` (``self``: these tensors live on the
        host). The GPU kernels take ternary weights only (:meth:`TernaryTensor.to
        <bitnet_go.TernaryTensor.to>`), so ``"cuda"``/``"cuda:N"`` is a ``ValueError``, as is a
        dtype: requantize with :func:`bitnet_go.functional.requantize` (int8/uint8) or
        ``bitnet_go.quantize(q.dequantize(), dtype, ...)``.

        Example:
            >>> import bitnet_go
            >>> q = bitnet_go.quantize([0.0, 1.0], "int8", scale=0.5)
            >>> q.to("cpu") is q
            True
        """
        if isinstance(device, str) and device == "cpu":
            return self.cpu()
        if isinstance(device, str) and (device == "cuda" or device.startswith("cuda:")):
            raise ValueError(f"{self.qtype} tensors stay on the host: the GPU kernels take ternary weights only "
                             f"(bitnet_go.quantize_i2s(w).to({device!r}))")  # fmt: skip
        if isinstance(device, str) and device in PLAIN_DTYPES + TERNARY_QTYPES + ("ternary",):
            raise ValueError(f"to() moves a tensor between devices; for another dtype use "
                             f"bitnet_go.functional.requantize (int8/uint8) or bitnet_go.quantize(q.dequantize(), "
                             f"{device!r}, ...), got {device!r}")  # fmt: skip
        raise ValueError(f"device must be 'cpu' (these tensors live on the host), got {device!r}")

    def __repr__(self) -> str:
        where = (f"axis={self.axis}" if self.axis is not None
                 else f"group_size={self.block_size}" if self.block_size else "per_tensor")  # fmt: skip
        return (f"QuantizedTensor(dtype={self.qtype!r}, shape={self.shape}, {where}, scales={self.scales.shape[0]}, "
                f"nbytes={self.nbytes}, bits_per_element={self.bits_per_weight:.3f})")  # fmt: skip


_rebuild_plain = PlainTensor._make
"""Unpickle a :class:`PlainTensor` (every field checked as a new tensor's): the name pickles of
earlier versions call."""
