"""bitnet_go.quantization's observers bit for bit against torch.ao's on the same
sequence of batches (scale and zero point), the float32 pieces of
HistogramObserver against the torch operations they reproduce, merging and
state round trips. Every case draws its data from the seed in its test id."""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pytest

from bitnet_go.quantization import (
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    PerChannelMinMaxObserver,
)
from bitnet_go.quantization import _torchmath as tm

torch = pytest.importorskip(
    "torch", reason="torch is not installed: the observer parity tests against torch.ao are skipped"
)
tob = pytest.importorskip("torch.ao.quantization.observer", reason="this torch has no torch.ao.quantization.observer")

_T = TypeVar("_T", bound=Callable[..., None])

TORCH_DTYPES = {"int8": torch.qint8, "uint8": torch.quint8}
QUIET = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")


def against_torch(seeds: int) -> Callable[[_T], _T]:
    """Parametrize a test over torch's schemes, the 8-bit dtypes torch's observers take and
    ``seeds`` seeds (test ids ``[seed-dtype-scheme]``), quieting torch's warnings."""

    def mark(test: _T) -> _T:
        for m in (pytest.mark.parametrize("seed", range(seeds)), pytest.mark.parametrize("dtype", ["int8", "uint8"]),
                  pytest.mark.parametrize("scheme", ["affine", "symmetric"]), QUIET):  # fmt: skip
            test = m(test)
        return test

    return mark


def batches(rng: np.random.Generator, n: int, *, shape: tuple[int, ...] | None = None) -> list[np.ndarray]:
    """A drifting sequence: scales and offsets change, some batches widen the range, some are constant."""
    out = []
    for i in range(n):
        shp = shape or tuple(int(v) for v in rng.integers(1, 40, size=int(rng.integers(1, 4))))
        k = rng.random()
        if k < 0.1:
            x = np.full(shp, rng.standard_normal())
        elif k < 0.2:
            x = (rng.integers(-50, 50, shp) + 0.5) / 8
        else:
            x = rng.standard_normal(shp) * 10 ** rng.uniform(-1, 1) + rng.uniform(-1, 1) * (i % 3)
        out.append(x.astype(np.float32))
    return out


def same(s: np.ndarray, z: np.ndarray, ts: object, tz: object) -> bool:
    ts_ = np.asarray(ts.numpy(), np.float32).reshape(-1)  # type: ignore[attr-defined]
    tz_ = np.asarray(tz.numpy(), np.int64).reshape(-1)  # type: ignore[attr-defined]
    return np.array_equal(s.view(np.int32), ts_.view(np.int32)) and np.array_equal(z.astype(np.int64), tz_)


def qscheme(scheme: str, per_channel: bool = False) -> object:
    return getattr(torch, f"per_{'channel' if per_channel else 'tensor'}_{scheme}")


@against_torch(seeds=8)
def test_minmax_and_moving_average_match_torch(dtype: str, scheme: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 1, len(dtype), len(scheme)])
    reduce = bool(rng.random() < 0.3) and not (scheme == "symmetric" and dtype == "uint8")
    pairs = [
        (MinMaxObserver(dtype, scheme, reduce_range=reduce),
         tob.MinMaxObserver(dtype=TORCH_DTYPES[dtype], qscheme=qscheme(scheme), reduce_range=reduce)),
        (MovingAverageMinMaxObserver(0.01, dtype, scheme, reduce_range=reduce),
         tob.MovingAverageMinMaxObserver(averaging_constant=0.01, dtype=TORCH_DTYPES[dtype], qscheme=qscheme(scheme),
                                         reduce_range=reduce)),
        (MovingAverageMinMaxObserver(0.3, dtype, scheme),
         tob.MovingAverageMinMaxObserver(averaging_constant=0.3, dtype=TORCH_DTYPES[dtype], qscheme=qscheme(scheme))),
    ]  # fmt: skip
    for ours, theirs in pairs:
        assert same(*ours.calculate_qparams(), *theirs.calculate_qparams())  # nothing seen: (1.0, 0)
        for x in batches(rng, 12):
            ours.update(x)
            theirs(torch.from_numpy(x))
            assert ours.min_val == theirs.min_val.item() and ours.max_val == theirs.max_val.item()
            assert same(*ours.calculate_qparams(), *theirs.calculate_qparams())


