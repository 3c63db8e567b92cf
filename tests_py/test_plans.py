"""What later calls of a layer skip: the conv2d plan kept with its weight, the 1x1 view of a linear
weight, the argument checks of pointer-only exports; each must give what the first call gives."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import bitnet_go
from bitnet_go import _conv
from bitnet_go._core import lib


def _weight(rng: np.random.Generator, shape: tuple[int, ...]) -> bitnet_go.TernaryTensor:
    return bitnet_go.quantize_conv_weight(rng.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kept_plan_gives_the_fresh_result(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c, o, k = int(rng.integers(1, 9)), int(rng.integers(1, 9)), int(rng.integers(1, 4))
    w = _weight(rng, (o, c, k, k))
    x = rng.standard_normal((2, c, 7, 6)).astype(np.float32)
    for act_bits in (None, 8):
        first = bitnet_go.conv2d_quantized(x, w, stride=2, padding=1, act_bits=act_bits)
        assert w._plans is not None and len(w._plans) >= 1
        again = bitnet_go.conv2d_quantized(x, w, stride=2, padding=1, act_bits=act_bits)
        # a list is not a key: planned afresh, the same numbers
        fresh = bitnet_go.conv2d_quantized(x, w, stride=[2, 2], padding=[1], act_bits=act_bits)
        np.testing.assert_array_equal(first, again)
        np.testing.assert_array_equal(first, fresh)


def test_kept_plan_does_not_let_bools_through() -> None:
    """Each bad call differs from a kept key only by a bool where an int was: it must reach the checks."""
    rng = np.random.default_rng(3)
    w = _weight(rng, (2, 3, 3, 3))
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    bitnet_go.conv2d_quantized(x, w)  # plans the defaults: stride 1, dilation 1, groups 1 (True == 1)
    bitnet_go.conv2d_quantized(x, w, dilation=(1, 1))
    bitnet_go.conv2d_quantized(x, w, act_bits=8)
    assert len(w._plans) == 3
    for kwargs in ({"stride": True}, {"dilation": (True, 1)}, {"groups": True}, {"groups": np.bool_(True)}):
        with pytest.raises(TypeError):
            bitnet_go.conv2d_quantized(x, w, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="act_bits must be None"):
        bitnet_go.conv2d_quantized(x, w, act_bits=True)  # type: ignore[arg-type]


def test_plans_kept_per_weight_are_bounded() -> None:
    rng = np.random.default_rng(4)
    w = _weight(rng, (2, 1, 1, 1))
    x = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    for p in range(_conv.MAX_PLANS + 10):
        out = bitnet_go.conv2d_quantized(x, w, padding=p)
        assert out.shape == (1, 2, 3 + 2 * p, 3 + 2 * p)
    assert len(w._plans) == _conv.MAX_PLANS


def test_linear_weight_view_is_made_once() -> None:
    rng = np.random.default_rng(5)
    w = bitnet_go.quantize_i2s(rng.standard_normal((6, 128)).astype(np.float32))
    v = w._as_1x1()
    assert v is w._as_1x1() and v.packed is w.packed and v.scales is w.scales and v.shape == (6, 128, 1, 1)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    want = x @ w.dequantize().T
    for _ in range(2):
        np.testing.assert_allclose(bitnet_go.linear_quantized(x, w), want, rtol=1e-5, atol=1e-4)


def test_pointer_only_exports_skip_argument_types() -> None:
    assert lib.function("bng_conv2d").argtypes is None  # descriptors and params by reference only
    assert lib.function("bng_set_num_threads").argtypes == [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64]
    # errors still come back whole through the untyped call
    w = _weight(np.random.default_rng(6), (2, 3, 1, 1))
    with pytest.raises(ValueError, match="channels"):
        bitnet_go.conv2d_quantized(np.ones((1, 4, 2, 2), np.float32), w)


def test_functional_linear_output_keeps_its_descriptor() -> None:
    import bitnet_go.functional as F
    from bitnet_go._core import ops

    rng = np.random.default_rng(7)
    x = bitnet_go.quantize(rng.standard_normal((3, 40)).astype(np.float32), "uint8", scale=0.02, zero_point=128)
    w = bitnet_go.quantize(rng.standard_normal((5, 40)).astype(np.float32), "int8", scale=0.02, zero_point=0)
    first = F.linear(x, w, scale=0.5, zero_point=100)
    again = F.linear(x, w, scale=0.5, zero_point=100)  # the weight's column sums' descriptor kept: same codes
    np.testing.assert_array_equal(first.int_repr(), again.int_repr())
    d = first._desc
    assert d is not None  # the descriptor the op wrote through, handed on
    fresh = ops.grouped(first.packed, first.qtype, first.shape, first.axis, first.block_size, first.scales,
                        first.zero_points)  # fmt: skip
    fields = ("version", "dtype", "data", "nbytes", "ndim", "axis", "scales", "n_scales", "zero_points")
    assert [getattr(d, f) for f in fields] == [getattr(fresh, f) for f in fields]
    assert list(d.shape[: d.ndim]) == list(fresh.shape[: fresh.ndim]) == [3, 5]
    # the output is a tensor like any other: it feeds the next op
    np.testing.assert_array_equal(F.relu(first).int_repr(), np.maximum(first.int_repr(), 100))


def test_first_call_checks_in_the_old_order() -> None:
    """A bad x is reported before a bad padding (the padding is resolved after x's checks)."""
    w = _weight(np.random.default_rng(8), (2, 1, 3, 3))
    with pytest.raises(ValueError, match="x must have 3"):
        bitnet_go.conv2d_quantized(np.ones(5, np.float32), w, padding="bogus")
    with pytest.raises(ValueError, match="padding must be"):
        bitnet_go.conv2d_quantized(np.ones((1, 4, 4), np.float32), w, padding="bogus")
