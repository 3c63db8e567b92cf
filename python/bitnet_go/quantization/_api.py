"""``bitnet_go.quantize`` and ``bitnet_go.choose_qparams``: int8, uint8, int4, uint4 and binary
quantization with torch's and torchao's exact semantics (the heavy work in Go)."""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Literal, Protocol, Union, get_args

import numpy as np
from numpy.typing import ArrayLike

from .._core import descriptor, ops
from .._core.arrays import as_float32, as_host, check_bool, check_int
from .._core.types import CODE_RANGES, INT_DTYPES, PLAIN_DTYPES, TORCH_QDTYPES
from .._quantized import PlainTensor, QuantizedTensor

if TYPE_CHECKING:
    from .._ternary import TernaryTensor

QDtype = Literal["int8", "uint8", "int4", "uint4", "binary"]
"""Element types of ``quantize`` besides ``"ternary"``."""

Scheme = Literal["affine", "symmetric"]
"""torch.ao's observer schemes (``torch.per_tensor_affine``/``per_channel_affine``, ``..._symmetric``)."""

Mapping = Literal["symmetric", "symmetric_no_clipping_err", "asymmetric"]
"""torchao's ``MappingType`` names (``choose_qparams_affine``)."""

DTYPE_RANGES: dict[str, tuple[int, int]] = {d: CODE_RANGES[d] for d in INT_DTYPES}
"""The full integer range of each type."""

TORCH_EPS = float(np.finfo(np.float32).eps)
"""torch.ao observers' default eps: ``torch.finfo(torch.float32).eps``."""
TORCHAO_EPS = float(np.finfo(np.float32).smallest_normal)
"""torchao ``choose_qparams_affine``'s default eps for float32 input: ``finfo(float32).smallest_normal``."""


class QParamsSource(Protocol):
    """What ``quantize(observer=...)`` takes: anything with ``calculate_qparams()`` (the observers
    and calibrators of :mod:`bitnet_go.quantization`)."""

    dtype: str

    def calculate_qparams(self) -> tuple[np.ndarray, np.ndarray]: ...


def check_dtype(dtype: object, allowed: tuple[str, ...] = PLAIN_DTYPES, name: str = "dtype") -> str:
    """``dtype`` if it is one of ``allowed`` (``TypeError`` for a non-str, ``ValueError`` otherwise).

    Example:
        >>> check_dtype("int4")
        'int4'
    """
    if not isinstance(dtype, str):
        raise TypeError(f"{name} must be a str, one of {list(allowed)}, got {type(dtype).__name__} {dtype!r}")
    if dtype not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {dtype!r}")
    return dtype


def qrange(
    dtype: str,
    reduce_range: bool = False,
    quant_min: int | None = None,
    quant_max: int | None = None,
    *,
    symmetric: bool = False,
) -> tuple[int, int, bool]:
    """The integer range [qmin, qmax] torch.ao's observers use, and whether it is a custom one.

    Default ranges are the type's (``reduce_range`` halves int8 to [-64, 63] and uint8 to
    [0, 127]; torch ignores it for 4-bit types, refused here, as it is for uint8 with a
    ``symmetric`` scheme, as torch refuses it); a custom range (both bounds given) must lie in
    the type's range and have qmin < qmax, and ``reduce_range`` halves it as torch does
    (``qmin // 2``, ``qmax // 2``). The bounds are checked as given, before halving (Go checks
    only the range it is passed).

    Example:
        >>> qrange("uint8", True), qrange("int8", False, -100, 100)
        ((0, 127, False), (-100, 100, True))
    """
    lo, hi = DTYPE_RANGES[dtype]
    check_bool(reduce_range, "reduce_range")
    if symmetric and reduce_range and dtype == "uint8":
        raise ValueError("reduce_range is not supported with the symmetric scheme for uint8 (as in torch)")
    if (quant_min is None) != (quant_max is None):
        raise ValueError("quant_min and quant_max must be given together (or neither)")
    if quant_min is not None:
        qmin, qmax = check_int(quant_min, "quant_min"), check_int(quant_max, "quant_max")
        if not lo <= qmin <= hi:
            raise ValueError(f"quant_min must be in [{lo}, {hi}] for {dtype}, got {qmin}")
        if not lo <= qmax <= hi:
            raise ValueError(f"quant_max must be in [{lo}, {hi}] for {dtype}, got {qmax}")
        if not qmin < qmax:
            raise ValueError(f"quant_min must be < quant_max, got {qmin} and {qmax}")
        if reduce_range:
            qmin, qmax = qmin // 2, qmax // 2
        return qmin, qmax, True
    if reduce_range:
        if dtype not in ("int8", "uint8"):
            raise ValueError(f"reduce_range applies to int8 and uint8 only, got dtype {dtype!r}")
        return (-64, 63, False) if dtype == "int8" else (0, 127, False)
    return lo, hi, False


