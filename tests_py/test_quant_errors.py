"""Bad arguments to quantize / choose_qparams / the observers: a ValueError or TypeError
that names the argument, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import bitnet_go
from bitnet_go.quantization import HistogramObserver, MinMaxObserver, PerChannelMinMaxObserver

X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(dtype="int3"), ValueError, "dtype must be one of"),
        (dict(dtype=8), TypeError, "dtype must be a str"),
        (dict(dtype="int8", scheme="asym"), ValueError, "scheme must be one of"),
        (dict(dtype="int8", mapping="sym"), ValueError, "mapping must be one of"),
        (dict(dtype="int8", scale=0.0), ValueError, "scale"),
        (dict(dtype="int8", scale=-1.0), ValueError, "scale"),
        (dict(dtype="int8", scale=float("nan")), ValueError, "scale"),
        (dict(dtype="int8", scale=float("inf")), ValueError, "scale"),
        (dict(dtype="binary", scale=0.0), ValueError, "scale"),
        (dict(dtype="int8", scale=0.1, zero_point=128), ValueError, "zero.?point"),
        (dict(dtype="uint8", scale=0.1, zero_point=-1), ValueError, "zero.?point"),
        (dict(dtype="int4", scale=0.1, zero_point=8), ValueError, "zero.?point"),
        (dict(dtype="int8", scale=0.1, zero_point=0.5), TypeError, "zero_point must be integers"),
        (dict(dtype="int8", scale="a"), TypeError, "scale must be real numbers"),
        (dict(dtype="int8", scale=[0.1, 0.2]), ValueError, "scale must be one value \\(per tensor\\), got 2"),
        (dict(dtype="int8", scale=[0.1, 0.2], axis=0), ValueError, "scale must have 1 or 3 entries"),
        (dict(dtype="int8", zero_point=3), ValueError, "zero_point is given without scale"),
        (dict(dtype="binary", zero_point=3), ValueError, "no zero point"),
        (dict(dtype="int8", axis=2), ValueError, "axis must be in"),
        (dict(dtype="int8", axis=-3), ValueError, "axis must be in"),
        (dict(dtype="int8", axis=1.0), TypeError, "axis must be an int"),
        (dict(dtype="int8", axis=0, group_size=2), ValueError, "not both"),
        (dict(dtype="int8", group_size=3), ValueError, "group_size must divide"),
        (dict(dtype="int8", group_size=0), ValueError, "group_size must be >= 1"),
        (dict(dtype="int8", quant_min=-200, quant_max=10), ValueError, "quant_min"),
        (dict(dtype="int8", quant_min=5, quant_max=5), ValueError, "quant_min must be < quant_max"),
        (dict(dtype="int8", quant_min=5), ValueError, "together"),
        (dict(dtype="int4", reduce_range=True), ValueError, "reduce_range"),
        (dict(dtype="int8", eps=-1.0), ValueError, "eps"),
        (dict(dtype="int8", check_finite=1), TypeError, "check_finite"),
    ],
)
def test_quantize_refuses(kwargs: dict, exc: type, match: str) -> None:
    dtype = kwargs.pop("dtype")
    with pytest.raises(exc, match=match):
        bitnet_go.quantize(X, dtype, **kwargs)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int4", "uint4", "binary"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_refused_with_check_finite(dtype: str, bad: float) -> None:
    x = X.copy()
    x[1, 2] = bad
    with pytest.raises(ValueError, match="NaN|Inf|finite"):
        bitnet_go.quantize(x, dtype)
    with pytest.raises(ValueError, match="NaN|Inf|finite"):
        bitnet_go.quantize(x, dtype, scale=0.1)


def test_other_inputs() -> None:
    with pytest.raises(ValueError, match="at least one element"):
        bitnet_go.quantize(np.zeros(0, np.float32), "int8")
    with pytest.raises(TypeError, match="complex"):
        bitnet_go.quantize(np.zeros(3, np.complex64), "int8")
    with pytest.raises(TypeError, match="QuantizedTensor"):
        bitnet_go.dequantize(X)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min and max"):
        bitnet_go.choose_qparams([0.0, 1.0], [1.0], "int8")
    with pytest.raises(ValueError, match="dtype must be one of"):
        bitnet_go.choose_qparams(0.0, 1.0, "binary")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min"):
        bitnet_go.choose_qparams(2.0, 1.0, "int8")
    with pytest.raises(ValueError, match="scheme"):
        MinMaxObserver("int8", "per_tensor")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype"):
        HistogramObserver(dtype="int16")  # type: ignore[arg-type]
    obs = PerChannelMinMaxObserver(ch_axis=3)
    with pytest.raises(ValueError, match="ch_axis"):
        obs.update(X)
    obs = PerChannelMinMaxObserver(ch_axis=0)
    obs.update(X)
    with pytest.raises(ValueError, match="channels"):
        obs.update(X.T)
    with pytest.raises(ValueError, match="NaN|Inf|finite"):
        MinMaxObserver().update(np.float32([1, np.nan]))


@pytest.mark.parametrize("flag", ["no", None, 1, 0.0])
def test_check_finite_is_a_bool_everywhere(flag: object) -> None:
    """quantize, quantize_i2s (and the TL/TQ quantizers), conv2d_quantized and linear_quantized
    take check_finite as quantize does: a bool (numpy's too); "no" had turned the check on and
    None off."""
    x = np.ones((2, 128), np.float32)
    w = bitnet_go.quantize_i2s(np.ones((3, 2, 1, 1), np.float32))
    wl = bitnet_go.quantize_i2s(np.ones((3, 2), np.float32))
    calls = [
        lambda: bitnet_go.quantize(x, "int8", check_finite=flag),
        lambda: bitnet_go.quantize_i2s(x, check_finite=flag),
        lambda: bitnet_go.quantize_tl1(x, check_finite=flag),
        lambda: bitnet_go.quantize_tq2_0(np.ones((2, 256), np.float32), check_finite=flag),
        lambda: bitnet_go.conv2d_quantized(np.ones((1, 2, 3, 3), np.float32), w, check_finite=flag),
        lambda: bitnet_go.linear_quantized(np.ones((1, 2), np.float32), wl, check_finite=flag),
    ]
    for call in calls:
        with pytest.raises(TypeError, match="check_finite must be a bool"):
            call()
    assert bitnet_go.quantize_i2s(x, check_finite=np.bool_(False)).shape == (2, 128)


def test_observer_argument_checked() -> None:
    """An observer without calculate_qparams() is a TypeError (it was an AttributeError); an
    observer with a scale or zero point given too is refused (the scale had silently won)."""
    from bitnet_go.quantization import MinMaxObserver

    x = np.float32([-1.0, 0.5, 2.0])
    with pytest.raises(TypeError, match="observer must have a calculate_qparams"):
        bitnet_go.quantize(x, "uint8", observer=3)
    obs = MinMaxObserver(dtype="uint8")
    obs(x)
    for kw in (dict(scale=0.1), dict(scale=0.1, zero_point=3), dict(zero_point=3)):
        with pytest.raises(ValueError, match="not both"):
            bitnet_go.quantize(x, "uint8", observer=obs, **kw)
    assert (
        bitnet_go.quantize(x, "uint8", observer=obs).int_repr().tolist()
        == bitnet_go.quantize(
            x, "uint8", scale=float(obs.calculate_qparams()[0][0]), zero_point=int(obs.calculate_qparams()[1][0])
        )
        .int_repr()
        .tolist()
    )


@pytest.mark.parametrize(
    "kwargs",
    [dict(scale=1.0), dict(zero_point=3), dict(axis=0), dict(observer=MinMaxObserver("int8")), dict(scheme="symmetric"),
     dict(mapping="asymmetric"), dict(reduce_range=True), dict(quant_min=-1), dict(quant_max=1), dict(eps=1e-3)],
    ids=lambda k: next(iter(k)),
)  # fmt: skip
def test_ternary_refuses_what_it_cannot_use(kwargs: dict) -> None:
    """dtype='ternary' is quantize_i2s: an argument it would drop is named, not ignored."""
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=f"dtype='ternary' .* only, got {name} "):
        bitnet_go.quantize(X, "ternary", **kwargs)
    t = bitnet_go.quantize(X, "ternary", group_size=4)  # what it takes still works
    assert t.qtype == "i2_s" and t.block_size == 4


@pytest.mark.parametrize("seed", range(3))
def test_observer_ch_axis_is_the_axis(seed: int) -> None:
    """A per-channel observer's scales go along its ch_axis: the default axis, and a conflicting
    axis is refused (it applied the scales along the wrong axis, silently)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((5, 7)) * rng.uniform(0.1, 50, 7)).astype(np.float32)
    o = PerChannelMinMaxObserver(ch_axis=1, dtype="int8", scheme="symmetric")
    o.update(x)
    q = bitnet_go.quantize(x, "int8", observer=o)
    s, z = o.calculate_qparams()
    want = bitnet_go.quantize(x, "int8", scale=s, zero_point=z, axis=1)
    assert q.axis == 1 and np.array_equal(q.int_repr(), want.int_repr())
    assert np.array_equal(bitnet_go.quantize(x, "int8", observer=o, axis=-1).int_repr(), want.int_repr())
    with pytest.raises(ValueError, match="axis=0 but observer's ch_axis is 1"):
        bitnet_go.quantize(x, "int8", observer=o, axis=0)


