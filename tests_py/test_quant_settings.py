"""The observers' and calibrators' settings: a bad one is a TypeError (not a number, not a bool)
or a ValueError (out of range) naming it, at construction; load_state_dict names what a state
lacks or holds wrong; HistogramObserver says when its range overflows float32 and keeps NumPy's
warnings about torch's inf/NaN intermediates to itself; an observer that took NaN/Inf (with
check_finite=False) says so in its own terms."""

from __future__ import annotations

import inspect
import pickle
import warnings
from collections.abc import Callable

import numpy as np
import pytest

from bitnet_go._core import ops
from bitnet_go.quantization import (
    EntropyCalibrator,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MSECalibrator,
    PercentileCalibrator,
    PerChannelMinMaxObserver,
)
from bitnet_go.quantization._calibrators import MSE_START_BIN

OBSERVERS: list[Callable[..., object]] = [
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    PerChannelMinMaxObserver,
    HistogramObserver,
]
CALIBRATORS: list[Callable[..., object]] = [PercentileCalibrator, EntropyCalibrator, MSECalibrator]
NOT_NUMBERS = ["a", None, True, np.bool_(False), [1.0], 1j]
NOT_BOOLS = ["no", "", None, 0, 1, 1.0]


def cases(names: list[Callable[..., object]], kwargs: list[dict], exc: type, match: str) -> list:
    return [pytest.param(c, kw, exc, match, id=f"{c.__name__}-{kw}") for c in names for kw in kwargs]


REFUSED = [
    # eps: a real number, finite and > 0 in float32 (1e-50 is 0 there, 1e39 infinite)
    *cases(OBSERVERS, [dict(eps=v) for v in NOT_NUMBERS], TypeError, "eps must be a real number"),
    *cases(OBSERVERS, [dict(eps=v) for v in (0.0, -1.0, np.nan, np.inf, 1e-50, 1e39, 10**400)], ValueError, "eps "),
    # check_finite and reduce_range: bools
    *cases(OBSERVERS + CALIBRATORS, [dict(check_finite=v) for v in NOT_BOOLS], TypeError,
           "check_finite must be a bool"),
    *cases(OBSERVERS, [dict(reduce_range=v) for v in NOT_BOOLS], TypeError, "reduce_range must be a bool"),
    # the first positional argument of three observers is a number, as in torch
    *cases([MovingAverageMinMaxObserver], [dict(averaging_constant="int8")], TypeError,
           "averaging_constant must be a number, got str 'int8': MovingAverageMinMaxObserver's first argument"),
    *cases([PerChannelMinMaxObserver], [dict(ch_axis="int8")], TypeError, "first argument is ch_axis"),
    *cases([HistogramObserver], [dict(bins="uint8")], TypeError, "first argument is bins"),
    *cases([MovingAverageMinMaxObserver], [dict(averaging_constant=v) for v in NOT_NUMBERS[1:]], TypeError,
           "averaging_constant must be a real number"),
    *cases([MovingAverageMinMaxObserver], [dict(averaging_constant=v) for v in (0, 0.0, -0.5, 1.5, np.nan, np.inf)],
           ValueError, r"averaging_constant must be in \(0, 1\]"),
    *cases([MovingAverageMinMaxObserver], [dict(averaging_constant=1e-50)], ValueError, "not 0 in float32"),
    *cases([PerChannelMinMaxObserver], [dict(ch_axis=v) for v in (0.0, True, None)], TypeError,
           "ch_axis must be an int"),
    *cases([HistogramObserver], [dict(bins=v) for v in (2048.0, True, None)], TypeError, "bins must be an int"),
    *cases([HistogramObserver], [dict(bins=v) for v in (0, -1)], ValueError, "bins must be >= 1"),
    # calibrators
    *cases(CALIBRATORS, [dict(unsigned=v) for v in NOT_BOOLS], TypeError, "unsigned must be a bool"),
    *cases([PercentileCalibrator], [dict(percentile=v) for v in NOT_NUMBERS], TypeError,
           "percentile must be a real number"),
    *cases([PercentileCalibrator], [dict(percentile=v) for v in (0, 0.0, -1.0, 100.5, np.nan, np.inf)], ValueError,
           r"percentile must be in \(0, 100\]"),
    *cases(CALIBRATORS, [dict(bin_width=v) for v in NOT_NUMBERS[:1] + NOT_NUMBERS[2:]], TypeError,
           "bin_width must be a real number"),
    *cases(CALIBRATORS, [dict(bin_width=v) for v in (0.0, -0.1, np.nan, np.inf, 1e-50, 1e39)], ValueError,
           r"bin_width must be finite and > 0 \(in float32"),
    *cases(CALIBRATORS, [dict(num_bins=v) for v in (2048.0, True, None, "2048")], TypeError, "num_bins must be an int"),
    *cases([PercentileCalibrator], [dict(num_bins=v) for v in (0, -5)], ValueError,
           "num_bins must be >= 1 for PercentileCalibrator, got"),
    *cases([MSECalibrator], [dict(num_bins=v) for v in (0, 1, 100, 128)], ValueError,
           r"num_bins must be >= 129 for MSECalibrator \(amax is tried at the centres of bins 128 and up"),
    *cases([EntropyCalibrator], [dict(num_bins=v) for v in (1, 100, 127)], ValueError,
           r"num_bins must be >= 128 for EntropyCalibrator \(.*start_bin=128"),
    *cases([EntropyCalibrator], [dict(start_bin=300, num_bins=299)], ValueError, "num_bins must be >= 300"),
    *cases([EntropyCalibrator], [dict(start_bin=1, num_bins=1)], ValueError, "num_bins must be >= 2"),
    *cases([EntropyCalibrator], [dict(start_bin=v) for v in (0, -1)], ValueError, "start_bin must be >= 1"),
    *cases([EntropyCalibrator], [dict(start_bin=v) for v in (128.0, "128", None)], TypeError,
           "start_bin must be an int"),
    *cases(CALIBRATORS, [dict(num_bits=v) for v in (8.0, None)], TypeError, "num_bits must be an int"),
    *cases(CALIBRATORS, [dict(num_bits=v) for v in (1, 17)], ValueError, r"num_bits must be in \[2, 16\]"),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "kwargs", "exc", "match"), REFUSED)
