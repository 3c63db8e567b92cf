"""TL1 / TL2 packings: same values and scales as I2_S, round trips, and the
documented byte layout decoded independently here."""

from __future__ import annotations

import numpy as np
import pytest

import bitnet_go

SHAPES = [(1,), (5,), (7, 1), (3, 5), (4, 7), (6, 3, 3, 3), (5, 1, 2, 5), (2, 9), (3, 3, 1, 1), (16, 31)]


def decode_tl1_row(row: bytes, k: int) -> list[int]:
    out = []
    for i in range(-(-k // 2)):
        idx = (row[i // 2] >> (4 * (i % 2))) & 15
        out += [idx // 3 - 1, idx % 3 - 1]
    return out[:k]


def decode_tl2_row(row: bytes, k: int) -> list[int]:
    t = k // 3
    mag, sign = row[: -(-t // 2)], row[-(-t // 2) : -(-t // 2) + -(-t // 8)]
    out = []
    for i in range(t):
        v = (mag[i // 2] >> (4 * (i % 2))) & 15
        if (sign[i // 8] >> (i % 8)) & 1:
            v = -v
        digits = []
        for _ in range(3):
            d = ((v % 3) + 3) % 3
            d = -1 if d == 2 else d
            digits.append(d)
            v = (v - d) // 3
        out += digits[::-1]
    if k % 3:
        out += decode_tl1_row(row[-1:], k % 3)
    return out


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block_size", [None, 3, 32])
def test_same_values_and_scales_and_round_trips(shape: tuple[int, ...], block_size: int | None) -> None:
    rng = np.random.default_rng(sum(shape) * 31 + (block_size or 0))
    x = rng.standard_normal(shape, dtype=np.float32)
    t = bitnet_go.quantize_i2s(x, block_size=block_size)
    t1 = bitnet_go.quantize_tl1(x, block_size=block_size)
    t2 = bitnet_go.quantize_tl2(x, block_size=block_size)
    rows = shape[0] if len(shape) >= 2 else 1
    k = x.size // rows
    for u, decode, qtype in ((t1, decode_tl1_row, "tl1"), (t2, decode_tl2_row, "tl2")):
        assert u.qtype == qtype and u.shape == shape and u.block_size == block_size
        np.testing.assert_array_equal(u.scales, t.scales)
        np.testing.assert_array_equal(u.values(), t.values())
        np.testing.assert_array_equal(u.dequantize(), t.dequantize())
        rb = u.packed.size // rows
        by_hand = [v for r in range(rows) for v in decode(u.packed[r * rb : (r + 1) * rb].tobytes(), k)]
        assert by_hand == t.values().reshape(-1).tolist()
        for target in ("i2_s", "tl1", "tl2"):
            w = u.to(target)
            assert w.qtype == target
            np.testing.assert_array_equal(w.values(), t.values())
        np.testing.assert_array_equal(u.to("i2_s").packed, t.packed)
    assert t.to("tl1").packed.tobytes() == t1.packed.tobytes()
    assert t1.to("tl2").packed.tobytes() == t2.packed.tobytes()
    assert t.to("i2_s") is t


def test_bits_per_weight_real_size() -> None:
    w = np.random.default_rng(0).standard_normal((256, 256, 3, 3), dtype=np.float32)
    b = {
        q: f(w, block_size=256 * 9).bits_per_weight
        for q, f in (("i2_s", bitnet_go.quantize_i2s), ("tl1", bitnet_go.quantize_tl1), ("tl2", bitnet_go.quantize_tl2))
    }
    scale_bits = 32 / (256 * 9)
    assert b["i2_s"] == pytest.approx(2.0 + scale_bits)
    assert b["tl1"] == pytest.approx(2.0 + scale_bits)
    assert b["tl2"] == pytest.approx(5 / 3 + scale_bits)


def test_bad_qtype_and_layout_errors() -> None:
    t = bitnet_go.quantize_i2s(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="qtype must be one of"):
        t.to("q4_0")
    with pytest.raises(ValueError, match="per-tensor I2_S"):
        t.to("tl1").to_bitnet_cpp_bytes()
