"""Ternary (BitNet b1.58) quantization: ``quantize_i2s`` and ``TernaryTensor``."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from . import _lib
from ._arrays import MAX_ELEMENTS, as_float32, check_positive_int, is_torch_tensor

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
    out per row (see :func:`quantize_tl1`, :func:`quantize_tl2`).

    Example:
        >>> packed_len(129), packed_len(10, "tl1", 2), packed_len(6, "tl2")
        (64, 4, 2)
    """
    out = np.zeros(1, np.int64)
    _lib.call("bng_packed_len", QTYPES[qtype], n, rows, _lib.ptr(out))
    return int(out[0])


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


def _check_shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(int(operator_index(d)) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape must not have negative dimensions, got {dims}")
    n = math.prod(dims)
    if n > MAX_ELEMENTS:
        raise ValueError(f"shape {dims} has {n} elements: the size overflows (limit {MAX_ELEMENTS})")
    if n == 0:
        raise ValueError(f"shape {dims} has no elements")
    return dims


def operator_index(d: Any) -> int:
    """``operator.index`` that also rejects bool (a shape of ``True`` is a bug)."""
    import operator

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
        packed: np.ndarray,
        scales: np.ndarray,
    ) -> TernaryTensor:
        self = object.__new__(cls)
        if isinstance(packed, np.ndarray):
            packed.flags.writeable = False
        if isinstance(scales, np.ndarray):
            scales.flags.writeable = False
        for k, v in (
            ("qtype", qtype),
            ("shape", tuple(shape)),
            ("block_size", block_size),
            ("method", method),
            ("packed", packed),
            ("scales", scales),
        ):
            object.__setattr__(self, k, v)
        # the arrays' addresses for the C calls (numpy only; fixed, as the
        # tensor is immutable): ndarray.ctypes costs microseconds a call
        addrs = None
        if isinstance(packed, np.ndarray) and isinstance(scales, np.ndarray):
            addrs = (int(packed.ctypes.data), int(scales.ctypes.data))
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

        ``data`` is bytes-like (bytes, bytearray, memoryview, np.uint8 array) of
        exactly ``ceil(n/128) * 32 + 32`` bytes for ``n = prod(shape)``. The
        result has ``block_size=None`` and ``method=None`` (bitnet.cpp does not
        record it). A code 3 anywhere is a ``ValueError``.

        Example:
            >>> import bitnet_go
            >>> t = bitnet_go.quantize_i2s([0.5, -1.0, 2.0])
            >>> u = bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(t.to_bitnet_cpp_bytes(), (3,))
            >>> bool((u.values() == t.values()).all() and u.scales[0] == t.scales[0])
            True
        """
        dims = _check_shape(shape)
        try:
            buf = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        except TypeError:
            raise TypeError(f"data must be bytes-like, got {type(data).__name__}") from None
        n = math.prod(dims)
        want = packed_len(n) + BITNET_CPP_TAIL
        if buf.size != want:
            raise ValueError(f"data must have {want} bytes for shape {dims} ({n} values), got {buf.size}")
        packed = buf[: want - BITNET_CPP_TAIL].copy()
        scales = buf[want - BITNET_CPP_TAIL : want - BITNET_CPP_TAIL + 4].copy().view("<f4").astype(np.float32)
        t = cls._make("i2_s", dims, None, None, packed, scales)
        t.values()  # validates every code
        return t

    def __repr__(self) -> str:
        return (
            f"TernaryTensor(qtype={self.qtype!r}, shape={self.shape}, block_size={self.block_size}, "
            f"method={self.method!r}, scales={self.scales.shape[0]}, nbytes={self.nbytes}, "
            f"bits_per_weight={self.bits_per_weight:.3f})"
        )


def _rebuild(
    qtype: str,
    shape: tuple[int, ...],
    block_size: int | None,
    method: str | None,
    packed: np.ndarray,
    scales: np.ndarray,
) -> TernaryTensor:
    return TernaryTensor._make(qtype, shape, block_size, method, packed, scales)


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