def test_bad_setting_is_refused_at_construction(cls: Callable[..., object], kwargs: dict, exc: type,
                                                match: str) -> None:  # fmt: skip
    with pytest.raises(exc, match=match):
        cls(**kwargs)


ACCEPTED = [
    (MinMaxObserver, dict(eps=1), "eps", 1.0),
    (MinMaxObserver, dict(eps=np.float32(0.5)), "eps", 0.5),
    (HistogramObserver, dict(eps=1e-45), "eps", 1e-45),  # float32's smallest subnormal: not 0 there
    (MinMaxObserver, dict(check_finite=np.bool_(False)), "check_finite", False),
    (MovingAverageMinMaxObserver, dict(averaging_constant=1), "averaging_constant", 1.0),
    (MovingAverageMinMaxObserver, dict(averaging_constant=np.float64(0.25)), "averaging_constant", 0.25),
    (PerChannelMinMaxObserver, dict(ch_axis=np.int64(-1)), "ch_axis", -1),
    (HistogramObserver, dict(bins=np.int32(1)), "bins", 1),
    (PercentileCalibrator, dict(percentile=100), "percentile", 100.0),
    (PercentileCalibrator, dict(percentile=np.float32(50)), "percentile", 50.0),
    (PercentileCalibrator, dict(num_bins=1), "num_bins", 1),
    (PercentileCalibrator, dict(unsigned=np.bool_(True)), "unsigned", True),
    (PercentileCalibrator, dict(bin_width=np.float32(0.25)), "bin_width", 0.25),
    (PercentileCalibrator, dict(bin_width=1), "bin_width", 1.0),
    (MSECalibrator, dict(num_bins=129), "num_bins", 129),
    (EntropyCalibrator, dict(num_bins=128), "num_bins", 128),
    (EntropyCalibrator, dict(start_bin=1, num_bins=2), "num_bins", 2),
    (EntropyCalibrator, dict(check_finite=False), "check_finite", False),
]