@pytest.mark.needs("torch")
@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*are deprecated")  # torch 2.15
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_torch_ao_observer(seed: int, per_channel: bool, dtype: str) -> None:
    """A torch.ao observer (dtype torch.qint8/quint8) gives torch's own quantization, bit for bit."""
    import torch

    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 9)), int(rng.integers(1, 33)))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    tdt = torch.qint8 if dtype == "int8" else torch.quint8
    ao = torch.ao.quantization
    obs = ao.PerChannelMinMaxObserver(ch_axis=1, dtype=tdt) if per_channel else ao.MinMaxObserver(dtype=tdt)
    obs(torch.from_numpy(x))
    s, z = obs.calculate_qparams()
    if per_channel:
        ref = torch.quantize_per_channel(torch.from_numpy(x), s, z, 1, tdt)
    else:
        ref = torch.quantize_per_tensor(torch.from_numpy(x), float(s), int(z), tdt)
    q = bitnet_go.quantize(x, dtype, observer=obs)
    assert np.array_equal(q.int_repr(), ref.int_repr().numpy())
    other = "uint8" if dtype == "int8" else "int8"
    with pytest.raises(ValueError, match=f"observer's dtype torch.q.*is not dtype '{other}'"):
        bitnet_go.quantize(x, other, observer=obs)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(scheme="zzz"), ValueError, "scheme must be one of"),
        (dict(mapping="zzz"), ValueError, "mapping must be one of"),
        (dict(eps="zz"), TypeError, "eps must be a float, got str"),
    ],
)
def test_settings_checked_with_a_given_scale(kwargs: dict, exc: type, match: str) -> None:
    """scheme, mapping and eps are unused with a given scale, but a bad value is still an error."""
    with pytest.raises(exc, match=match):
        bitnet_go.quantize(X, "int8", scale=0.1, **kwargs)