def mapping_code(scheme: object, mapping: object = None) -> str:
    """The mapping Go's ``choose_qparams`` takes: torch.ao's ``scheme``, or ``"ao_"`` and
    torchao's ``mapping`` when one is given.

    Example:
        >>> mapping_code("symmetric"), mapping_code("affine", "asymmetric")
        ('symmetric', 'ao_asymmetric')
    """
    if mapping is not None:
        if not isinstance(mapping, str) or mapping not in get_args(Mapping):
            raise ValueError(f"mapping must be one of {list(get_args(Mapping))} or None, got {mapping!r}")
        return "ao_" + mapping
    if not isinstance(scheme, str) or scheme not in get_args(Scheme):
        raise ValueError(f"scheme must be one of {list(get_args(Scheme))}, got {scheme!r}")
    return scheme


def _eps(eps: object, default: float) -> float:
    """``eps`` as the float the call takes (``default`` for None); its value is Go's to check."""
    if eps is None:
        return default
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise TypeError(f"eps must be a float, got {type(eps).__name__}")
    if eps > 0 and np.float32(eps) == 0:  # Go checks the float32 it gets: 0 would be reported as given
        raise ValueError(f"eps must be finite and > 0 in float32, got {eps!r} (below float32's smallest, 1.4e-45)")
    return float(eps)


def _abi_range(qmin: int, qmax: int, custom: bool, reduce_range: bool) -> tuple[int, int]:
    """The range the C ABI takes: (0, 0) for the dtype's own (Go then picks torch's default zero
    points, e.g. 128 for symmetric uint8), else ``(qmin, qmax)``."""
    return (qmin, qmax) if custom or reduce_range else (0, 0)