@against_torch(seeds=6)
def test_per_channel_matches_torch_on_every_axis(dtype: str, scheme: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 2, len(dtype), len(scheme)])
    # rank >= 2: torch's PerChannelMinMaxObserver fails on 1-D input (torch.flatten(y, start_dim=1))
    shape = tuple(int(v) for v in rng.integers(1, 9, size=int(rng.integers(2, 5))))
    for axis in range(-len(shape), len(shape)):
        ours = PerChannelMinMaxObserver(axis, dtype, scheme)
        theirs = tob.PerChannelMinMaxObserver(ch_axis=axis, dtype=TORCH_DTYPES[dtype],
                                              qscheme=qscheme(scheme, per_channel=True))  # fmt: skip
        for x in batches(rng, 5, shape=shape):
            ours(x)
            theirs(torch.from_numpy(x))
            assert same(*ours.calculate_qparams(), *theirs.calculate_qparams()), axis


@against_torch(seeds=5)
def test_histogram_observer_matches_torch(dtype: str, scheme: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 3, len(dtype), len(scheme)])
    bins = int(rng.choice([2048, 2048, 512, 97]))
    ours = HistogramObserver(bins, dtype, scheme)
    theirs = tob.HistogramObserver(bins=bins, dtype=TORCH_DTYPES[dtype], qscheme=qscheme(scheme))
    assert same(*ours.calculate_qparams(), *theirs.calculate_qparams())
    for i, x in enumerate(batches(rng, 6)):
        ours.update(x)
        theirs(torch.from_numpy(x))
        assert ours.min_val == theirs.min_val.item() and ours.max_val == theirs.max_val.item()
        assert np.array_equal(ours.histogram, theirs.histogram.numpy()), i
        if i % 2 or i == 5:
            assert same(*ours.calculate_qparams(), *theirs.calculate_qparams()), i


@QUIET
def test_histogram_observer_constant_first_batch_and_inf() -> None:
    ours, theirs = HistogramObserver(check_finite=False), tob.HistogramObserver()
    for x in (np.full(7, 2.5, np.float32), np.float32([2.5, np.inf, 3.0]), np.float32([-1.0, 2.5])):
        ours.update(x)
        theirs(torch.from_numpy(x))
        assert np.array_equal(ours.histogram, theirs.histogram.numpy())
    assert same(*ours.calculate_qparams(), *theirs.calculate_qparams())
    with pytest.raises(ValueError, match="Inf"):
        HistogramObserver().update(np.float32([1, np.inf]))
    with pytest.raises(ValueError, match="NaN"):
        HistogramObserver().update(np.float32([1, np.nan]))


# ---------------------------------------------------------------- torch's float32 operations


@pytest.mark.parametrize("seed", range(4))
def test_linspace_sum_and_floor_division_are_torchs(seed: int) -> None:
    rng = np.random.default_rng([seed, 4])
    for _ in range(40):
        steps = int(rng.choice([1, 2, 3, 17, 100, 2049, 32769]))
        a, b = np.sort(rng.standard_normal(2).astype(np.float32) * np.float32(10 ** rng.uniform(-5, 5)))
        got, want = tm.linspace_f32(float(a), float(b), steps), torch.linspace(float(a), float(b), steps).numpy()
        assert np.array_equal(got.view(np.int32), want.view(np.int32)), (a, b, steps)
        n = int(rng.choice([1, 7, 8, 15, 33, 64, 100, 2048, 4099]))
        x = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(np.float32)
        assert tm.sum_f32(x).view(np.int32) == torch.from_numpy(x).sum().numpy().view(np.int32), n
        d = np.float32(rng.uniform(1e-3, 10))
        want = torch.div(torch.from_numpy(x), float(d), rounding_mode="floor").numpy()
        assert np.array_equal(tm.div_floor_f32(x, d), want)


