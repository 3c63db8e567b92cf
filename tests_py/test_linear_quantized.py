"""linear_quantized against torch.nn.functional.linear, and conv2d_quantized's torch output."""

from __future__ import annotations

import re

import numpy as np
import pytest

import bitnet_go

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _weight(out: int, inp: int, seed: int = 0, block_size: int | None = None) -> bitnet_go.TernaryTensor:
    w = np.random.default_rng(seed).standard_normal((out, inp), dtype=np.float32)
    return bitnet_go.quantize_i2s(w, block_size=block_size)


def _int8_reference(x: torch.Tensor, t: bitnet_go.TernaryTensor, bias: torch.Tensor | None) -> torch.Tensor:
    """The documented act_bits=8 arithmetic, in torch: per-row int8, exact integer sums per scale block."""
    xr = x.reshape(-1, x.shape[-1]).float()
    a = 127.0 / xr.abs().amax(dim=1, keepdim=True).clamp_min(1e-5)
    q = torch.clamp(torch.round(xr * a), -128, 127).to(torch.int64)
    v = torch.from_numpy(t.values().astype(np.int64))
    out_f, in_f = t.shape
    bs = in_f if t.block_size is None or t.block_size >= t.size else t.block_size
    nb = in_f // bs
    s = torch.from_numpy(t.scales.copy())
    scales = s.expand(out_f * nb) if s.numel() == 1 else s
    scales = scales.reshape(out_f, nb)
    y = torch.zeros(xr.shape[0], out_f)
    for b in range(nb):
        acc = q[:, b * bs : (b + 1) * bs] @ v[:, b * bs : (b + 1) * bs].T  # exact in int64
        y = y + (acc.float() / a) * scales[:, b]
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], out_f)


@pytest.mark.parametrize("lead", [(), (1,), (3,), (2, 5), (4, 1, 17)])
@pytest.mark.parametrize("block_size", [None, 64, 32])
def test_float_path_matches_f_linear(lead: tuple[int, ...], block_size: int | None) -> None:
    t = _weight(24, 64, block_size=block_size)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*lead, 64, generator=g)
    b = torch.randn(24, generator=g)
    y = bitnet_go.linear_quantized(x, t, b)
    ref = F.linear(x, torch.from_numpy(t.dequantize()), b)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == ref.shape
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lead", [(1,), (7,), (2, 9), (40,)])
@pytest.mark.parametrize("block_size", [None, 128])
def test_int8_path_matches_reference(lead: tuple[int, ...], block_size: int | None) -> None:
    t = _weight(20, 128, seed=2, block_size=block_size)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(*lead, 128, generator=g) * 3
    b = torch.randn(20, generator=g)
    y = bitnet_go.linear_quantized(x, t, b, act_bits=8)
    ref = _int8_reference(x, t, b)
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6)


def test_numpy_in_numpy_out_and_same_as_conv() -> None:
    t = _weight(8, 32, seed=4)
    x = np.random.default_rng(5).standard_normal((6, 32), dtype=np.float32)
    y = bitnet_go.linear_quantized(x, t)
    assert type(y) is np.ndarray and y.shape == (6, 8)
    w4 = bitnet_go.quantize_conv_weight(
        np.random.default_rng(4).standard_normal((8, 32), dtype=np.float32).reshape(8, 32, 1, 1), per_channel=False
    )
    conv = bitnet_go.conv2d_quantized(x.reshape(6, 32, 1, 1), w4)
    assert type(conv) is np.ndarray
    np.testing.assert_array_equal(conv.reshape(6, 8), y)


def test_torch_output_shares_no_memory_and_has_no_grad() -> None:
    t = _weight(8, 32)
    x = torch.randn(3, 32, requires_grad=True)
    y1 = bitnet_go.linear_quantized(x, t)
    y2 = bitnet_go.linear_quantized(x, t)
    assert not y1.requires_grad and y1.data_ptr() != y2.data_ptr() and y1.data_ptr() != x.data_ptr()
    y1.zero_()  # writable, ours alone
    torch.testing.assert_close(bitnet_go.linear_quantized(x, t), y2, rtol=0, atol=0)


def test_conv2d_quantized_torch_in_torch_out() -> None:
    w = bitnet_go.quantize_conv_weight(np.random.default_rng(0).standard_normal((4, 3, 3, 3), dtype=np.float32))
    x = torch.randn(2, 3, 8, 8)
    y = bitnet_go.conv2d_quantized(x, w, padding=1)
    assert isinstance(y, torch.Tensor) and y.shape == (2, 4, 8, 8)
    y3 = bitnet_go.conv2d_quantized(x=x[0], weight=w, act_bits=8)
    assert isinstance(y3, torch.Tensor) and y3.shape == (4, 6, 6)
    np.testing.assert_array_equal(y.numpy(), bitnet_go.conv2d_quantized(x.numpy(), w, padding=1))


