"""The C ABI's structs (``bindings/bng_abi.h``) as ctypes structures.

Every op of the Go library takes one :class:`Tensor` descriptor per operand
(DLPack's ``DLTensor`` plus quantization parameters) and, where it has any, a
versioned parameter struct. This module only builds them; ``_core.ops`` makes
the calls. Example::

    >>> import numpy as np
    >>> x = np.zeros((2, 3), np.float32)
    >>> t = host(x, "float32")
    >>> (t.ndim, t.nbytes, t.dtype == DTYPES["float32"])
    (2, 24, True)
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from typing import Any, Final

import numpy as np

TENSOR_V1: Final = 1
QUANTIZE_V1: Final = 1
QUANTIZE_V2: Final = 2
CONV2D_V1: Final = 1
CONV2D_V2: Final = 2
OP_INFO_V1: Final = 1
HISTOGRAM_V1: Final = 1
QPARAMS_V1: Final = 1
CALIBRATE_V1: Final = 1

CPU: Final = 1  # DLPack's device codes
CUDA: Final = 2

#: dtype codes: packed ternary formats below 16, plain element types from 16.
DTYPES: Final[dict[str, int]] = {
    "i2_s": 0,
    "tl1": 1,
    "tl2": 2,
    "tq2_0": 3,
    "tq1_0": 4,
    "float32": 16,
    "int8": 17,
    "uint8": 18,
    "int4": 19,
    "uint4": 20,
    "binary": 21,
    "int32": 22,
    "int64": 23,
    "bfloat16": 24,  # numpy has no bfloat16: arrays of its uint16 bits
    "float16": 25,
}

_I32 = ctypes.c_int32
_I64 = ctypes.c_int64
_P = ctypes.c_void_p


class Tensor(ctypes.Structure):
    """``bng_tensor``: one operand (see ``bindings/bng_abi.h`` for each field)."""

    _fields_ = [
        ("version", _I32),
        ("dtype", _I32),
        ("device_type", _I32),
        ("device_id", _I32),
        ("data", _P),
        ("nbytes", _I64),
        ("ndim", _I32),
        ("axis", _I32),
        ("shape", ctypes.POINTER(_I64)),
        ("strides", ctypes.POINTER(_I64)),
        ("scales", _P),
        ("n_scales", _I64),
        ("block_size", _I64),
        ("zero_points", _P),
        ("n_zero_points", _I64),
        ("stream", ctypes.c_uint64),
    ]


class QuantizeParams(ctypes.Structure):
    """``bng_quantize_params``."""

    _fields_ = [
        ("version", _I32),
        ("method", _I32),
        ("check_finite", _I32),
        ("run_on", _I32),
        ("run_on_id", _I32),
        ("reserved", _I32),
        ("work", _P),
        ("work_len", _I64),
        # V2: the integer range of int8/uint8/int4/uint4 outputs (both 0: the dtype's)
        ("quant_min", _I32),
        ("quant_max", _I32),
    ]


class HistogramParams(ctypes.Structure):
    """``bng_histogram_params``: the range [lo, hi] binned like ``torch.histc``."""

    _fields_ = [
        ("version", _I32),
        ("absolute", _I32),
        ("check_finite", _I32),
        ("reserved", _I32),
        ("lo", ctypes.c_float),
        ("hi", ctypes.c_float),
    ]


class QParamsParams(ctypes.Structure):
    """``bng_qparams_params``: how ``bng_choose_qparams`` maps min/max to scale and zero point."""

    _fields_ = [
        ("version", _I32),
        ("dtype", _I32),
        ("mapping", _I32),
        ("quant_min", _I32),
        ("quant_max", _I32),
        ("reserved", _I32),
        ("eps", ctypes.c_float),
    ]


class CalibrateParams(ctypes.Structure):
    """``bng_calibrate_params``: a histogram calibrator's method and settings."""

    _fields_ = [
        ("version", _I32),
        ("method", _I32),
        ("num_bits", _I32),
        ("is_unsigned", _I32),
        ("start_bin", _I32),
        ("reserved", _I32),
        ("percentile", ctypes.c_double),
        ("bin_width", ctypes.c_double),
    ]


class Conv2dParams(ctypes.Structure):
    """``bng_conv2d_params`` (V2; ``weight_id``: see :func:`bitnet_go._core.arrays.weight_id`)."""

    _fields_ = [
        ("version", _I32),
        ("act_bits", _I32),
        ("algorithm", _I32),
        ("check_finite", _I32),
        ("stride", _I64 * 2),
        ("padding", _I64 * 4),
        ("dilation", _I64 * 2),
        ("groups", _I64),
        ("weight_id", ctypes.c_uint64),
    ]