@pytest.mark.parametrize("seed", range(6))
def test_histogram_search_and_rebinning_are_torchs(seed: int) -> None:
    """The NumPy float32 parts alone, on crafted histograms: torch's error, search and upscale."""
    rng = np.random.default_rng([seed, 5])
    for trial in range(8):
        bins = int(rng.choice([2048, 256, 37]))
        h = [rng.poisson(rng.uniform(0.1, 50), bins), np.floor(np.exp(-np.linspace(-4, 4, bins) ** 2 * 3) * 1000),
             (rng.random(bins) < 0.05) * rng.integers(1, 1000, bins) / 16][trial % 3].astype(np.float32)  # fmt: skip
        mn = np.float32(-abs(rng.standard_normal()) * 10 ** rng.uniform(-3, 3))
        mx = np.float32(abs(rng.standard_normal()) * 10 ** rng.uniform(-3, 3))
        theirs = tob.HistogramObserver(bins=bins)
        theirs.histogram, theirs.min_val, theirs.max_val = (
            torch.from_numpy(h.copy()),
            torch.tensor(mn),
            torch.tensor(mx),
        )
        ours = HistogramObserver(bins)
        ours.histogram, ours.min_val, ours.max_val = h.copy(), mn, mx
        for _ in range(4):
            s = int(rng.integers(0, bins // 2))
            e = int(rng.integers(s, bins))
            width = (float(mx) - float(mn)) / bins
            density = (h / np.float32(width)).astype(np.float32)
            got = ours._quantization_error(s, e, width, np.arange(bins), density)
            assert got == theirs._compute_quantization_error(s, e)
        a, b = theirs._non_linear_param_search()
        assert ours._non_linear_param_search() == (a.item(), b.item())
        nmn, nmx = np.float32(mn * rng.uniform(1, 4)), np.float32(mx * rng.uniform(1, 4))
        want = theirs._upscale_histogram(torch.from_numpy(h.copy()), torch.tensor(mn), torch.tensor(mx),
                                         torch.tensor(nmn), torch.tensor(nmx)).numpy()  # fmt: skip
        assert np.array_equal(ours._upscale(h.copy(), mn, mx, nmn, nmx), want)


# ---------------------------------------------------------------- merge and state


@pytest.mark.parametrize("seed", range(4))
def test_merge_of_halves_is_one_that_saw_all(seed: int) -> None:
    rng = np.random.default_rng([seed, 6])
    data = batches(rng, 10, shape=(4, 6))
    for make in (lambda: MinMaxObserver("int8"), lambda: PerChannelMinMaxObserver(1, "uint8", "symmetric")):
        whole, a, b = make(), make(), make()
        for i, x in enumerate(data):
            whole.update(x)
            (a if i < 5 else b).update(x)
        assert all(np.array_equal(u, v) for u, v in zip(a.merge(b).calculate_qparams(), whole.calculate_qparams()))
    # a histogram merges exactly when both halves saw the same range
    lo_hi = np.float32([-3, 5])
    halves = [np.concatenate([lo_hi, x.ravel().clip(-3, 5)]) for x in data]
    whole, a, b = HistogramObserver(), HistogramObserver(), HistogramObserver()
    for i, x in enumerate(halves):
        whole.update(x)
        (a if i % 2 else b).update(x)
    a.merge(b)
    assert np.array_equal(a.histogram, whole.histogram)
    assert all(np.array_equal(u, v) for u, v in zip(a.calculate_qparams(), whole.calculate_qparams()))
    with pytest.raises(TypeError, match="cannot be merged"):
        MovingAverageMinMaxObserver().merge(MovingAverageMinMaxObserver())
    with pytest.raises(TypeError, match="same settings"):
        MinMaxObserver("int8").merge(MinMaxObserver("uint8"))


@pytest.mark.parametrize("seed", range(3))
def test_state_dict_round_trip(seed: int) -> None:
    rng = np.random.default_rng([seed, 7])
    data = batches(rng, 4, shape=(3, 5))
    makers = [lambda: MinMaxObserver("int8"), lambda: MovingAverageMinMaxObserver(0.1),
              lambda: PerChannelMinMaxObserver(0), lambda: HistogramObserver(256, "int8", "symmetric")]  # fmt: skip
    for make in makers:
        obs = make()
        for x in data:
            obs.update(x)
        state = pickle.loads(pickle.dumps(obs.state_dict()))
        fresh = make()
        fresh.load_state_dict(state)
        assert all(np.array_equal(u, v) for u, v in zip(fresh.calculate_qparams(), obs.calculate_qparams()))
        fresh.reset()
        assert fresh.calculate_qparams()[0].tolist() == [1.0]
        with pytest.raises(ValueError):
            MinMaxObserver("uint4").load_state_dict(state)


def test_observer_bounded_memory() -> None:
    obs = HistogramObserver()
    for _ in range(3):
        obs.update(np.random.default_rng(8).standard_normal(10000).astype(np.float32))
    assert obs.histogram.nbytes == 2048 * 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        obs.calculate_qparams()
