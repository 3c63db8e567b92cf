"""PyTorch's CPU float32 arithmetic, reproduced in NumPy float32 where the
result depends on the order of operations (so that HistogramObserver gives
torch's bits).

``torch.sum`` of a float32 vector is ATen's ``cascade_sum`` over vectors of 8
floats (``Vectorized<float>`` of the AVX2 kernels, which torch also runs on
AVX-512 machines for this op; the generic build's vectors are 8 floats too),
4 interleaved accumulators and a 4-level cascade; ``torch.linspace`` is one
fused multiply-add per element; floor division is ``c10::div_floor_floating``.
These were checked bit for bit against torch 2.15 (tests_py/test_quant_observers.py).

Example:
    >>> import numpy as np
    >>> float(sum_f32(np.ones(2048, np.float32)))
    2048.0
"""

from __future__ import annotations

import numpy as np

VEC = 8
"""Floats per ``Vectorized<float>`` in the torch kernels reproduced here."""

_F = np.float32


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``fmaf(a, b, c)`` elementwise for float32 arrays: ``a*b + c`` rounded once.

    The product is exact in float64; the sum's rounding error (TwoSum) decides
    the one case where rounding the float64 sum to float32 could differ from
    rounding the exact value (a float64 sum exactly halfway between two floats).

    Example:
        >>> fma_f32(np.float32([3.0]), np.float32([0.5]), np.float32([1.0])).tolist()
        [2.5]
    """
    a64, b64, c64 = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    return _round_sum(a64 * b64, c64)


def _round_sum(p: np.ndarray, c64: np.ndarray | np.float64) -> np.ndarray:
    """``p + c`` rounded once to float32, for an exact float64 product ``p`` (an array) and a
    float64 ``c`` holding a float32 (an array of p's shape or a scalar): fma_f32's core."""
    s = p + c64
    r = np.array(s, _F)
    # Rounding s to float32 can differ from rounding the exact value only where s is a float32
    # tie: in float32's normal range its low 29 mantissa bits are then 1 followed by 28 zeros.
    # Outside that range (tiny, huge, non-finite) every element is checked.
    mag = np.abs(s)
    cand = ((np.ascontiguousarray(s).view(np.uint64) & 0x1FFFFFFF) == 0x10000000) | ~(mag >= 2.0**-126)
    cand |= mag >= 2.0**127
    k = np.nonzero(cand)
    if k[0].size:
        pk, sk = p[k], s[k]
        bb = sk - pk
        err = (pk - (sk - bb)) + ((c64 if np.ndim(c64) == 0 else c64[k]) - bb)
        inexact = err != 0  # only an inexact float64 sum can round twice
        k, sk, ek = tuple(i[inexact] for i in k), sk[inexact], err[inexact]
    if k[0].size:
        rk = r[k]
        r64 = rk.astype(np.float64)
        up = np.nextafter(rk, _F(np.inf)).astype(np.float64)
        dn = np.nextafter(rk, _F(-np.inf)).astype(np.float64)
        other = np.where(sk > r64, up, dn)
        tie = (sk != r64) & (sk == (r64 + other) / 2)
        fix = tie & (((other > r64) & (ek > 0)) | ((other < r64) & (ek < 0)))
        r[k] = np.where(fix, other.astype(_F), rk)
    return r


def linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps)`` (float32, CPU) bit for bit.

    torch computes ``start + step*i`` for the first half and
    ``end - step*(steps-1-i)`` for the second, each as one fused
    multiply-add (its kernels are compiled with FMA contraction), with
    ``step = (end - start) / (steps - 1)`` in float32.

    Example:
        >>> linspace_f32(0.0, 1.0, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    s, e = _F(start), _F(end)
    if steps == 1:
        return np.array([s], _F)
    step = _F((e - s) / _F(steps - 1))
    halfway = steps // 2

    def index(i: np.ndarray) -> np.ndarray:  # i as a float32 (exact below 2**24), in float64
        return i.astype(np.float64) if steps <= 1 << 24 else i.astype(_F).astype(np.float64)

    # fma_f32(step, i, s) without its conversions (step * i is exact in float64)
    first = _round_sum(np.float64(step) * index(np.arange(halfway)), np.float64(s))
    second = _round_sum(np.float64(-step) * index(np.arange(steps - 1 - halfway, -1, -1)), np.float64(e))
    return np.concatenate([first, second])


def _multi_row_sum(rows: np.ndarray) -> np.ndarray:
    """ATen's ``multi_row_sum``: a cascade over ``rows`` (size, ...) in float32, 4 levels."""
    size = rows.shape[0]
    level_power = max(4, (int(size - 1).bit_length() if size > 1 else 0) // 4)
    step = 1 << level_power
    mask = step - 1
    acc = [np.zeros(rows.shape[1:], _F) for _ in range(4)]
    i = 0
    while i + step <= size:
        for j in range(step):
            acc[0] = acc[0] + rows[i + j]
        i += step
        for lv in range(1, 4):
            acc[lv] = acc[lv] + acc[lv - 1]
            acc[lv - 1] = np.zeros_like(acc[lv - 1])
            if i & (mask << (lv * level_power)):
                break
    for k in range(i, size):
        acc[0] = acc[0] + rows[k]
    for lv in range(1, 4):
        acc[0] = acc[0] + acc[lv]
    return acc[0]


def sum_f32(a: np.ndarray, *, vec: int | None = None) -> np.float32:
    """``torch.sum`` of a contiguous 1-D float32 array of fewer than 32768 elements, bit for bit
    (ATen's ``cascade_sum``: vectors of ``vec`` floats, 4 accumulators, a 4-level cascade).

    Example:
        >>> float(sum_f32(np.array([1e8, 1.0, -1e8], np.float32)))
        0.0
    """
    vec = VEC if vec is None else vec
    a = np.ascontiguousarray(a, _F)
    n = a.shape[0]
    if n < vec or vec <= 1:  # ATen's scalar_inner_sum: row_sum over scalars
        return _scalar_row_sum(a)
    nv = n // vec
    vecs = a[: nv * vec].reshape(nv, vec)
    ilp = 4
    size_ilp = nv // ilp
    partial = (
        _multi_row_sum(vecs[: size_ilp * ilp].reshape(size_ilp, ilp, vec)) if size_ilp else np.zeros((ilp, vec), _F)
    )
    p0 = partial[0]
    for k in range(size_ilp * ilp, nv):
        p0 = p0 + vecs[k]
    for k in range(1, ilp):
        p0 = p0 + partial[k]
    final = _F(0)
    for v in a[nv * vec :]:
        final = _F(final + v)
    for v in p0:
        final = _F(final + v)
    return final


def _scalar_row_sum(a: np.ndarray) -> np.float32:
    """``row_sum`` over scalars (a short row, or no vectors): 4 accumulators, cascade."""
    n = a.shape[0]
    size_ilp = n // 4
    partial = _multi_row_sum(a[: size_ilp * 4].reshape(size_ilp, 4)) if size_ilp else np.zeros(4, _F)
    p = [_F(v) for v in partial]
    for k in range(size_ilp * 4, n):
        p[0] = _F(p[0] + a[k])
    for k in range(1, 4):
        p[0] = _F(p[0] + p[k])
    return p[0]


def div_floor_f32(a: np.ndarray, b: np.float32) -> np.ndarray:
    """``torch.div(a, b, rounding_mode="floor")`` for float32 ``a`` and a float32 scalar ``b != 0``.

    Example:
        >>> div_floor_f32(np.array([7.0, -7.0], np.float32), np.float32(2)).tolist()
        [3.0, -4.0]
    """
    b = _F(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        basic = a / b
        mod = np.fmod(a, b)
        floor = np.where((np.abs(basic) == np.inf) & (np.abs(a) != np.inf), a, a - mod).astype(_F)
        div = (floor / b).astype(_F)
        mask = (mod != 0) & ((b < 0) != (mod < 0))
        div = np.where(mask, div - _F(1), div).astype(_F)
        fd = np.floor(div)
        fd = np.where((div - fd) > _F(0.5), fd + _F(1), fd).astype(_F)
        fd = np.where(div == 0, np.copysign(_F(0), basic), fd).astype(_F)
    return fd