def choose_qparams(
    min: ArrayLike,  # noqa: A002 - torch's name
    max: ArrayLike,  # noqa: A002
    dtype: QDtype,
    scheme: Scheme = "affine",
    *,
    eps: float | None = None,
    reduce_range: bool = False,
    quant_min: int | None = None,
    quant_max: int | None = None,
    mapping: Mapping | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Scale(s) and zero point(s) for the range [min, max] (scalars, or one per channel/group).

    Exactly torch.ao's observers (``_calculate_qparams``): ``min_neg = min(min, 0)``,
    ``max_pos = max(max, 0)``; affine: ``scale = (max_pos - min_neg) / (qmax - qmin)``,
    ``zero_point = clamp(qmin - round_half_even(min_neg / scale), qmin, qmax)``; symmetric:
    ``scale = max(-min_neg, max_pos) / ((qmax - qmin) / 2)``, zero point 0 (uint8: 128, or the
    midpoint ``(qmin + qmax) // 2`` of a custom range); ``scale = max(scale, eps)`` with
    ``eps = finfo(float32).eps``. ``mapping`` (``"symmetric"``, ``"symmetric_no_clipping_err"``,
    ``"asymmetric"``) gives torchao's ``choose_qparams_affine`` instead (its eps default is
    ``finfo(float32).smallest_normal``). Returns float32 scales and int32 zero points, 1-D.

    Example:
        >>> import bitnet_go
        >>> s, z = bitnet_go.choose_qparams(-1.0, 3.0, "uint8")
        >>> bool(s[0] == np.float32(4) / np.float32(255)), int(z[0])
        (True, 64)
    """
    dtype = check_dtype(dtype, INT_DTYPES)  # type: ignore[assignment]
    code = mapping_code(scheme, mapping)
    eps_v = _eps(eps, TORCHAO_EPS if mapping is not None else TORCH_EPS)
    qmin, qmax, custom = qrange(dtype, reduce_range, quant_min, quant_max, symmetric=code == "symmetric")
    mn = np.atleast_1d(as_float32(min, "min")).ravel()
    mx = np.atleast_1d(as_float32(max, "max")).ravel()
    if mn.shape != mx.shape:
        raise ValueError(f"min and max must have the same number of entries, got {mn.size} and {mx.size}")
    bad = np.flatnonzero(mn > mx)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"min must be <= max, got min[{i}] = {mn[i]} > max[{i}] = {mx[i]}")
    return _qparams(mn, mx, dtype, code, eps_v, qmin, qmax, custom, reduce_range)


def _qparams(
    mn: np.ndarray, mx: np.ndarray, dtype: str, code: str, eps: float, qmin: int, qmax: int, custom: bool,
    reduce_range: bool,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`choose_qparams` on checked arguments (float32 ``mn``/``mx`` of one size, ``mn <= mx``)."""
    scales = np.empty(mn.size, np.float32)
    zps = np.empty(mn.size, np.int32)
    ops.choose_qparams(mn, mx, dtype, code, *_abi_range(qmin, qmax, custom, reduce_range), eps, scales, zps)
    return scales, zps


def _groups(shape: tuple[int, ...], axis: object, group_size: object) -> tuple[int | None, int | None, int]:
    """(axis, block_size, number of groups) of a tensor of ``shape``."""
    n = math.prod(shape)
    if axis is not None and group_size is not None:
        raise ValueError("give axis (per channel) or group_size (per group), not both")
    if axis is not None:
        a = check_int(axis, "axis", or_none=True)
        nd = len(shape)
        if not -nd <= a < nd:
            raise ValueError(f"axis must be in [{-nd}, {nd}) for a tensor of shape {shape}, got {a}")
        a %= nd
        return a, None, shape[a]
    if group_size is not None:
        g = check_int(group_size, "group_size", or_none=True)
        last = shape[-1] if shape else 1
        if g < 1:
            raise ValueError(f"group_size must be >= 1, got {g}")
        if last % g:
            raise ValueError(
                f"group_size must divide the last dimension ({last}), got {g} (torchao refuses it too; "
                f"pad the tensor, or quantize it per tensor or per channel)"
            )
        return None, (g if g < n else None), n // g
    return None, None, 1


_OUTPUTS: dict[tuple[str, tuple[int, ...], float, int], tuple[np.ndarray, np.ndarray, descriptor.Tensor]] = {}
""":func:`per_tensor_output`'s entries."""

_OUTPUTS_MAX = 256


def per_tensor_output(
    dtype: str, shape: tuple[int, ...], scale: object, zero_point: object
) -> tuple[np.ndarray, np.ndarray, descriptor.Tensor] | None:
    """The read-only scale and zero point arrays, and the descriptor without data, of a new
    ``dtype`` tensor of ``shape`` quantized per tensor with a Python float ``scale`` (finite, > 0)
    and int ``zero_point`` (one of ``dtype``'s codes): kept for the next call with the same values (an op called in a
    loop builds them once; tensors made with them share the read-only arrays). ``None`` for any
    other kind of value, which takes :func:`_as_params`' way (and its checks).

    Example:
        >>> s, z, t = per_tensor_output("uint8", (3,), 0.5, 10)
        >>> s, z, t.n_scales, per_tensor_output("uint8", (3,), 0.5, 10)[0] is s
        (array([0.5], dtype=float32), array([10], dtype=int32), 1, True)
    """
    if type(scale) is not float or type(zero_point) is not int or not 0 < scale < math.inf:
        return None
    key = (dtype, shape, scale, zero_point)
    hit = _OUTPUTS.get(key)
    if hit is None:
        lo, hi = CODE_RANGES[dtype]
        if not lo <= zero_point <= hi:  # the checked way says why
            return None
        sa, za = np.array((scale,), np.float32), np.array((zero_point,), np.int32)
        t = descriptor.tensor(descriptor.DTYPES[dtype], shape or (1,), 0, 0, -1, 0, descriptor.address(sa), 1,
                              descriptor.address(za), 1)  # fmt: skip
        sa.flags.writeable = za.flags.writeable = False
        if len(_OUTPUTS) >= _OUTPUTS_MAX:
            _OUTPUTS.clear()
        hit = _OUTPUTS[key] = (sa, za, t)
    return hit


def per_tensor_over(
    codes: np.ndarray, dtype: str, shape: tuple[int, ...], scale: object, zero_point: object
) -> tuple[np.ndarray, np.ndarray, descriptor.Tensor] | None:
    """:func:`per_tensor_output`'s arrays, and its descriptor over ``codes`` (a new C-contiguous
    array of ``shape``'s element count, for an op to write): the output of an op called in a loop
    with one Python float scale and int zero point. ``None`` where :func:`per_tensor_output` is.

    Example:
        >>> out = np.empty(3, np.uint8)
        >>> s, z, t = per_tensor_over(out, "uint8", (3,), 0.5, 10)
        >>> t.data == descriptor.address(out), t.nbytes, s is per_tensor_output("uint8", (3,), 0.5, 10)[0]
        (True, 3, True)
    """
    hit = per_tensor_output(dtype, shape, scale, zero_point)
    if hit is None:
        return None
    return hit[0], hit[1], descriptor.with_data(hit[2], descriptor.address(codes), codes.nbytes)


def per_tensor_out(
    codes: np.ndarray, dtype: str, shape: tuple[int, ...], scale: object, zero_point: object
) -> tuple[np.ndarray, np.ndarray, descriptor.Tensor]:
    """The scale and zero point arrays and the descriptor of an op's new per-tensor output over
    ``codes``: :func:`per_tensor_over`'s kept ones for a Python float scale and int zero point,
    else :func:`out_params`' checked arrays and a new descriptor (every ``bitnet_go.functional``
    op's output takes this way).

    Example:
        >>> s, z, t = per_tensor_out(np.empty(3, np.uint8), "uint8", (3,), np.float32(0.5), np.int64(10))
        >>> s, z, t.n_scales
        (array([0.5], dtype=float32), array([10], dtype=int32), 1)
    """
    hit = per_tensor_over(codes, dtype, shape, scale, zero_point)
    if hit is not None:
        return hit
    s, z = out_params(scale, zero_point, dtype)
    return s, z, ops.grouped(codes, dtype, shape, None, None, s, z)


def out_params(scale: object, zero_point: object, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """The scale and zero point of an op's per-tensor ``dtype`` output (``"int8"``/``"uint8"``) as
    float32 and int32 arrays of one element, checked as torch's quantized ops take them: ``scale``
    a real number (Python or numpy, or a 0-d array or tensor; not a bool, string or sequence),
    finite and > 0; ``zero_point`` an integer (``operator.index``: not a bool or float) in
    ``dtype``'s range. ``TypeError``/``ValueError`` naming the argument otherwise.

    Example:
        >>> out_params(0.5, 3, "uint8")
        (array([0.5], dtype=float32), array([3], dtype=int32))
        >>> out_params(0.5, 300, "uint8")
        Traceback (most recent call last):
        ...
        ValueError: zero_point must be in uint8's range [0, 255], got 300
    """
    if scale is None or zero_point is None:
        raise TypeError("scale and zero_point (the output's quantization) are required")
    number = isinstance(scale, (int, float, np.integer, np.floating)) or getattr(scale, "ndim", None) == 0
    if not number or isinstance(scale, (bool, np.bool_)):
        raise TypeError(f"scale must be a number, got {type(scale).__name__} {scale!r}")
    s = float(scale)  # type: ignore[arg-type]
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"scale must be finite and > 0, got {scale!r}")
    try:
        if isinstance(zero_point, (bool, np.bool_)):
            raise TypeError
        z = operator.index(zero_point)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"zero_point must be an int, got {type(zero_point).__name__} {zero_point!r}") from None
    lo, hi = DTYPE_RANGES[dtype]
    if not lo <= z <= hi:
        raise ValueError(f"zero_point must be in {dtype}'s range [{lo}, {hi}], got {z}")
    return np.float32([s]), np.int32([z])


