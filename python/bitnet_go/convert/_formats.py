"""The ternary formats a checkpoint converts to, and the one adapter to the TernaryTensor API.

:func:`pack_as` and :func:`gguf_payload` are the only places that ask a
:class:`~bitnet_go.TernaryTensor` for a format or for GGUF bytes; the sizes a
writer must know before it writes (:func:`layout`) come from them too.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import IO, NamedTuple

import numpy as np

from .._core import ops
from .._quantized import rows_of
from .._ternary import BITNET_CPP_TAIL, TernaryTensor, packed_len, quantize_i2s, quantize_tq1_0, quantize_tq2_0
from . import _tl_gguf

FORMATS = ("i2_s", "tl1", "tl2", "tq1_0", "tq2_0")
"""What ``--format`` accepts."""

TQ_FORMATS = ("tq1_0", "tq2_0")
TQ_BLOCK = 256
"""TQ1_0/TQ2_0 store blocks of 256 values along a row: the last dimension must be a multiple."""

BITNET_CPP_FORMATS = ("i2_s", "tl1", "tl2")


def check_format(fmt: object) -> str:
    """``fmt`` checked against :data:`FORMATS`.

    Example:
        >>> check_format("tl2")
        'tl2'
    """
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def pack_as(t: TernaryTensor, fmt: str) -> TernaryTensor:
    """``t``'s values packed as ``fmt`` (``t`` itself when it already is).

    I2_S/TL1/TL2 keep ``t``'s values and scales (``t.to(fmt)``). TQ1_0/TQ2_0
    are what the TQ quantizer makes of ``t.dequantize()`` (value times scale,
    exact), as llama.cpp's converter quantizes a BitNet model's ternarised
    weights: each 256-value block gets ``t``'s scale as float16 and the same
    values, and a block of zeros gets scale 0. Where every scale of ``t``
    holds for whole 256-value blocks and is a normal float32 of at most 65504
    (the TQ quantizer then gives back exactly the values and that scale), the
    values are repacked (``t.to(fmt)``) and the scales of zero blocks set to
    0, with no float tensor in between: the same bytes.

    Example:
        >>> pack_as(quantize_i2s(np.ones((2, 4), np.float32)), "tl1").qtype
        'tl1'
        >>> t = quantize_i2s(np.r_[np.zeros(256), np.ones(256)].astype(np.float32).reshape(2, 256))
        >>> pack_as(t, "tq2_0").scales
        array([0. , 0.5], dtype=float32)
    """
    if t.qtype == fmt:
        return t
    if fmt in TQ_FORMATS:
        if t.qtype in TQ_FORMATS or not _repacks_to_tq(t):
            quantize = quantize_tq2_0 if fmt == "tq2_0" else quantize_tq1_0
            return quantize(t.dequantize())
        u = t.to(fmt)  # type: ignore[arg-type]
        zero = u.packed.reshape(-1, u.packed.size // u.scales.size) == _zero_payload(fmt)
        scales = np.where(zero.all(axis=1), np.float32(0), u.scales)
        return TernaryTensor._make(fmt, u.shape, TQ_BLOCK, "absmax", u.packed, scales)
    return t.to(fmt)  # type: ignore[arg-type]


def _repacks_to_tq(t: TernaryTensor) -> bool:
    """Whether the TQ quantizer gives back ``t``'s values and scales (rounded to float16) from ``t.dequantize()``:
    one scale per 256-value block, each normal and at most 65504 (then ``s * float32(1/s)`` rounds to 1)."""
    if t.on_device or not (t.scales.shape[0] == 1 or (t.block_size is not None and t.block_size % TQ_BLOCK == 0)):
        return False
    s = t.scales
    return bool(np.all((s >= np.float32(2.0**-126)) & (s <= np.float32(65504))))


@lru_cache(maxsize=2)
def _zero_payload(fmt: str) -> np.ndarray:
    """The payload of a TQ block of zeros (every code 1)."""
    t = quantize_tq2_0 if fmt == "tq2_0" else quantize_tq1_0
    return t(np.zeros(TQ_BLOCK, np.float32)).packed


class Parts:
    """Bytes made of buffers written one after another, never joined into one: what
    ``gguf.GGUFWriter.write_tensor_data`` asks of an array (``nbytes``, ``tofile``). ``chunks`` makes the
    buffers (C-contiguous), afresh for each ``tofile``: a tensor converted a slice at a time keeps one slice in
    memory.

    Example:
        >>> import io
        >>> p = Parts(5, lambda: [b"ab", np.frombuffer(b"cde", np.uint8)])
        >>> f = io.BytesIO(); p.tofile(f); f.getvalue(), p.nbytes
        (b'abcde', 5)
    """

    def __init__(self, nbytes: int, chunks: Callable[[], Iterable[bytes | np.ndarray]]) -> None:
        self.nbytes, self._chunks = nbytes, chunks

    def tofile(self, f: IO[bytes]) -> None:
        """Write the buffers to ``f``; a RuntimeError if they do not add up to ``nbytes``."""
        n = 0
        for c in self._chunks():
            n += f.write(memoryview(c).cast("B"))
        if n != self.nbytes:
            raise RuntimeError(f"wrote {n} bytes of a tensor of {self.nbytes}")

    def tobytes(self) -> bytes:
        """All the bytes, joined (a copy)."""
        return b"".join(bytes(memoryview(c).cast("B")) for c in self._chunks())


def gguf_payload(t: TernaryTensor, tiling: _tl_gguf.Tiling | None = None) -> np.ndarray | Parts:
    """``t``'s bytes exactly as a GGUF file stores them: a 1-D uint8 array, or for I2_S :class:`Parts`.

    I2_S as bitnet.cpp stores it (the packed bytes, then a 32-byte tail holding
    the float32 scale: ``t.to_bitnet_cpp_bytes()``, written as ``t.packed`` and
    the tail, not copied into one buffer), TQ1_0/TQ2_0 blocks with their float16 scales
    (``to_gguf_bytes()``); TL1/TL2 tiled as bitnet.cpp's converter tiles them
    by ``tiling``, the entry of ``kernel_config.ini`` for ``t``'s shape (see
    ``bitnet_go.convert._tl_gguf``; the scale is a tensor of its own).

    Example:
        >>> t = quantize_i2s(np.ones(128, np.float32))
        >>> p = gguf_payload(t)
        >>> p.nbytes, p.tobytes() == t.to_bitnet_cpp_bytes()
        (64, True)
    """
    if t.qtype in ("tl1", "tl2"):
        if tiling is None:
            raise ValueError(f"{t.qtype} GGUF bytes are tiled by the model's kernel config: give its tiling")
        _tl_gguf.check(t.qtype, t.shape, {tuple(t.shape): tiling})  # type: ignore[dict-item]
        lay = _tl_gguf.tl1_bytes if t.qtype == "tl1" else _tl_gguf.tl2_bytes
        return lay(t.values(), tiling)
    if t.qtype == "i2_s" and t.scales.shape[0] == 1:
        host = t.cpu()
        packed = host.packed
        tail = struct.pack("<f", float(host.scales[0])) + bytes(BITNET_CPP_TAIL - 4)  # as to_bitnet_cpp_bytes
        return Parts(packed.nbytes + len(tail), lambda: (packed, tail))
    return np.frombuffer(t.to_gguf_bytes(), np.uint8)


def check_gguf_format(fmt: str, kernel_config: object = None) -> None:
    """Refuse what GGUF output cannot write, before anything is read or written: TL1/TL2 without the
    model's kernel config.

    bitnet.cpp's converter stores TL1/TL2 tiled by kernel parameters it generates
    per model (``include/kernel_config.ini``); without them the bytes cannot be laid
    out as bitnet.cpp reads them.

    Example:
        >>> check_gguf_format("i2_s")
        >>> check_gguf_format("tl1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: tl1 GGUF output needs the model's kernel config (--kernel-config PATH): ...
    """
    if fmt in ("tl1", "tl2") and kernel_config is None:
        raise ValueError(
            f"{fmt} GGUF output needs the model's kernel config (--kernel-config PATH): bitnet.cpp lays TL1/TL2 "
            "out by kernel parameters it generates per model (include/kernel_config.ini, written with the "
            "kernels by its setup_env.py / utils/codegen_tl1.py, codegen_tl2.py); or convert to i2_s "
            "(bitnet.cpp) or tq2_0/tq1_0 (llama.cpp), or to safetensors"
        )


class Layout(NamedTuple):
    """The sizes of a tensor in a format, known before it is quantized."""

    packed: int  # bytes of TernaryTensor.packed
    scales: int  # entries of TernaryTensor.scales
    gguf: int  # bytes of gguf_payload (-1 when not asked for)


@lru_cache(maxsize=256)
def layout(fmt: str, shape: tuple[int, ...], block_size: int | None, gguf: bool = False) -> Layout:
    """The sizes of a ``shape`` tensor packed as ``fmt``: from the format registry for I2_S/TL1/TL2,
    else measured once per (format, shape) on a tensor of zeros (the sizes do not depend on values).

    Example:
        >>> layout("i2_s", (4, 128), None, gguf=True)
        Layout(packed=128, scales=1, gguf=160)
    """
    if fmt in BITNET_CPP_FORMATS:
        plen = packed_len(math.prod(shape), fmt, rows_of(shape))  # type: ignore[arg-type]
        nb = ops.num_blocks(math.prod(shape), block_size)
        if not gguf:
            return Layout(plen, nb, -1)
        if fmt == "i2_s":
            return Layout(plen, nb, plen + BITNET_CPP_TAIL)
        return Layout(plen, nb, _tl_gguf.gguf_len(fmt, shape))
    t = pack_as(quantize_i2s(np.zeros(shape, np.float32), block_size=block_size, device="cpu"), fmt)
    return Layout(t.packed.size, t.scales.size, gguf_payload(t).nbytes if gguf else -1)
