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