@pytest.mark.parametrize(("cls", "kwargs", "attr", "want"), ACCEPTED)
def test_good_setting_is_taken_as_a_python_value(cls: Callable[..., object], kwargs: dict, attr: str,
                                                 want: object) -> None:  # fmt: skip
    got = getattr(cls(**kwargs), attr)
    assert got == want and type(got) is type(want)


def test_mse_start_bin_is_the_one_the_search_uses() -> None:
    assert inspect.signature(ops.calibrate).parameters["start_bin"].default == MSE_START_BIN == 128


@pytest.mark.parametrize(
    ("cal", "amax_in_bins"),
    [
        (MSECalibrator(num_bins=129), 128.5),
        (EntropyCalibrator(num_bins=128), 128),
        (EntropyCalibrator(start_bin=1, num_bins=2), 2),
    ],
)
def test_fewest_bins_allowed_search_their_one_candidate(cal: object, amax_in_bins: float) -> None:
    """At the fewest bins allowed the search has one candidate: MSE the centre of bin 128,
    entropy the edge past the last bin (it failed at compute_amax with fewer)."""
    cal.update(np.linspace(-3, 3, 1000, dtype=np.float32))  # type: ignore[attr-defined]
    assert cal.compute_amax() == amax_in_bins * cal.bin_width  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("cls", "need"), [(MSECalibrator, "129"), (EntropyCalibrator, "128")]
)  # fmt: skip
def test_fixed_width_histogram_too_short_to_search(cls: Callable[..., object], need: str) -> None:
    """A fixed bin_width's histogram covers only up to max|x|: too few bins is named at compute_amax."""
    cal = cls(bin_width=1.0)
    cal.update(np.float32([5.0, -2.0]))  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=f"histogram has 5 bins of width 1, fewer than the {need} its search needs"):
        cal.compute_amax()  # type: ignore[attr-defined]
    fine = PercentileCalibrator(bin_width=1.0, percentile=100.0)
    fine.update(np.float32([5.0, -2.0]))
    assert fine.compute_amax() == 4.0


# ---------------------------------------------------------------- load_state_dict


def seen(make: Callable[[], object]) -> object:
    c = make()
    c.update(np.float32([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]]))  # type: ignore[attr-defined]
    return c


MAKERS: list[Callable[[], object]] = [
    lambda: MinMaxObserver("int8"),
    lambda: MovingAverageMinMaxObserver(0.5),
    lambda: PerChannelMinMaxObserver(1),
    lambda: HistogramObserver(64),
    lambda: PercentileCalibrator(num_bins=256),
    lambda: EntropyCalibrator(num_bins=256),
    lambda: MSECalibrator(num_bins=256),
]
MISSING = [
    pytest.param(make, key, id=f"{type(make()).__name__}-{key}")
    for make in MAKERS
    for key in seen(make).state_dict()  # type: ignore[attr-defined]
]


@pytest.mark.parametrize(("make", "key"), MISSING)
def test_state_missing_a_key_names_it(make: Callable[[], object], key: str) -> None:
    state = seen(make).state_dict()  # type: ignore[attr-defined]
    del state[key]
    fresh = make()
    before = pickle.dumps(fresh.state_dict())  # type: ignore[attr-defined]
    name = type(fresh).__name__
    with pytest.raises(KeyError, match=rf"{name}.load_state_dict: state lacks key\(s\) \['{key}'\]"):
        fresh.load_state_dict(state)  # type: ignore[attr-defined]
    assert pickle.dumps(fresh.state_dict()) == before  # type: ignore[attr-defined]


def test_state_missing_several_keys_names_them_all() -> None:
    with pytest.raises(KeyError, match=r"lacks key\(s\) \['kind', .*'min_val', 'max_val'\]"):
        MinMaxObserver().load_state_dict({})
    with pytest.raises(KeyError, match=r"lacks key\(s\) \['counts', 'bin_width', 'zeros'\]"):
        state = MSECalibrator().state_dict()
        MSECalibrator().load_state_dict({k: v for k, v in state.items() if k not in ("counts", "bin_width", "zeros")})


def test_state_of_another_kind_says_so() -> None:
    with pytest.raises(ValueError, match="state is a 'MinMaxObserver''s, not a HistogramObserver's"):
        HistogramObserver().load_state_dict(MinMaxObserver().state_dict())
    with pytest.raises(ValueError, match="not a MSECalibrator's"):
        MSECalibrator().load_state_dict(PercentileCalibrator().state_dict())


