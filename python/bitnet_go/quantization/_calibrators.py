"""Histogram calibrators of inference engines (NVIDIA pytorch-quantization's ``HistogramCalibrator``):
percentile, entropy (KL divergence) and MSE over a histogram of ``|x|``."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
from numpy.typing import ArrayLike

from .._core import ops
from .._core.arrays import as_float32, check_bool, check_float, check_int, check_positive_float32
from ._base import Collector, unit_qparams

if TYPE_CHECKING:
    from typing_extensions import Unpack

_F = np.float32


def check_state_keys(state: object, keys: Iterable[str], owner: str) -> None:
    """``KeyError`` naming every one of ``keys`` that the saved ``state`` (a dict) lacks, and
    ``owner``, the class restoring it. Anything but a dict, and a state another kind of collector
    saved (its ``"kind"`` is not ``owner``), are left to the state's other checks, which say so.

    Example:
        >>> check_state_keys({"kind": "MinMaxObserver"}, ["kind", "min_val", "max_val"], "MinMaxObserver")
        Traceback (most recent call last):
        KeyError: "MinMaxObserver.load_state_dict: state lacks key(s) ['min_val', 'max_val'] (state_dict() saves them)"
    """
    if isinstance(state, dict) and state.get("kind", owner) == owner:
        missing = [k for k in keys if k not in state]
        if missing:
            raise KeyError(f"{owner}.load_state_dict: state lacks key(s) {missing} (state_dict() saves them)")


class CalibratorSettings(TypedDict, total=False):
    """The keyword settings every histogram calibrator takes: ``num_bits`` (2 to 16) and
    ``unsigned`` (a bool) give the integer type the qparams are for, ``num_bins`` the bins over
    the first batch's max ``|x|`` (at least what the method searches: 129 for MSE, ``start_bin``
    for entropy), ``bin_width`` (finite, > 0) fixes the bins' width instead, ``check_finite`` (a
    bool) whether NaN/Inf in a batch is a ``ValueError``."""

    num_bits: int
    unsigned: bool
    num_bins: int
    bin_width: float | None
    check_finite: bool


MAX_BINS = 1 << 20
"""The most bins a histogram grows to by itself (8 MiB of counts; ``num_bins`` if larger): a
batch whose range needs more doubles the bin width (see :class:`_HistogramCalibrator`). Below
it the histogram is pytorch-quantization's, bin for bin. The entropy and MSE searches take time
quadratic in the bins (one core, Zen 4: entropy 0.04 s at 2048 bins, 0.7 s at 8192, 2.8 s at
16384), so a histogram that grew far is slow to search, as it is in pytorch-quantization."""


class _HistogramCalibrator(Collector):
    """A histogram of ``|x|`` with ``num_bins`` bins over [0, max|x| of the first batch]; a later
    batch with a larger value appends bins of the same width (the histogram grows, nothing is
    re-binned, so merging two calibrators with the same bin width is exact), up to
    ``max(MAX_BINS, num_bins)`` bins (2**20). Past that the width doubles as often as needed, each
    pair of bins summed (exact counts at the wider bins): memory stays bounded (a batch a
    million times the first's range once took gigabytes). ``bin_width`` fixes the width from
    the start (then any two calibrators merge exactly; a batch past the limit is a
    ``ValueError``)."""

    method = ""

    def __init__(self, num_bits: int = 8, *, unsigned: bool = False, num_bins: int = 2048,
                 bin_width: float | None = None, check_finite: bool = True) -> None:  # fmt: skip
        self.num_bits = check_int(num_bits, "num_bits")
        if not 2 <= self.num_bits <= 16:
            raise ValueError(f"num_bits must be in [2, 16], got {num_bits}")
        self.unsigned = check_bool(unsigned, "unsigned")
        self.num_bins = check_int(num_bins, "num_bins")
        least = self._min_bins()
        if self.num_bins < least:
            raise ValueError(f"num_bins must be >= {least} for {type(self).__name__}{self._min_bins_why()}, "
                             f"got {num_bins}")  # fmt: skip
        if bin_width is not None:
            bin_width = float(_F(check_positive_float32(bin_width, "bin_width")))
        self._fixed_width = bin_width
        self.check_finite = check_bool(check_finite, "check_finite")
        self.reset()

    def _min_bins(self) -> int:
        """The fewest bins the method's search works on (its candidates start at a bin)."""
        return 1

    def _min_bins_why(self) -> str:
        """Why :meth:`_min_bins` is what it is, for the error message ("" if nothing to say)."""
        return ""

    @property
    def dtype(self) -> str:
        """The dtype the qparams are for: ``"uint8"`` if unsigned, else ``"int8"`` (8 bits)."""
        return ("uint" if self.unsigned else "int") + str(self.num_bits)

    def reset(self) -> None:
        """Forget everything seen."""
        self.counts = np.zeros(0, np.int64)
        self.bin_width = self._fixed_width
        self._zeros = 0  # zeros seen before any width was known

    def update(self, x: ArrayLike) -> None:
        """Take in one batch (its absolute values)."""
        xa = as_float32(x, "x").reshape(-1)
        if xa.size == 0:
            return
        mn, mx = np.empty(1, _F), np.empty(1, _F)
        ops.minmax(xa, None, None, self.check_finite, mn, mx)
        if np.isnan(mn[0]) or np.isnan(mx[0]):
            raise ValueError("x contains NaN")
        amax = float(max(-mn[0], mx[0]))
        if not math.isfinite(amax):
            raise ValueError("x contains Inf")
        if self.bin_width is None:
            if amax == 0.0:
                self._zeros += xa.size
                return
            self.bin_width = float(_F(amax / self.num_bins))
            self.counts = np.zeros(self.num_bins, np.int64)
        self._grow(amax)
        # min/max above found every value finite: no second scan
        ops.histogram(xa, 0.0, float(_F(self.counts.size * self.bin_width)), True, False, self.counts)
        if self._zeros:
            self.counts[0] += self._zeros
            self._zeros = 0

    def _bins_for(self, amax: float, w: float) -> int:
        """How many bins of width ``w`` cover [0, amax] (at least the ones there are)."""
        need = max(self.counts.size, math.ceil(amax / w), 1)
        while float(_F(need * w)) < amax:
            need += 1
        return need

    def _grow(self, amax: float) -> None:
        w = self.bin_width
        assert w is not None
        need = self._bins_for(amax, w)
        limit = max(MAX_BINS, self.num_bins)
        if need > limit and self._fixed_width is not None:
            raise ValueError(f"x reaches |x| = {amax:g}: {need} bins of the fixed bin_width {w:g}, past this "
                             f"calibrator's limit of {limit}; give a larger bin_width")  # fmt: skip
        while need > limit:  # twice the width: pairs of bins summed
            c = self.counts if self.counts.size % 2 == 0 else np.append(self.counts, np.int64(0))
            self.counts = c.reshape(-1, 2).sum(axis=1)
            w = self.bin_width = float(_F(w * 2))
            need = self._bins_for(amax, w)
        if need > self.counts.size:
            self.counts = np.concatenate([self.counts, np.zeros(need - self.counts.size, np.int64)])

    def compute_amax(self) -> float:
        """The clipping value the method picks (0.0 before any non-zero data)."""
        if self.bin_width is None or not self.counts.any():
            return 0.0
        least = self._min_bins()
        if self.counts.size < least:  # a fixed bin_width's histogram covers only up to max|x|
            raise ValueError(f"{type(self).__name__}'s histogram has {self.counts.size} bins of width "
                             f"{self.bin_width:g}, fewer than the {least} its search needs{self._min_bins_why()}: "
                             f"give a bin_width of at most max|x| / {least}")  # fmt: skip
        return ops.calibrate(self.counts, self.method, self.bin_width, **self._calib_args())

    def _calib_args(self) -> dict[str, Any]:
        return {"num_bits": self.num_bits, "unsigned": self.unsigned}

    def calculate_qparams(self) -> tuple[np.ndarray, np.ndarray]:
        """Symmetric qparams for ``dtype`` from :meth:`compute_amax`: ``scale = amax / (2**(bits-1) - 1)``
        (unsigned: ``amax / (2**bits - 1)``), zero point 0, as pytorch-quantization's fake quantizer;
        (1.0, 0) before any data."""
        amax = self.compute_amax()
        if amax == 0.0:
            return unit_qparams()
        bound = (1 << self.num_bits) - 1 if self.unsigned else (1 << (self.num_bits - 1)) - 1
        return np.array([_F(amax) / _F(bound)], _F), np.zeros(1, np.int32)

    def _config(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, "num_bits": self.num_bits, "unsigned": self.unsigned,
                "num_bins": self.num_bins, "fixed_bin_width": self._fixed_width, **self._calib_args()}  # fmt: skip

    def merge(self, other: _HistogramCalibrator) -> _HistogramCalibrator:
        """Add ``other``'s counts (same bin width: exact; ``ValueError`` otherwise); returns self."""
        if not isinstance(other, _HistogramCalibrator) or other._config()["num_bins"] != self.num_bins:
            raise TypeError("can only merge a histogram calibrator with the same number of bins")
        if other.bin_width is None:
            self._zeros += other._zeros
            return self
        if self.bin_width is None:
            zeros = self._zeros
            self.counts, self.bin_width, self._zeros = other.counts.copy(), other.bin_width, other._zeros
            if zeros:
                self.counts[0] += zeros
            return self
        if other.bin_width != self.bin_width:
            raise ValueError(f"bin widths differ ({self.bin_width} and {other.bin_width}): give both calibrators "
                             f"the same bin_width to merge them")  # fmt: skip
        n = max(self.counts.size, other.counts.size)
        merged = np.zeros(n, np.int64)
        merged[: self.counts.size] += self.counts
        merged[: other.counts.size] += other.counts
        self.counts = merged
        return self

    def state_dict(self) -> dict[str, Any]:
        """The settings, the int64 counts and the bin width."""
        return {**self._config(), "counts": self.counts.copy(), "bin_width": self.bin_width, "zeros": self._zeros}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (settings must match; a missing key is a
        ``KeyError`` naming it, a wrong value a ``TypeError`` or ``ValueError``)."""
        check_state_keys(state, [*self._config(), "counts", "bin_width", "zeros"], type(self).__name__)
        self._check_state(state)
        counts = np.asarray(state["counts"])
        if counts.dtype != np.int64 or counts.ndim != 1 or (counts.size and counts.min() < 0):
            raise ValueError("state's counts must be a 1-D int64 array of counts >= 0")
        width = state["bin_width"]
        if width is not None:
            width = check_positive_float32(width, "state's bin_width")
        elif counts.size:
            raise ValueError("state's counts must be empty when its bin_width is None (no width known yet)")
        zeros = check_int(state["zeros"], "state's zeros")
        if zeros < 0:
            raise ValueError(f"state's zeros must be >= 0, got {zeros}")
        self.counts, self.bin_width, self._zeros = counts.copy(), width, zeros


class PercentileCalibrator(_HistogramCalibrator):
    """amax = the edge of the first bin where the CDF of ``|x|`` reaches ``percentile`` %.

    Example:
        >>> from bitnet_go.quantization import PercentileCalibrator
        >>> cal = PercentileCalibrator(percentile=50.0, num_bins=4)
        >>> cal.update([1.0, 2.0, 3.0, 4.0]); cal.compute_amax()
        2.0
    """

    method = "percentile"

    def __init__(self, percentile: float = 99.99, **settings: Unpack[CalibratorSettings]) -> None:
        p = check_float(percentile, "percentile")
        if not 0 < p <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {percentile!r}")
        self.percentile = p
        super().__init__(**settings)

    def _calib_args(self) -> dict[str, Any]:
        return {**super()._calib_args(), "percentile": self.percentile}


class EntropyCalibrator(_HistogramCalibrator):
    """amax minimising the KL divergence between the clipped histogram and its ``2**(bits-1)``-level
    quantization (TensorRT's entropy calibration; the last minimum over i from ``start_bin`` to the
    number of bins, so ``num_bins`` must be at least ``start_bin``, and 2).

    Example:
        >>> from bitnet_go.quantization import EntropyCalibrator
        >>> cal = EntropyCalibrator()
        >>> cal.update(np.random.default_rng(0).standard_normal(10000, dtype=np.float32))
        >>> 0 < cal.compute_amax() < 5
        True
    """

    method = "entropy"

    def __init__(self, start_bin: int = 128, **settings: Unpack[CalibratorSettings]) -> None:
        self.start_bin = check_int(start_bin, "start_bin")
        if self.start_bin < 1:
            raise ValueError(f"start_bin must be >= 1, got {start_bin}")
        super().__init__(**settings)

    def _min_bins(self) -> int:
        return max(self.start_bin, 2)

    def _min_bins_why(self) -> str:
        return f" (amax is tried at the edges of bins start_bin={self.start_bin} to the last; 2 bins at least)"

    def _calib_args(self) -> dict[str, Any]:
        return {**super()._calib_args(), "start_bin": self.start_bin}


MSE_START_BIN = 128
"""The first candidate bin of :class:`MSECalibrator`'s search: pytorch-quantization's ``start_bin``
default, which ``ops.calibrate`` passes when given none (not a setting here)."""


class MSECalibrator(_HistogramCalibrator):
    """amax minimising the histogram-weighted mean squared fake-quantization error over the bin
    centres (pytorch-quantization's ``mse`` method): candidates from bin :data:`MSE_START_BIN`
    (128) up, so ``num_bins`` must be at least 129.

    Example:
        >>> from bitnet_go.quantization import MSECalibrator
        >>> cal = MSECalibrator(num_bins=256)
        >>> cal.update([0.5, 1.0, 1.5, 2.0, 8.0]); cal.compute_amax()
        7.984375
    """

    method = "mse"

    def _min_bins(self) -> int:
        return MSE_START_BIN + 1

    def _min_bins_why(self) -> str:
        return f" (amax is tried at the centres of bins {MSE_START_BIN} and up, as in pytorch-quantization)"