def _as_params(v: object, name: str, count: int, dtype: type, *, integer: bool) -> np.ndarray:
    """``v`` (a scale or zero point: a number, or one per group) as ``count`` values of ``dtype``
    (a single value repeated): ``TypeError`` for other kinds of numbers, ``ValueError`` for another
    count or, for integers, values outside int32. The values themselves are Go's to check.

    Example:
        >>> _as_params(3, "zero_point", 2, np.int32, integer=True)
        array([3, 3], dtype=int32)
    """
    tv = type(v)
    if (tv is float and not integer) or (tv is int and -(2**31) <= v < 2**31):  # type: ignore[operator]
        return np.full(count, v, dtype) if count != 1 else np.array((v,), dtype)  # the common case
    a = as_host(v, name)  # type: ignore[arg-type]
    if a.dtype.kind not in ("biu" if integer else "biuf") or a.dtype.kind == "b":
        want = "integers" if integer else "real numbers"
        raise TypeError(f"{name} must be {want}, got dtype {a.dtype}")
    a = a.ravel()
    if a.size == 1 and count > 1:
        a = np.repeat(a, count)
    if a.size != count:
        if count == 1:
            raise ValueError(f"{name} must be one value (per tensor), got {a.size}")
        raise ValueError(f"{name} must have 1 or {count} entries (one per channel/group), got {a.size}")
    if integer and a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{name} must fit in int32, got {a.min()}..{a.max()}")
    return np.ascontiguousarray(a, dtype)


