"""Observers with torch.ao's exact arithmetic: MinMax, MovingAverageMinMax, PerChannelMinMax, Histogram.

The passes over the data (min/max, histograms) run in Go; the small per-bin
arithmetic of :class:`HistogramObserver` (combining histograms when the range
grows, the L2-error search over 2048 bins) is NumPy float32 that reproduces
torch's tensor operations one for one (see :mod:`._torchmath`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from .._core import ops
from .._core.arrays import as_float32, check_float, check_int, check_positive_float32
from . import _torchmath as tm
from ._api import INT_DTYPES, TORCH_EPS, QDtype, Scheme, check_bool, check_dtype, choose_qparams, mapping_code, qrange
from ._base import Collector, check_state_array, unit_qparams
from ._calibrators import check_state_keys

if TYPE_CHECKING:
    from typing_extensions import Unpack

_F = np.float32
_INF = _F(np.inf)


def _check_first(v: object, name: str, owner: str) -> None:
    """``TypeError`` for a str passed as ``name``, ``owner``'s first parameter: a number there, as
    in torch, where a dtype such as ``"int8"`` given first would land."""
    if isinstance(v, str):
        raise TypeError(f"{name} must be a number, got str {v!r}: {owner}'s first argument is {name}, "
                        f"as in torch; give the dtype by keyword (dtype={v!r})")  # fmt: skip


class ObserverSettings(TypedDict, total=False):
    """The keyword settings every observer takes: ``reduce_range``, ``quant_min``/``quant_max``
    and ``eps`` (finite and > 0 in float32) as in :func:`bitnet_go.choose_qparams`;
    ``check_finite`` (a bool): NaN/Inf in a batch is a ``ValueError``."""

    reduce_range: bool
    quant_min: int | None
    quant_max: int | None
    eps: float
    check_finite: bool


class _Observer(Collector):
    """What every observer shares (torch's ``UniformQuantizationObserverBase``): the integer
    range and the qparams rule, the running ``min_val``/``max_val`` (float32; +inf/-inf before
    any data), and state and merge checks. A subclass says which arrays its state holds
    (:meth:`_state_shapes`) and the range its qparams come from (:meth:`_range`)."""

    def __init__(
        self,
        dtype: QDtype = "uint8",
        scheme: Scheme = "affine",
        *,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = TORCH_EPS,
        check_finite: bool = True,
    ) -> None:
        self.dtype = check_dtype(dtype, INT_DTYPES)
        self.scheme = mapping_code(scheme)
        self.quant_min, self.quant_max, _ = qrange(self.dtype, reduce_range, quant_min, quant_max,
                                                   symmetric=self.scheme == "symmetric")  # fmt: skip
        self.reduce_range = bool(reduce_range)
        self._custom = (quant_min, quant_max) if quant_min is not None else None
        self.eps = check_positive_float32(eps, "eps")
        self.check_finite = check_bool(check_finite, "check_finite")
        self.reset()

    def reset(self) -> None:
        """Forget everything seen."""
        self.min_val, self.max_val = _INF, -_INF

    def _seen(self) -> bool:
        """Whether any value has been taken in."""
        return not (self.min_val == _INF and self.max_val == -_INF)

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        """The [min, max] (float32 arrays, one entry per group) the qparams are chosen for."""
        return np.array([self.min_val], _F), np.array([self.max_val], _F)

    def calculate_qparams(self) -> tuple[np.ndarray, np.ndarray]:
        """(scales float32, zero_points int32), one per group; (1.0, 0) before any data, as torch.
        A ``ValueError`` after NaN/Inf data (taken with ``check_finite=False``)."""
        if not self._seen():
            return unit_qparams()
        self._check_finite_range()
        qmin, qmax = self._custom if self._custom else (None, None)
        return choose_qparams(*self._range(), self.dtype, self.scheme, eps=self.eps,  # type: ignore[arg-type]
                              reduce_range=self.reduce_range, quant_min=qmin, quant_max=qmax)  # fmt: skip

    def _check_finite_range(self) -> None:
        """``ValueError`` naming ``min_val``/``max_val`` where they are not finite (a group that saw
        nothing, +inf and -inf, passes: it gets (1.0, 0), as in torch)."""
        mn, mx = np.atleast_1d(self.min_val), np.atleast_1d(self.max_val)
        bad = np.flatnonzero(~(np.isfinite(mn) & np.isfinite(mx)) & ~((mn == _INF) & (mx == -_INF)))
        if bad.size:
            i = int(bad[0])
            at = f"[{i}]" if np.ndim(self.min_val) else ""
            seen = f"min_val{at}={mn[i]!s}, max_val{at}={mx[i]!s}"
            raise ValueError(f"{type(self).__name__} saw NaN/Inf ({seen}): qparams need a finite range "
                             f"(check_finite=True refuses such a batch in update)")  # fmt: skip

    def _config(self) -> dict[str, Any]:
        qmin, qmax = self._custom if self._custom else (None, None)
        return {"kind": type(self).__name__, "dtype": self.dtype, "scheme": self.scheme,
                "reduce_range": self.reduce_range, "quant_min": qmin, "quant_max": qmax, "eps": self.eps}  # fmt: skip

    def _state_shapes(self, state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        """The float32 arrays of the state (attributes of the same names) and their shapes."""
        return {"min_val": (), "max_val": ()}

    def state_dict(self) -> dict[str, Any]:
        """The settings and what was seen (numpy float32 arrays): ``load_state_dict`` restores them."""
        return {**self._config(), **{k: np.array(getattr(self, k), _F) for k in self._state_shapes(vars(self))}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (settings must match; a missing key is a
        ``KeyError`` naming it, an array of the wrong dtype a ``TypeError``, of the wrong shape a
        ``ValueError``)."""
        check_state_keys(state, [*self._config(), *self._state_shapes(vars(self))], type(self).__name__)
        self._check_state(state)
        arrays = {k: check_state_array(state[k], k, _F, shape) for k, shape in self._state_shapes(state).items()}
        self._check_loaded(arrays)
        for k, a in arrays.items():
            setattr(self, k, a if a.ndim else _F(a))

    def _check_loaded(self, arrays: dict[str, np.ndarray]) -> None:
        """Check the values of a state's arrays (of the right dtypes and shapes) before they are taken."""

    def _x(self, x: ArrayLike) -> np.ndarray:
        return as_float32(x, "x")

    def __repr__(self) -> str:
        rng = f"[{self.quant_min}, {self.quant_max}]"
        return f"{type(self).__name__}(dtype={self.dtype!r}, scheme={self.scheme!r}, range={rng})"


class MinMaxObserver(_Observer):
    """Running min and max of every batch; qparams as torch's ``MinMaxObserver`` (bit for bit).

    ``dtype``: ``"int8"``, ``"uint8"``, ``"int4"``, ``"uint4"``; ``scheme``: ``"affine"`` or
    ``"symmetric"``; the keyword settings (every observer's) are :class:`ObserverSettings`.

    Example:
        >>> from bitnet_go.quantization import MinMaxObserver
        >>> obs = MinMaxObserver("uint8")
        >>> obs.update([-1.0, 2.0]); obs.update([3.0])
        >>> s, z = obs.calculate_qparams(); bool(s[0] == np.float32(4) / np.float32(255)), int(z[0])
        (True, 64)
    """

    def _batch_minmax(self, xa: np.ndarray) -> tuple[np.float32, np.float32]:
        mn, mx = np.empty(1, _F), np.empty(1, _F)
        ops.minmax(xa, None, None, self.check_finite, mn, mx)
        return mn[0], mx[0]

    def update(self, x: ArrayLike) -> None:
        """Take in one batch (any shape; an empty one is ignored)."""
        xa = self._x(x)
        if xa.size == 0:
            return
        mn, mx = self._batch_minmax(xa)
        self.min_val, self.max_val = np.minimum(mn, self.min_val), np.maximum(mx, self.max_val)

    def merge(self, other: MinMaxObserver) -> MinMaxObserver:
        """Take in what ``other`` saw (exact: the min of the mins, the max of the maxes); returns self."""
        self._check_mergeable(other)
        self.min_val, self.max_val = np.minimum(self.min_val, other.min_val), np.maximum(self.max_val, other.max_val)
        return self


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Exponential moving average of each batch's min and max (torch's, bit for bit):
    ``min += c * (batch_min - min)`` in float32, the first batch taken as it is.

    Its state cannot be merged (the average depends on the order of the batches).

    Example:
        >>> from bitnet_go.quantization import MovingAverageMinMaxObserver
        >>> obs = MovingAverageMinMaxObserver(averaging_constant=0.5)
        >>> obs.update([0.0, 2.0]); obs.update([0.0, 4.0]); float(obs.max_val)
        3.0
    """

    def __init__(
        self, averaging_constant: float = 0.01, dtype: QDtype = "uint8", scheme: Scheme = "affine",
        **settings: Unpack[ObserverSettings],
    ) -> None:  # fmt: skip
        _check_first(averaging_constant, "averaging_constant", type(self).__name__)
        c = check_float(averaging_constant, "averaging_constant")
        if not (0 < c <= 1 and _F(c) > 0):
            raise ValueError(f"averaging_constant must be in (0, 1] (and not 0 in float32, the average's type), "
                             f"got {averaging_constant!r}")  # fmt: skip
        self.averaging_constant = c
        super().__init__(dtype, scheme, **settings)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "averaging_constant": self.averaging_constant}

    def update(self, x: ArrayLike) -> None:
        """Take in one batch (any shape; an empty one is ignored)."""
        xa = self._x(x)
        if xa.size == 0:
            return
        mn, mx = self._batch_minmax(xa)
        if not self._seen():
            self.min_val, self.max_val = mn, mx
            return
        c = _F(self.averaging_constant)
        self.min_val = _F(self.min_val + _F(c * _F(mn - self.min_val)))
        self.max_val = _F(self.max_val + _F(c * _F(mx - self.max_val)))

    def merge(self, other: MinMaxObserver) -> MinMaxObserver:
        """Not supported: a moving average depends on the order of the batches (``TypeError``)."""
        raise TypeError("a MovingAverageMinMaxObserver cannot be merged: its average depends on the batches' order")


class PerChannelMinMaxObserver(_Observer):
    """Running min and max per channel along ``ch_axis`` (torch's ``PerChannelMinMaxObserver``,
    schemes ``per_channel_affine``/``per_channel_symmetric``), bit for bit.

    Example:
        >>> from bitnet_go.quantization import PerChannelMinMaxObserver
        >>> obs = PerChannelMinMaxObserver(ch_axis=0, dtype="int8", scheme="symmetric")
        >>> obs.update([[1.0, -2.0], [0.5, 0.25]])
        >>> obs.calculate_qparams()[1]
        array([0, 0], dtype=int32)
    """

    def __init__(
        self, ch_axis: int = 0, dtype: QDtype = "uint8", scheme: Scheme = "affine",
        **settings: Unpack[ObserverSettings],
    ) -> None:  # fmt: skip
        _check_first(ch_axis, "ch_axis", type(self).__name__)
        self.ch_axis = check_int(ch_axis, "ch_axis")
        super().__init__(dtype, scheme, **settings)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "ch_axis": self.ch_axis}

    def reset(self) -> None:
        """Forget everything seen."""
        self.min_val, self.max_val = np.empty(0, _F), np.empty(0, _F)

    def _seen(self) -> bool:
        return self.min_val.size > 0

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        return self.min_val, self.max_val

    def _state_shapes(self, state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        shape = np.shape(state.get("min_val", np.empty(0)))
        if len(shape) != 1:
            raise ValueError(f"state's min_val must be 1-D, got shape {shape}")
        return {"min_val": shape, "max_val": shape}

    def update(self, x: ArrayLike) -> None:
        """Take in one batch (same number of channels every time; an empty batch is ignored)."""
        xa = self._x(x)
        if xa.size == 0:
            return
        nd = xa.ndim
        if not -max(nd, 1) <= self.ch_axis < max(nd, 1):
            raise ValueError(f"ch_axis {self.ch_axis} is out of range for x of shape {xa.shape}")
        ax = self.ch_axis % max(nd, 1)
        c = xa.shape[ax] if nd else 1
        mn, mx = np.empty(c, _F), np.empty(c, _F)
        ops.minmax(xa, ax if nd else None, None, self.check_finite, mn, mx)
        self._take(mn, mx, f"x has {c} channels along axis {ax}")

    def _take(self, mn: np.ndarray, mx: np.ndarray, what: str) -> None:
        """Fold per-channel ``mn``/``mx`` into the running ones (``what`` names them in the error)."""
        if not self._seen():
            self.min_val, self.max_val = mn.copy(), mx.copy()
        elif mn.size != self.min_val.size:
            raise ValueError(f"{what}, earlier batches had {self.min_val.size}")
        else:
            self.min_val, self.max_val = np.minimum(mn, self.min_val), np.maximum(mx, self.max_val)

    def merge(self, other: PerChannelMinMaxObserver) -> PerChannelMinMaxObserver:
        """Take in what ``other`` saw (exact); returns self."""
        if self._check_mergeable(other)._seen():
            self._take(other.min_val, other.max_val, f"other has {other.min_val.size} channels")
        return self


class HistogramObserver(_Observer):
    """torch's ``HistogramObserver``, bit for bit: a float32 histogram of ``bins`` bins over the
    running [min, max], re-binned (16x upsampling) when the range grows, and ``calculate_qparams``
    by torch's non-linear L2-error search (``_non_linear_param_search``).

    Go bins each batch (``torch.histc``'s float32 arithmetic) and finds its min/max; the
    re-binning and the search are NumPy float32 reproducing torch's operations (``linspace``
    as one FMA per element, ``bucketize``, ``bincount`` in order, ``sum`` as ATen's cascade,
    ``cumsum`` in float64). The state is ``bins`` float32 counts, like torch's (so a bin stops
    counting exactly past 2**24 per batch, as torch's does). Inf values are ignored with a
    warning (torch does the same); NaN is a ``ValueError``. ``merge`` re-bins the other's
    histogram as torch re-bins a batch: exact when both saw the same min and max.

    Example:
        >>> from bitnet_go.quantization import HistogramObserver
        >>> obs = HistogramObserver()
        >>> obs.update(np.linspace(-1, 1, 1000, dtype=np.float32))
        >>> s, z = obs.calculate_qparams(); int(z[0])
        128
    """

    upsample_rate = 16

    def __init__(
        self, bins: int = 2048, dtype: QDtype = "uint8", scheme: Scheme = "affine", **settings: Unpack[ObserverSettings]
    ) -> None:
        _check_first(bins, "bins", type(self).__name__)
        self.bins = check_int(bins, "bins")
        if self.bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins}")
        super().__init__(dtype, scheme, **settings)
        self.dst_nbins = 256 if self.dtype in ("int8", "uint8") else 16  # 2 ** bits of the dtype, as torch

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "bins": self.bins}

    def reset(self) -> None:
        """Forget everything seen."""
        self.histogram = np.zeros(self.bins, _F)
        super().reset()

    def _state_shapes(self, state: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        return {"histogram": (self.bins,), **super()._state_shapes(state)}

    def _check_loaded(self, arrays: dict[str, np.ndarray]) -> None:
        """The counts finite and >= 0; min_val and max_val +inf and -inf (nothing seen) or a range
        update could have found (finite, min <= max, a span within float32's)."""
        h, mn, mx = arrays["histogram"], arrays["min_val"], arrays["max_val"]
        if not np.all(np.isfinite(h) & (h >= 0)):
            raise ValueError("state's histogram must hold finite counts >= 0")
        if mn == _INF and mx == -_INF:
            return
        if not (np.isfinite(mn) and np.isfinite(mx) and mn <= mx):
            raise ValueError(f"state's min_val and max_val must be finite with min_val <= max_val (or +inf and "
                             f"-inf: nothing seen), got {mn!s} and {mx!s}")  # fmt: skip
        self._check_span(mn, mx)

    def _check_span(self, lo: np.float32, hi: np.float32) -> None:
        """``ValueError`` unless the range [lo, hi] to bin is narrower than float32's largest value
        (the bins' width, ``(hi - lo) / bins``, is float32 arithmetic, as torch's)."""
        with np.errstate(over="ignore"):
            span = _F(_F(hi) - _F(lo))
        if not np.isfinite(span):
            raise ValueError(f"{type(self).__name__}'s observed range overflows float32: min_val={lo!s}, "
                             f"max_val={hi!s}, and max_val - min_val is past {np.finfo(_F).max!s}, the largest "
                             f"float32 (no histogram spans it)")  # fmt: skip

    # -- torch.histc

    def _histc(self, x: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
        """``torch.histc(x, bins, min=lo, max=hi)`` as float32 counts."""
        if lo == hi:  # torch widens an empty range by 1 each side (in float64), then to float32
            lo, hi = _F(float(lo) - 1.0), _F(float(hi) + 1.0)
        if lo == hi:  # x (every value) so large that float32 has no room around it: the middle bin, where
            # torch's histc puts x = 1e8 or 3e38 (Go refuses lo == hi); no qparams depend on the bin
            counts = np.zeros(self.bins, _F)
            counts[self.bins // 2] = x.size
            return counts
        edges = tm.linspace_f32(float(lo), float(hi), self.bins + 1)  # its first and last edge bound the bins
        counts = np.zeros(self.bins, np.int64)
        ops.histogram(x, float(edges[0]), float(edges[-1]), False, False, counts)
        return counts.astype(_F)

    def update(self, x: ArrayLike) -> None:
        """Take in one batch (any shape; an empty one is ignored)."""
        xa = self._x(x).reshape(-1)
        if xa.size == 0:
            return
        mn, mx = np.empty(1, _F), np.empty(1, _F)
        ops.minmax(xa, None, None, False, mn, mx)
        x_min, x_max = mn[0], mx[0]
        if np.isnan(x_min) or np.isnan(x_max):
            raise ValueError("x contains NaN: a histogram cannot bin it")
        if x_min == -_INF or x_max == _INF:
            if self.check_finite:
                raise ValueError("x contains Inf (pass check_finite=False to ignore infinite values, as torch does)")
            warnings.warn("inf detected in input tensor, ignoring input", stacklevel=2)
            xa = xa[np.abs(xa) != _INF]
            if xa.size == 0:
                return
            ops.minmax(xa, None, None, False, mn, mx)
            x_min, x_max = mn[0], mx[0]
        if not self._seen():
            self._check_span(x_min, x_max)
            self.min_val, self.max_val = x_min, x_max
            self.histogram = self._histc(xa, x_min, x_max)
            return
        new_min, new_max = min(self.min_val, x_min), max(self.max_val, x_max)
        self._check_span(new_min, new_max)
        update = self._histc(xa, new_min, new_max)
        if new_min == self.min_val and new_max == self.max_val:
            self.histogram = (self.histogram + update).astype(_F)
            return
        self.histogram = self._combine(self.histogram, self.min_val, self.max_val, update, new_min, new_max)
        self.min_val, self.max_val = new_min, new_max

    def _combine(self, orig: np.ndarray, orig_min: np.float32, orig_max: np.float32, update: np.ndarray,
                 new_min: np.float32, new_max: np.float32) -> np.ndarray:  # fmt: skip
        """torch's ``_combine_histograms``: ``orig`` (over [orig_min, orig_max]) into ``update``'s range."""
        if new_min == orig_min and new_max == orig_max:
            return (orig + update).astype(_F)
        if orig_min == orig_max:
            one = self._histc(np.array([orig_min], _F), new_min, new_max)
            return (_F(one * tm.sum_f32(orig)) + update).astype(_F)
        return (update + self._upscale(orig, orig_min, orig_max, new_min, new_max)).astype(_F)

    def _upscale(self, hist: np.ndarray, orig_min: np.float32, orig_max: np.float32, new_min: np.float32,
                 new_max: np.float32) -> np.ndarray:  # fmt: skip
        """torch's ``_upscale_histogram``: each old bin split in 16, its mid-points re-binned."""
        r = self.upsample_rate
        h = (np.repeat(hist, r) / _F(r)).astype(_F)
        bin_size = _F(_F(orig_max - orig_min) / _F(self.bins * r))
        mids = (
            tm.linspace_f32(float(orig_min), float(orig_max), self.bins * r + 1)[:-1] + _F(_F(0.5) * bin_size)
        ).astype(_F)
        bounds = tm.linspace_f32(float(new_min), float(new_max), self.bins + 1)
        if np.all(mids[1:] >= mids[:-1]):  # sorted (always, short of NaN): search the bounds among the mids
            # searchsorted(bounds, mids[i], "right") counts the bounds j with bounds[j] <= mids[i], i.e.
            # with fewer than i + 1 mids below bounds[j]: a running count of those first positions
            first = np.searchsorted(mids, bounds, side="left")
            idx = np.cumsum(np.bincount(first, minlength=mids.size + 1)[: mids.size]) - 1
        else:
            idx = np.searchsorted(bounds, mids, side="right") - 1
        np.clip(idx, 0, self.bins - 1, out=idx)
        out = np.zeros(self.bins, _F)
        np.add.at(out, idx, h)  # torch.bincount with float32 weights: in order, in float32
        return out

    # -- the search

    def _quantization_error(self, start: int, end: int, bin_width: float, src: np.ndarray,
                            density: np.ndarray) -> float:  # fmt: skip
        """torch's ``_compute_quantization_error(start, end)`` (float32 tensors, Python-float scalars);
        ``density`` is ``histogram / bin_width`` in float32, the same for every step of the search."""
        dst_w = bin_width * (end - start + 1) / self.dst_nbins
        if dst_w == 0.0:
            return 0.0
        bw, dw, half = _F(bin_width), _F(dst_w), _F(dst_w / 2)
        begin = ((src - start).astype(_F) * bw).astype(_F)
        endv = (begin + bw).astype(_F)
        last = _F(self.dst_nbins - 1)
        b_bin = np.clip(tm.div_floor_f32(begin, dw), _F(0), last).astype(_F)
        b_center = ((b_bin + _F(0.5)) * dw).astype(_F)
        e_bin = np.clip(tm.div_floor_f32(endv, dw), _F(0), last).astype(_F)

        def get_norm(db: np.ndarray, de: np.ndarray) -> np.ndarray:
            return (density * _F((de * de * de - db * db * db).astype(_F) / _F(3))).astype(_F)

        norm = np.zeros(self.bins, _F)
        norm = (norm + get_norm((begin - b_center).astype(_F), np.full(self.bins, half, _F))).astype(_F)
        mh, ph = _F(-dst_w / 2), _F(dst_w / 2)
        norm = (norm + ((e_bin - b_bin - _F(1)).astype(_F) * get_norm(np.array(mh, _F), np.array(ph, _F)))).astype(_F)
        e_center = (e_bin * dw + half).astype(_F)
        norm = (norm + get_norm(np.array(mh, _F), (endv - e_center).astype(_F))).astype(_F)
        return float(tm.sum_f32(norm))

    def _non_linear_param_search(self) -> tuple[np.float32, np.float32]:
        """torch's ``_non_linear_param_search``: the [min, max] that minimises the L2 error."""
        bin_width = _F(_F(self.max_val - self.min_val) / _F(self.bins))
        total = float(tm.sum_f32(self.histogram))
        csum = np.cumsum(self.histogram, dtype=np.float64).astype(_F)  # torch's cumsum accumulates in double
        py_width = (float(self.max_val) - float(self.min_val)) / self.bins
        src = np.arange(self.bins, dtype=np.int64)
        density = (self.histogram / _F(py_width)).astype(_F)
        stepsize, alpha, beta = 1e-5, 0.0, 1.0
        start, end = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + stepsize, beta - stepsize
            # cSum[l] < next_alpha * total: a float32 tensor against a Python float, compared in float32
            lo_t, hi_t = _F(next_alpha * total), _F(next_beta * total)
            l_ = min(max(int(np.searchsorted(csum, lo_t, side="left")), start), end)
            r_ = min(max(int(np.searchsorted(csum, hi_t, side="right")) - 1, start), end)
            next_start, next_end = start, end
            if (l_ - start) > (end - r_):
                next_start, alpha = l_, next_alpha
            else:
                next_end, beta = r_, next_beta
            if next_start == start and next_end == end:
                continue
            norm = self._quantization_error(next_start, next_end, py_width, src, density)
            if norm > norm_min:
                break
            norm_min, start, end = norm, next_start, next_end
        new_min = _F(self.min_val + _F(bin_width * _F(start)))
        new_max = _F(self.min_val + _F(bin_width * _F(end + 1)))
        return new_min, new_max

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        """The [min, max] torch's search picks (so ``calculate_qparams`` gives torch's qparams)."""
        # A zero-width range (constant data: a zero bin width) or a wide one (float32 products
        # past its range) has inf/NaN intermediates, as torch's has, without its warnings
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            mn, mx = self._non_linear_param_search()
        return np.array([mn], _F), np.array([mx], _F)

    def merge(self, other: HistogramObserver) -> HistogramObserver:
        """Take in ``other``'s histogram, re-binned onto the union of the ranges as torch re-binns a
        batch (exact when both ranges are equal); returns self."""
        if not self._check_mergeable(other)._seen():
            return self
        if not self._seen():
            self.histogram, self.min_val, self.max_val = other.histogram.copy(), other.min_val, other.max_val
            return self
        new_min, new_max = min(self.min_val, other.min_val), max(self.max_val, other.max_val)
        self._check_span(new_min, new_max)
        mine = self._combine(self.histogram, self.min_val, self.max_val, np.zeros(self.bins, _F), new_min, new_max)
        theirs = self._combine(other.histogram, other.min_val, other.max_val, np.zeros(self.bins, _F), new_min, new_max)
        self.histogram = (mine + theirs).astype(_F)
        self.min_val, self.max_val = new_min, new_max
        return self