def test_other_dtypes_and_empty_rows() -> None:
    t = _weight(8, 32)
    x = torch.randn(2, 32, dtype=torch.float64)
    assert bitnet_go.linear_quantized(x, t).dtype == torch.float32
    y = bitnet_go.linear_quantized(np.zeros((0, 3, 32), np.float32), t)
    assert y.shape == (0, 3, 8)


def test_errors() -> None:
    t = _weight(8, 32)
    with pytest.raises(ValueError, match="in_features"):
        bitnet_go.linear_quantized(np.zeros((2, 31), np.float32), t)
    with pytest.raises(ValueError, match="in_features"):
        bitnet_go.linear_quantized(np.float32(1.0), t)
    with pytest.raises(TypeError, match="quantize_i2s"):
        bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), np.zeros((8, 32), np.float32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 dimensions"):
        bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), bitnet_go.quantize_i2s(np.ones(32)))
    with pytest.raises(ValueError, match="bias"):
        bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), t, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="act_bits"):
        bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), t, act_bits=4)
    with pytest.raises(ValueError, match="NaN|Inf|finite"):
        bitnet_go.linear_quantized(np.full((2, 32), np.nan, np.float32), t)


@pytest.mark.parametrize("case", range(4))
def test_int8_gemv_checks_codes_once_per_weight(case: int) -> None:
    """A weight made by quantize_i2s owns read-only codes, so it goes to Go with a number of its
    own: its first int8 GEMV checks the codes, later ones skip the check; every call gives the
    reference's result. A weight whose codes hold a code 3 (from immutable bytes, so numbered
    too) raises on every call, as one viewing a writable array does."""
    from bitnet_go._core.arrays import weight_id

    rng = np.random.default_rng(900 + case)
    out_f, in_f = int(rng.integers(3, 70)), 128 * int(rng.integers(1, 5))
    t = _weight(out_f, in_f, seed=900 + case, block_size=(None, in_f)[case % 2])
    assert weight_id(t.packed) > 0
    x = torch.from_numpy(rng.standard_normal((int(rng.integers(1, 5)), in_f)).astype(np.float32))
    ref = _int8_reference(x, t, None)
    for _ in range(3):
        torch.testing.assert_close(bitnet_go.linear_quantized(x, t, act_bits=8), ref, rtol=1e-6, atol=1e-6)
    bad = np.array(t.packed)
    bad[int(rng.integers(0, in_f // 4))] |= 0xC0  # a code 3 in row 0
    for packed, numbered in ((np.frombuffer(bad.tobytes(), np.uint8), True), (bad.view(), False)):
        b = bitnet_go.TernaryTensor._make("i2_s", t.shape, t.block_size, t.method, packed, np.array(t.scales))
        assert (weight_id(b.packed) > 0) == numbered
        for _ in range(2):
            with pytest.raises(ValueError, match="code 3"):
                bitnet_go.linear_quantized(x, b, act_bits=8)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("act_bits", [8, None])
def test_errors_in_linear_terms(seed: int, act_bits: int | None) -> None:
    """Messages name x's own index, out_features and in_features, not the 1x1 convolution's."""
    rng = np.random.default_rng(seed)
    lead = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
    t = _weight(8, 32, seed)
    x = rng.standard_normal((*lead, 32)).astype(np.float32)
    where = tuple(int(rng.integers(0, d)) for d in x.shape)
    x[where] = [np.nan, np.inf, -np.inf][seed % 3]
    with pytest.raises(ValueError, match=rf"^x contains NaN or Inf \(first at index {re.escape(str(where))}, "):
        bitnet_go.linear_quantized(x, t, act_bits=act_bits)
    for bias in (np.zeros(7, np.float32), torch.zeros(1), [[0.0] * 8]):
        with pytest.raises(ValueError, match=r"^bias must have shape \(out_features,\) = \(8,\), got "):
            bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), t, bias, act_bits=act_bits)
    with pytest.raises(ValueError, match=r"^bias must have shape \(out_features,\)"):  # checked with no rows too
        bitnet_go.linear_quantized(np.zeros((0, 32), np.float32), t, np.zeros(7, np.float32), act_bits=act_bits)
    wide = bitnet_go.quantize_i2s(np.ones((8, 32), np.float32), block_size=64)  # valid for the tensor, not per row
    with pytest.raises(ValueError, match="^weight's block_size=64 must divide in_features=32"):
        bitnet_go.linear_quantized(np.zeros((2, 32), np.float32), wide, act_bits=act_bits)