def quantize(
    x: ArrayLike,
    dtype: QDtype | Literal["ternary"],
    *,
    scale: ArrayLike | None = None,
    zero_point: ArrayLike | None = None,
    axis: int | None = None,
    group_size: int | None = None,
    scheme: Scheme = "affine",
    observer: QParamsSource | None = None,
    mapping: Mapping | None = None,
    reduce_range: bool = False,
    quant_min: int | None = None,
    quant_max: int | None = None,
    eps: float | None = None,
    check_finite: bool = True,
) -> QuantizedTensor:
    """Quantize ``x`` (numpy array, CPU torch tensor, or anything ``np.asarray`` takes) to ``dtype``.

    ``q = clamp(zero_point + nearbyint(x * (1.0f / scale)), qmin, qmax)`` in float32 (the
    reciprocal multiplied, as FBGEMM and torchao do; ties to even): bit for bit
    ``torch.quantize_per_tensor``/``quantize_per_channel`` and torchao's ``quantize_affine``.
    With ``scale`` (and ``zero_point``, default 0) given they are used; otherwise they come from
    ``observer.calculate_qparams()`` (a per-channel observer's along its ``ch_axis``, the default
    ``axis`` then; a torch.ao observer's ``torch.qint8``/``torch.quint8`` is int8/uint8), or from
    the tensor's min and max per tensor, per channel (``axis``) or per group (``group_size``
    consecutive elements along the last axis, which it must divide) through
    :func:`choose_qparams` (``scheme``, ``mapping``, ``reduce_range``, ``quant_min``/``quant_max``,
    ``eps``). ``quant_min``/``quant_max`` also clamp a quantization with a given scale.
    ``dtype="binary"``: +1 for ``x >= 0`` (also -0.0), -1 otherwise, with ``scale = mean|x|`` per
    tensor/channel/group unless given (XNOR-Net; a group of zeros gets scale 0), no zero point.
    ``dtype="ternary"``: :func:`bitnet_go.quantize_i2s` (``group_size`` is its ``block_size``; the
    arguments it has no use for are a ``ValueError``). ``check_finite``: NaN or Inf in ``x`` is a
    ``ValueError``; without it (and with a given ``scale`` or an ``observer``: a range holding NaN
    or Inf gives no scale, a ``ValueError``) +Inf gives qmax, -Inf qmin, and NaN what torch gives: int8/uint8 per
    tensor qmax (qmin for a zero point >= 128: FBGEMM's int32 sum wraps), per channel or group, and
    int4/uint4 always, 0 clamped into the range (torch's quint4x2 and torchao).

    Example:
        >>> import bitnet_go
        >>> q = bitnet_go.quantize([-1.0, 0.0, 0.5, 3.0], "uint8")
        >>> q.int_repr(), q.zero_point
        (array([  0,  64,  96, 255], dtype=uint8), array([64], dtype=int32))
    """
    if isinstance(dtype, str) and dtype == "ternary":
        from .._ternary import quantize_i2s

        _ternary_only(scale=scale, zero_point=zero_point, axis=axis, observer=observer, mapping=mapping,
                      quant_min=quant_min, quant_max=quant_max, eps=eps, scheme=scheme != "affine" or None,
                      reduce_range=reduce_range is not False or None)  # fmt: skip
        t: TernaryTensor = quantize_i2s(x, block_size=group_size, check_finite=check_finite)
        return t
    dt = check_dtype(dtype, PLAIN_DTYPES + ("ternary",))
    xa = as_float32(x, "x")
    if xa.size == 0:
        raise ValueError(f"x must have at least one element, got shape {xa.shape}")
    check_bool(check_finite, "check_finite")
    if observer is not None:
        if scale is not None or zero_point is not None:
            raise ValueError("give scale (and zero_point) or observer, not both")
        if not callable(getattr(observer, "calculate_qparams", None)):
            raise TypeError(f"observer must have a calculate_qparams() method (a bitnet_go.quantization or "
                            f"torch.ao observer), got {type(observer).__name__}")  # fmt: skip
    if scheme != "affine" or mapping is not None:  # checked even where unused (a given scale)
        mapping_code(scheme, mapping)
    if eps is not None:
        _eps(eps, TORCH_EPS)
    shape = tuple(xa.shape)
    if observer is not None:
        axis = _observer_axis(observer, axis, len(shape))
    ax, bs, groups = _groups(shape, axis, group_size)
    out = np.empty(ops.packed_bytes(dt, xa.size), np.uint8)
    if dt == "binary":
        if zero_point is not None:
            raise ValueError("binary quantization has no zero point (zero_point must be None)")
        if scale is None and observer is None:
            scales = np.empty(groups, np.float32)
            ops.quantize_binary_absmean(xa, ax, bs, check_finite, out, scales)
            return PlainTensor._make(dt, shape, ax, bs, out, scales, None)
        if scale is None:
            scale = observer.calculate_qparams()[0]  # type: ignore[union-attr]
        scales = _as_params(scale, "scale", groups, np.float32, integer=False)
        return _quantize_given(xa, dt, shape, ax, bs, out, scales, None, 0, 0, check_finite)
    qmin, qmax, custom = qrange(dt, reduce_range, quant_min, quant_max)
    if scale is not None:
        hit = per_tensor_over(out, dt, shape, scale, 0 if zero_point is None else zero_point) if groups == 1 else None
        if hit is not None and not custom and not reduce_range:  # the common case: one float scale and int zero point
            ops.quantize_given_to(xa, hit[2], 0, 0, check_finite)
            return PlainTensor._trusted(dt, shape, ax, bs, out, *hit)
        scales = _as_params(scale, "scale", groups, np.float32, integer=False)
        zp = _as_params(0 if zero_point is None else zero_point, "zero_point", groups, np.int32, integer=True)
    elif zero_point is not None:
        raise ValueError("zero_point is given without scale: give both, or neither")
    elif observer is not None:
        odt = getattr(observer, "dtype", dt)
        if TORCH_QDTYPES.get(str(odt), odt) != dt:
            raise ValueError(f"observer's dtype {odt!r} is not dtype {dt!r}")
        s, z = observer.calculate_qparams()
        scales = _as_params(s, "scale", groups, np.float32, integer=False)
        zp = _as_params(z, "zero_point", groups, np.int32, integer=True)
    else:
        mn, mx = np.empty(groups, np.float32), np.empty(groups, np.float32)
        ops.minmax(xa, ax, bs, check_finite, mn, mx)
        bad = np.flatnonzero(~(np.isfinite(mn) & np.isfinite(mx)))
        if bad.size:  # NaN or Inf with check_finite=False: the range gives no scale
            i = int(bad[0])
            where = "" if groups == 1 else f" of group {i}"
            raise ValueError(f"x holds NaN or Inf: its range{where}, min={mn[i]}, max={mx[i]}, gives no scale; "
                             f"pass scale (and zero_point) or an observer to quantize it so")  # fmt: skip
        code = mapping_code(scheme, mapping)
        eps_v = _eps(eps, TORCHAO_EPS if mapping is not None else TORCH_EPS)
        if code == "symmetric":  # the one check qrange adds for a scheme (uint8 with reduce_range)
            qrange(dt, reduce_range, quant_min, quant_max, symmetric=True)
        scales, zp = _qparams(mn, mx, dt, code, eps_v, qmin, qmax, custom, reduce_range)
        wide = np.flatnonzero(~np.isfinite(scales))
        if wide.size:  # choose_qparams gives torch's inf scale; quantizing with it is refused
            i = int(wide[0])
            where = "" if groups == 1 else f" (group {i})"
            raise ValueError(f"x's range [{mn[i]}, {mx[i]}]{where} is too wide for a float32 scale: "
                             f"(max - min) / (qmax - qmin) overflows to inf; scale x down first")  # fmt: skip
    return _quantize_given(xa, dt, shape, ax, bs, out, scales, zp, *_abi_range(qmin, qmax, custom, reduce_range),
                           check_finite)  # fmt: skip