def test_range_too_wide_for_a_scale() -> None:
    """x's range overflowing float32's scale is named as that (it was 'scales[0] must be finite')."""
    with pytest.raises(ValueError, match=r"x's range \[.*\] is too wide for a float32 scale"):
        bitnet_go.quantize(np.float32([3e38, -3e38]), "int8")
    with pytest.raises(ValueError, match=r"\(group 1\) is too wide"):
        bitnet_go.quantize(np.float32([[1, 2], [3e38, -3e38]]), "int8", axis=0)


@pytest.mark.filterwarnings("error")  # numpy's overflow warning in the float32 cast must not leak
def test_float64_beyond_float32() -> None:
    """A float64 value beyond float32's range becomes Inf as torch's .float() makes it, quietly:
    refused under check_finite, quantized to the range's end without it; an eps that rounds to
    float32 0 is named as given."""
    x = np.array([1e39, 1.0, -1e39])
    with pytest.raises(ValueError, match=r"non-finite value \(\+Inf\) at flat index 0"):
        bitnet_go.quantize_i2s(x)
    q = bitnet_go.quantize(x, "int8", scale=0.5, zero_point=0, check_finite=False)
    assert q.int_repr().tolist() == [127, 2, -128]
    with pytest.raises(ValueError, match=r"eps must be finite and > 0 in float32, got 1e-50"):
        bitnet_go.choose_qparams(-1.0, 1.0, "int8", eps=1e-50)
    s, _ = bitnet_go.choose_qparams(0.0, 0.0, "int8", eps=1e-40)  # a float32 subnormal is an eps
    assert s[0] == np.float32(1e-40)


@pytest.mark.parametrize(
    ("x", "axis", "match"),
    [
        ([np.nan, 1.0], None, r"its range, min=nan, max=nan, gives no scale"),
        ([np.inf, 1.0], None, r"its range, min=1.0, max=inf, gives no scale"),
        ([[1.0, 2.0], [-np.inf, 1.0]], 0, r"its range of group 1, min=-inf, max=1.0, gives no scale"),
    ],
)
def test_no_scale_from_a_range_with_nan_or_inf(x: list, axis: int | None, match: str) -> None:
    """check_finite=False with the scale computed from x: a range holding NaN/Inf is named (it was
    Go's 'mn[0] and mx[0] must be finite'); with a given scale the same x quantizes."""
    xa = np.float32(x)
    with pytest.raises(ValueError, match=match):
        bitnet_go.quantize(xa, "int8", axis=axis, check_finite=False)
    q = bitnet_go.quantize(xa, "int8", scale=0.5, zero_point=0, check_finite=False)
    assert q.shape == xa.shape