class OpInfo(ctypes.Structure):
    """``bng_op_info``: what an op ran (the algorithm and the kernel's name)."""

    _fields_ = [("version", _I32), ("algorithm", _I32), ("kernel", ctypes.c_char * 64)]


_FIELDS = struct.Struct("@iiiiPqiiPPPqqPqQ")
"""``bng_tensor``'s fields in order, natively aligned: :func:`tensor` writes them all in one call
(setting a ctypes field costs about as much as the whole pack)."""

if _FIELDS.size != ctypes.sizeof(Tensor) or Tensor.stream.offset != _FIELDS.size - 8:
    raise ImportError("bitnet_go: internal: the packed layout of bng_tensor does not match the ctypes one")


@functools.lru_cache(maxsize=1024)
def _dims(shape: tuple[int, ...]) -> tuple[ctypes.Array[ctypes.c_int64], int]:
    """The int64 array of ``shape`` and its address, built once per distinct shape (the
    descriptors that point at it keep it alive, see :func:`tensor`)."""
    dims = (_I64 * len(shape))(*shape)
    return dims, ctypes.addressof(dims)


_c_char = ctypes.c_char


def address(a: np.ndarray) -> int:
    """The address of a C-contiguous array's first byte.

    ``ndarray.ctypes.data`` builds a helper object (about a microsecond); a ctypes view of a
    writable array's buffer costs a third of that. Read-only and empty arrays take the
    ``ndarray.ctypes`` way (callers keep the addresses of the read-only arrays they pass often:
    a tensor's ``_addrs`` and descriptor).

    Example::

        >>> a, r = np.zeros(3, np.float32), np.frombuffer(b"abcd", np.uint8)  # r is read-only
        >>> address(a) == a.ctypes.data, address(r) == r.ctypes.data
        (True, True)
    """
    if a.flags.writeable:
        try:
            return ctypes.addressof(_c_char.from_buffer(a))
        except (TypeError, ValueError, BufferError):  # empty, or not one block
            pass
    return int(a.ctypes.data)


def tensor(
    dtype: int,
    shape: tuple[int, ...],
    data: int,
    nbytes: int,
    axis: int = -1,
    block_size: int = 0,
    scales: int = 0,
    n_scales: int = 0,
    zero_points: int = 0,
    n_zero_points: int = 0,
    device_type: int = CPU,
    device_id: int = 0,
    stream: int = 0,
) -> Tensor:
    """A descriptor from its field values: ``dtype`` a code of :data:`DTYPES`, ``shape`` a tuple,
    the addresses as ints (0: NULL). Every builder below goes through it.

    Example::

        >>> t = tensor(DTYPES["uint8"], (2, 3), 0x1000, 6, scales=0x2000, n_scales=1)
        >>> (t.version, t.dtype, t.ndim, t.shape[1], t.axis, t.data, t.n_scales, t.zero_points)
        (1, 18, 2, 3, -1, 4096, 1, None)
    """
    dims, dims_addr = _dims(shape)
    t = Tensor()
    _FIELDS.pack_into(t, 0, TENSOR_V1, dtype, device_type, device_id, data, nbytes, len(shape), axis, dims_addr, 0,
                      scales, n_scales, block_size, zero_points, n_zero_points, stream)  # fmt: skip
    t._keep = [dims]  # the shape array lives as long as the descriptor (callers may add theirs)
    return t


def with_data(t: Tensor, data: int, nbytes: int) -> Tensor:
    """A copy of the descriptor ``t`` over other data (same dtype, shape, scales, zero points).

    Example::

        >>> u = with_data(tensor(DTYPES["uint8"], (4,), 0x1000, 4, scales=0x2000, n_scales=1), 0x3000, 4)
        >>> (u.data, u.scales, u.shape[0])
        (12288, 8192, 4)
    """
    c = Tensor.from_buffer_copy(t)
    c.data, c.nbytes = data, nbytes
    c._keep = list(t._keep)
    return c


def _tuple(shape: tuple[int, ...]) -> tuple[int, ...]:
    return shape if type(shape) is tuple else tuple(shape)