def _ternary_only(**given: object) -> None:
    """``ValueError`` naming the arguments of :func:`quantize` given (not None) with
    ``dtype="ternary"``, which takes only ``group_size`` and ``check_finite``."""
    bad = [k for k, v in given.items() if v is not None]
    if bad:
        raise ValueError(
            f"dtype='ternary' is quantize_i2s's absmean quantization: it takes group_size and check_finite "
            f"only, got {', '.join(bad)} (call bitnet_go.quantize_i2s, or quantize to int8/int4 for those)"
        )


def _observer_axis(observer: object, axis: object, ndim: int) -> object:
    """The channel axis to quantize along with ``observer``'s qparams: its ``ch_axis`` (torch.ao's
    and this module's per-channel observers) where ``axis`` is None; ``ValueError`` where both are
    given and differ (the scales would be applied along the wrong axis). Observers without
    ``ch_axis`` leave ``axis`` as it is."""
    ch = getattr(observer, "ch_axis", None)
    if ch is None or isinstance(ch, bool) or not isinstance(ch, (int, np.integer)):
        return axis
    if axis is None:
        return int(ch)
    a = check_int(axis, "axis")
    if ndim and (a % ndim) != (int(ch) % ndim):
        raise ValueError(f"axis={a} but observer's ch_axis is {int(ch)}: its scales are per channel along "
                         f"axis {int(ch)} (pass axis={int(ch)}, or leave axis out)")  # fmt: skip
    return axis


def _quantize_given(
    xa: np.ndarray, dt: str, shape: tuple[int, ...], ax: int | None, bs: int | None, out: np.ndarray,
    scales: np.ndarray, zp: np.ndarray | None, qmin: int, qmax: int, check_finite: bool,
) -> PlainTensor:  # fmt: skip
    """Quantize float32 ``xa`` into the bytes ``out`` with these scales and zero points and wrap the
    result (fresh arrays Go checked: :meth:`PlainTensor._trusted`, keeping the output's descriptor)."""
    od = ops.grouped(out, dt, shape, ax, bs, scales, zp)
    ops.quantize_given_to(xa, od, qmin, qmax, check_finite)
    return PlainTensor._trusted(dt, shape, ax, bs, out, scales, zp, od)


AnyDtype = Union[QDtype, Literal["ternary"]]