def changed(make: Callable[[], object], **values: object) -> tuple[object, dict]:
    obj = seen(make)
    return obj, {**obj.state_dict(), **values}  # type: ignore[attr-defined]


WRONG_VALUES = [
    (lambda: MinMaxObserver("int8"), dict(min_val=np.float64(-2)), TypeError, "state's min_val must be float32"),
    (lambda: MinMaxObserver("int8"), dict(max_val=np.float32([1, 2])), ValueError, r"max_val must have shape \(\)"),
    (lambda: PerChannelMinMaxObserver(1), dict(min_val=np.float32(0)), ValueError, "min_val must be 1-D"),
    (lambda: PerChannelMinMaxObserver(1), dict(max_val=np.float32([1, 2])), ValueError, r"max_val must have shape"),
    (lambda: HistogramObserver(64), dict(histogram=np.zeros(63, np.float32)), ValueError, r"shape \(64,\)"),
    (lambda: HistogramObserver(64), dict(histogram=np.zeros(64, np.int64)), TypeError, "histogram must be float32"),
    (lambda: HistogramObserver(64), dict(histogram=np.full(64, np.nan, np.float32)), ValueError,
     "histogram must hold finite counts >= 0"),
    (lambda: HistogramObserver(64), dict(histogram=-np.ones(64, np.float32)), ValueError, "finite counts >= 0"),
    (lambda: HistogramObserver(64), dict(min_val=np.float32(5)), ValueError, "min_val <= max_val"),
    (lambda: HistogramObserver(64), dict(min_val=np.float32(np.nan)), ValueError, "must be finite"),
    (lambda: HistogramObserver(64), dict(min_val=np.float32(-3e38), max_val=np.float32(3e38)), ValueError,
     "observed range overflows float32"),
    (lambda: PercentileCalibrator(), dict(counts=np.ones(4)), ValueError, "counts must be a 1-D int64 array"),
    (lambda: PercentileCalibrator(), dict(bin_width="a"), TypeError, "state's bin_width must be a real number"),
    (lambda: PercentileCalibrator(), dict(bin_width=-1.0), ValueError, "state's bin_width must be finite and > 0"),
    (lambda: PercentileCalibrator(), dict(bin_width=None), ValueError,
     "counts must be empty when its bin_width is None"),
    (lambda: MSECalibrator(), dict(zeros="a"), TypeError, "state's zeros must be an int"),
    (lambda: MSECalibrator(), dict(zeros=-1), ValueError, "state's zeros must be >= 0"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "values", "exc", "match"), WRONG_VALUES)
def test_state_with_a_wrong_value_is_refused(make: Callable[[], object], values: dict, exc: type, match: str) -> None:
    _, state = changed(make, **values)
    fresh = make()
    before = pickle.dumps(fresh.state_dict())  # type: ignore[attr-defined]
    with pytest.raises(exc, match=match):
        fresh.load_state_dict(state)  # type: ignore[attr-defined]
    assert pickle.dumps(fresh.state_dict()) == before  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", MAKERS)
def test_state_round_trip_still_loads(make: Callable[[], object]) -> None:
    obj = seen(make)
    fresh = make()
    fresh.load_state_dict(pickle.loads(pickle.dumps(obj.state_dict())))  # type: ignore[attr-defined]
    assert all(np.array_equal(a, b) for a, b in zip(fresh.calculate_qparams(), obj.calculate_qparams()))  # type: ignore[attr-defined]


# ---------------------------------------------------------------- HistogramObserver's range


@pytest.mark.parametrize(
    ("batches", "match"),
    [
        ([[3e38, -3e38]], r"min_val=-3e\+38, max_val=3e\+38, and max_val - min_val is past 3.4028235e\+38"),
        ([[-2e38, 0.0], [2e38]], r"min_val=-2e\+38, max_val=2e\+38"),
        ([[1.0], [-3.4e38, 3.4e38]], r"min_val=-3.4e\+38, max_val=3.4e\+38"),
    ],
)
def test_histogram_range_past_float32_is_named(batches: list[list[float]], match: str) -> None:
    obs = HistogramObserver()
    *earlier, last = [np.float32(b) for b in batches]
    for b in earlier:
        obs.update(b)
    before = pickle.dumps(obs.state_dict())
    with pytest.raises(ValueError, match="HistogramObserver's observed range overflows float32: " + match):
        obs.update(last)
    assert pickle.dumps(obs.state_dict()) == before  # the refused batch left nothing behind