def host(
    arr: np.ndarray,
    dtype: str,
    *,
    shape: tuple[int, ...] | None = None,
    scales: np.ndarray | None = None,
    block_size: int | None = None,
    addrs: tuple[int, int] | None = None,
) -> Tensor:
    """A descriptor of the C-contiguous host array ``arr`` holding a tensor of
    ``dtype`` and ``shape`` (default ``arr.shape``; packed formats pass the
    logical shape of the values, ``arr`` being their bytes), with float32
    ``scales`` for packed formats. ``addrs``: the addresses of ``arr`` and
    ``scales`` when the caller keeps them. The arrays must outlive the call.

    Example::

        >>> w = np.zeros(32, np.uint8)
        >>> t = host(w, "i2_s", shape=(4, 32), scales=np.ones(1, np.float32))
        >>> (t.nbytes, t.n_scales)
        (32, 1)
    """
    if addrs is None:
        data, saddr = address(arr), (0 if scales is None else address(scales))
    else:
        data, saddr = addrs
    return tensor(DTYPES[dtype], arr.shape if shape is None else _tuple(shape), data, arr.nbytes,
                  block_size=block_size or 0, scales=0 if scales is None else saddr,
                  n_scales=0 if scales is None else scales.size)  # fmt: skip


_kept = threading.local()
KEPT_MAX = 256
"""Most entries a thread's kept set holds (then it starts over)."""

Kept = dict[tuple[Any, ...], Any]
"""A thread's kept set: what calls made again and again keep between them, under keys of their
own (``ops``' prepared conv2d calls: descriptors re-pointed at each call's arrays)."""


def kept_take() -> Kept | None:
    """This thread's kept set (:data:`Kept`) for one call, taken until :func:`kept_give` hands it
    back; None while it is taken: a call made on this thread meanwhile (by a signal handler run
    between a call's descriptors and the call) then builds descriptors of its own instead of
    re-pointing the ones the call is about to pass.

    Example::

        >>> k = kept_take()
        >>> kept_take() is None  # taken: a nested call gets none
        True
        >>> kept_give(None); kept_give(k)  # the nested call's hand-back, then the call's
        >>> kept_take() is k
        True
        >>> kept_give(k)
    """
    kept = getattr(_kept, "d", {})  # first use on this thread: an empty set
    _kept.d = None
    return kept


def kept_give(kept: Kept | None) -> None:
    """Hand back what :func:`kept_take` returned (None included), after the call."""
    _kept.d = kept


def device(
    addr: int,
    nbytes: int,
    dtype: str,
    shape: tuple[int, ...],
    device_id: int,
    *,
    scales: int = 0,
    n_scales: int = 0,
    block_size: int | None = None,
    stream: int = 0,
) -> Tensor:
    """A descriptor of a CUDA tensor at device address ``addr`` (``nbytes``
    bytes on GPU ``device_id``), used on CUDA stream ``stream``.

    Example::

        >>> t = device(0x7F0000000000, 32, "i2_s", (128,), 0, scales=0x7F0000001000, n_scales=1)
        >>> (t.device_type == CUDA, t.n_scales)
        (True, 1)
    """
    return tensor(DTYPES[dtype], _tuple(shape), addr or 0, nbytes, block_size=block_size or 0, scales=scales or 0,
                  n_scales=n_scales, device_type=CUDA, device_id=device_id, stream=stream)  # fmt: skip


def layout(dtype: str, shape: tuple[int, ...], block_size: int | None = None) -> Tensor:
    """A descriptor without data, for asking the library how many bytes and
    scales a tensor of ``dtype`` and ``shape`` takes (``bng_layout``).

    Example::

        >>> layout("tl1", (4, 6)).ndim
        2
    """
    return tensor(DTYPES[dtype], _tuple(shape), 0, 0, block_size=block_size or 0)


# ---------------------------------------------------------------- quantized ops (bitnet_go.functional)

QOPS_V1: Final = 1
QOPS_V2: Final = 2


class QopsParams(ctypes.Structure):
    """``bng_qops_params`` (V2): the parameters of ``bng_qlinear``, ``bng_qmatmul`` and ``bng_qconv2d``.

    ``weight_id``: 0, or a number naming the weight's codes for the life of the process (they
    never change and no other codes are ever passed with it): Go then keeps the layouts derived
    from the weight under it and finds them without comparing the codes.
    """

    _fields_ = [
        ("version", _I32),
        ("relu", _I32),
        ("reduce_range", _I32),
        ("reserved", _I32),
        ("stride", _I64 * 2),
        ("padding", _I64 * 4),
        ("dilation", _I64 * 2),
        ("groups", _I64),
        ("weight_id", ctypes.c_uint64),
    ]


# ---------------------------------------------------------------- element-wise ops (bng_qadd, bng_qrelu, ...)

QELEM_V1: Final = 1


class QElemParams(ctypes.Structure):
    """``bng_qelem_params``: ``relu`` fuses a ReLU into ``bng_qadd`` (torch's ``add_relu``)."""

    _fields_ = [("version", _I32), ("relu", _I32), ("reserved", _I32 * 2)]
