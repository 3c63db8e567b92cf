"""transformers-style BitNet checkpoints: packing round trips and layer outputs, with state dicts
built here by a copy of transformers' own pack_weights / BitLinear arithmetic (no download)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import bitnet_go  # noqa: E402
from bitnet_go import nn as bnn  # noqa: E402

VALUES_PER_ITEM = 4


def hf_pack_weights(quantized_weights: torch.Tensor) -> torch.Tensor:
    """transformers.integrations.bitnet.pack_weights, as written there."""
    original_shape = quantized_weights.shape
    row_dim = (original_shape[0] + VALUES_PER_ITEM - 1) // VALUES_PER_ITEM
    packed_tensor_shape = (row_dim,) if len(original_shape) == 1 else (row_dim, *original_shape[1:])
    quantized_weights = quantized_weights + 1
    packed = torch.zeros(packed_tensor_shape, dtype=torch.uint8)
    unpacked = quantized_weights.to(torch.uint8)
    it = min(VALUES_PER_ITEM, (original_shape[0] // row_dim) + 1)
    for i in range(it):
        start = i * row_dim
        end = min(start + row_dim, original_shape[0])
        packed[: (end - start)] |= unpacked[start:end] << 2 * i
    return packed


def hf_unpack_weights(packed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """transformers.integrations.bitnet.unpack_weights."""
    packed_shape = packed.shape
    unpacked = torch.zeros((packed_shape[0] * VALUES_PER_ITEM, *packed_shape[1:]), dtype=torch.uint8)
    for i in range(VALUES_PER_ITEM):
        start = i * packed_shape[0]
        mask = 3 << (2 * i)
        unpacked[start : start + packed_shape[0]] = (packed & mask) >> (2 * i)
    return unpacked.to(dtype) - 1


def hf_bitlinear_forward(
    x: torch.Tensor, packed: torch.Tensor, weight_scale: torch.Tensor, divide: bool
) -> torch.Tensor:
    """transformers' BitLinear (divide) / AutoBitLinear (multiply) forward, float32, no bias."""
    w = hf_unpack_weights(packed, torch.float32)
    a = 127.0 / x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    xq = (x * a).round().clamp(-128, 127)
    y = torch.nn.functional.linear(xq, w[: w.shape[0]])
    return y / (a * weight_scale) if divide else (y / a) * weight_scale


def _ternary(out: int, inp: int, seed: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(-1, 2, size=(out, inp)).astype(np.int8))


@pytest.mark.parametrize(("out", "inp"), [(8, 16), (12, 128), (5, 7), (1, 3), (6, 130), (13, 64)])
def test_pack_matches_transformers_and_round_trips(out: int, inp: int) -> None:
    v = _ternary(out, inp, out * 100 + inp)
    packed = hf_pack_weights(v)
    assert torch.equal(torch.from_numpy(bnn.pack_hf(v.numpy())), packed)
    assert np.array_equal(bnn.unpack_hf(packed, out), v.numpy())
    for mode in ("divide", "multiply"):
        t = bnn.from_hf_packed(packed, torch.tensor([0.25]), out, scale_mode=mode)
        assert t.qtype == "i2_s" and t.shape == (out, inp) and np.array_equal(t.values(), v.numpy())
        p2, s2 = bnn.to_hf_packed(t, scale_mode=mode)
        assert p2.dtype == torch.uint8 and torch.equal(p2, packed)  # bit-exact
        assert s2.dtype == torch.float32 and s2.item() == 0.25
        # I2_S -> transformers -> I2_S: the same I2_S bytes
        t2 = bnn.from_hf_packed(p2, s2, out, scale_mode=mode)
        assert t2.packed.tobytes() == t.packed.tobytes() and t2.scales.tobytes() == t.scales.tobytes()


def test_our_quantized_weight_to_transformers_and_back() -> None:
    w = np.random.default_rng(0).standard_normal((20, 48)).astype(np.float32)
    t = bitnet_go.quantize_i2s(w)
    p, s = bnn.to_hf_packed(t, scale_mode="multiply")
    assert torch.equal(p, hf_pack_weights(torch.from_numpy(t.values())))
    back = bnn.from_hf_packed(p, s, 20, scale_mode="multiply")
    assert back.packed.tobytes() == t.packed.tobytes() and back.scales.tobytes() == t.scales.tobytes()
    pd, sd = bnn.to_hf_packed(t, scale_mode="divide")
    assert torch.equal(pd, p) and sd.item() == pytest.approx(1 / t.scales[0], rel=1e-7)
    back = bnn.from_hf_packed(pd, sd, 20, scale_mode="divide")
    assert back.packed.tobytes() == t.packed.tobytes()
    np.testing.assert_allclose(back.scales, t.scales, rtol=1e-7)


@pytest.mark.parametrize("mode", ["divide", "multiply"])
def test_layer_from_a_transformers_state_dict(mode: str) -> None:
    g = torch.Generator().manual_seed(1)
    out, inp = 32, 64
    v = _ternary(out, inp, 7)
    absmean = torch.tensor([0.0371])
    ws = 1 / absmean if mode == "divide" else absmean
    sd = {"model.layers.0.mlp.up_proj.weight": hf_pack_weights(v), "model.layers.0.mlp.up_proj.weight_scale": ws}
    layer = bnn.bitlinear_from_hf(
        sd["model.layers.0.mlp.up_proj.weight"], sd["model.layers.0.mlp.up_proj.weight_scale"], out, scale_mode=mode
    )
    assert layer.frozen and layer.in_features == inp and layer.out_features == out
    x = torch.randn(3, 4, inp, generator=g)
    want = hf_bitlinear_forward(x, sd["model.layers.0.mlp.up_proj.weight"], ws, mode == "divide")
    torch.testing.assert_close(layer(x), want, rtol=1e-5, atol=1e-6)


def test_bfloat16_scale_and_errors() -> None:
    v = _ternary(8, 16, 3)
    p = hf_pack_weights(v)
    t = bnn.from_hf_packed(p, torch.tensor([2.0], dtype=torch.bfloat16), 8, scale_mode="divide")
    assert t.scales.tolist() == [0.5]
    with pytest.raises(ValueError, match="rows"):
        bnn.from_hf_packed(p, torch.tensor([1.0]), 12)
    with pytest.raises(ValueError, match="scale_mode"):
        bnn.from_hf_packed(p, torch.tensor([1.0]), 8, scale_mode="times")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one value"):
        bnn.from_hf_packed(p, torch.ones(2), 8)
    with pytest.raises(TypeError, match="uint8"):
        bnn.from_hf_packed(p.to(torch.int32), torch.ones(1), 8)
    bad = p.clone()
    bad[0, 0] = 0xFF
    with pytest.raises(ValueError, match="code 3"):
        bnn.from_hf_packed(bad, torch.ones(1), 8)
    with pytest.raises(ValueError, match="one scale"):
        bnn.to_hf_packed(bitnet_go.quantize_i2s(np.ones((4, 8), np.float32), block_size=8))


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (np.array([[5], [0], [0], [0]], np.int8), r"-1, 0 or 1, got 5 at index \(0, 0\)"),
        (np.array([[0, 1], [-2, 0]], np.int64), r"got -2 at index \(1, 0\)"),
        (np.array([[0.6]], np.float32), "integers"),
        (np.array(1, np.int8), "at least 1 dimension"),
    ],
)
def test_pack_refuses_non_ternary_values(values: np.ndarray, match: str) -> None:
    """A value outside -1..1 would spill into its neighbours' bits; floats would be truncated."""
    with pytest.raises(ValueError, match=match):
        bnn.pack_hf(values)