def test_histogram_merge_past_float32_is_named() -> None:
    a, b = HistogramObserver(), HistogramObserver()
    a.update(np.float32([-2e38]))
    b.update(np.float32([2e38]))
    with pytest.raises(ValueError, match=r"observed range overflows float32: min_val=-2e\+38, max_val=2e\+38"):
        a.merge(b)


@pytest.mark.parametrize(
    "batches",
    [[[1.0, 1.0]], [[1.0], [1e30]], [[-1e38, 1e38]], [[0.0], [-5.0, 5.0], [1e20]], [[1e8]], [[-3e38, -3e38], [-3e38]],
     [[1e8], [1e8, 1e8], [-5.0]], [[1e8], [1e9]]],
    ids=["constant", "widening", "wide", "widening-twice", "constant-1e8", "constant-3e38", "1e8-widened", "1e8-1e9"],
)  # fmt: skip
@pytest.mark.parametrize("bins", [2048, 3])
def test_histogram_edge_ranges_are_quiet_and_torchs(batches: list[list[float]], bins: int) -> None:
    """A zero-width or huge range has inf/NaN intermediates in torch's search, as in ours: no
    NumPy RuntimeWarning leaks (there were 2 and 21), and the qparams are still torch's, bit for bit.
    A constant batch too large for float32 to widen its range by 1 (1e8) is binned (it was Go's
    "lo and hi must be finite with lo < hi")."""
    obs = HistogramObserver(bins)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b in batches:
            obs.update(np.float32(b))
        s, z = obs.calculate_qparams()
    torch = pytest.importorskip("torch")
    tob = pytest.importorskip("torch.ao.quantization.observer")
    ref = tob.HistogramObserver(bins)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b in batches:
            ref(torch.tensor(b, dtype=torch.float32))
        ts, tz = ref.calculate_qparams()
    assert s.view(np.int32).tolist() == ts.numpy().view(np.int32).tolist() and z.tolist() == tz.tolist()


# ---------------------------------------------------------------- NaN/Inf taken with check_finite=False


@pytest.mark.parametrize(
    ("make", "x", "match"),
    [
        (lambda: MinMaxObserver(check_finite=False), [np.nan, 1.0], r"MinMaxObserver saw NaN/Inf \(min_val=nan, "),
        (lambda: MinMaxObserver(check_finite=False), [1.0, np.inf], r"\(min_val=1.0, max_val=inf\)"),
        (lambda: MinMaxObserver("int8", "symmetric", check_finite=False), [-np.inf, 1.0],
         r"\(min_val=-inf, max_val=1.0\)"),
        (lambda: MovingAverageMinMaxObserver(check_finite=False), [1.0, np.inf],
         r"MovingAverageMinMaxObserver saw NaN/Inf \(min_val=1.0, max_val=inf\)"),
        (lambda: PerChannelMinMaxObserver(1, check_finite=False), [[1.0, 2.0], [3.0, np.inf]],
         r"PerChannelMinMaxObserver saw NaN/Inf \(min_val\[1\]=2.0, max_val\[1\]=inf\)"),
    ],
)  # fmt: skip
def test_non_finite_data_taken_is_named_in_the_observers_terms(make: Callable[[], object], x: list,
                                                               match: str) -> None:  # fmt: skip
    obs = make()
    obs.update(np.float32(x))  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=match + ".*check_finite=True refuses such a batch"):
        obs.calculate_qparams()  # type: ignore[attr-defined]


def test_calibrator_takes_no_truthy_stand_ins() -> None:
    """unsigned="no" had given an unsigned calibrator (and its qparams for uint8)."""
    with pytest.raises(TypeError, match="unsigned must be a bool, got str 'no'"):
        PercentileCalibrator(unsigned="no")  # type: ignore[arg-type]
    assert PercentileCalibrator(unsigned=False).dtype == "int8"
