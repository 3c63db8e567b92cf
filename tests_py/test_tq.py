"""TQ2_0 / TQ1_0 (llama.cpp's ternary formats): bit for bit against the gguf package's numpy
quantizer, GGUF byte round trips, ``.to()`` among every qtype, and conv2d/linear with TQ weights."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import bitnet_go
from bitnet_go import TernaryTensor

TQ = {"tq2_0": bitnet_go.quantize_tq2_0, "tq1_0": bitnet_go.quantize_tq1_0}
ALL_QTYPES = ("i2_s", "tl1", "tl2", "tq2_0", "tq1_0")

SHAPES = [(256,), (2048,), (1, 256), (1, 1024), (3, 512), (7, 768), (5, 256), (9, 256), (3, 2, 256), (2, 4, 8, 8)]


def _ggml(qtype: str) -> object:
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType.TQ2_0 if qtype == "tq2_0" else GGMLQuantizationType.TQ1_0


def _data(rng: np.random.Generator, shape: tuple[int, ...], kind: str) -> np.ndarray:
    """Seeded data of one kind, block by block where the kind is per block."""
    n = int(np.prod(shape))
    if kind == "normal":
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)
    elif kind == "ties":  # multiples of d/2 and their neighbours: x * (1/d) at or near 0.5
        x = np.empty(n)
        for b in range(n // 256):
            d = 2.0 ** rng.integers(-6, 6) if b % 2 else rng.uniform(0.1, 3)
            blk = d * rng.integers(-2, 3, 256) / 2
            blk[rng.integers(256)] = d
            x[b * 256 : (b + 1) * 256] = blk
        x = x.astype(np.float32)
        nudge = rng.integers(0, 4, n) == 0
        x[nudge] = np.nextafter(x[nudge], np.float32(rng.choice([-np.inf, np.inf])))
    elif kind == "mixed":  # zero blocks, tiny (float16 subnormal and below), near float16's max, float32 subnormal
        x = rng.standard_normal(n)
        for b in range(n // 256):
            s = slice(b * 256, (b + 1) * 256)
            pick = b % 5
            if pick == 0:
                x[s] = 0.0
            elif pick == 1:
                x[s] *= 2.0 ** rng.integers(-40, -14)
            elif pick == 2:
                x[s] = rng.uniform(-65500, 65500, 256)
            elif pick == 3:
                bits = rng.integers(0, 1 << 23, 256, dtype=np.uint32) | (rng.integers(0, 2, 256, dtype=np.uint32) << 31)
                x[s] = bits.view(np.float32)
    else:  # ternary times a scale: what a BitNet checkpoint holds
        x = rng.integers(-1, 2, n) * rng.uniform(0.01, 2)
    return np.asarray(x, np.float32).reshape(shape)


@pytest.mark.needs("gguf")
@pytest.mark.parametrize("qtype", sorted(TQ))
@pytest.mark.parametrize("kind", ["normal", "ties", "mixed", "ternary"])
def test_bit_exact_with_gguf(qtype: str, kind: str) -> None:
    from gguf import quants

    for i, shape in enumerate(SHAPES):
        if shape[-1] % 256:
            continue  # gguf wants the innermost dimension a multiple of 256
        x = _data(np.random.default_rng([i, len(kind), ord(qtype[2])]), shape, kind)
        t = TQ[qtype](x)
        with np.errstate(invalid="ignore", over="ignore"):
            ref = quants.quantize(x, _ggml(qtype))
            deq = quants.dequantize(ref, _ggml(qtype))
        assert t.to_gguf_bytes() == ref.tobytes(), (qtype, kind, shape)
        np.testing.assert_array_equal(t.dequantize(), deq)
        assert t.qtype == qtype and t.block_size == 256 and t.method == "absmax" and t.shape == shape


@pytest.mark.needs("gguf")
@pytest.mark.parametrize("qtype", sorted(TQ))
def test_read_gguf_bytes(qtype: str) -> None:
    from gguf import quants

    rng = np.random.default_rng(7)
    for rows in (1, 2, 5):
        x = rng.standard_normal((rows, 768)).astype(np.float32)
        ref = quants.quantize(x, _ggml(qtype))
        t = TernaryTensor.from_gguf_bytes(ref, x.shape, qtype)
        assert t.to_gguf_bytes() == ref.tobytes()
        np.testing.assert_array_equal(t.dequantize(), quants.dequantize(ref, _ggml(qtype)))
        assert t.method is None and t.block_size == 256


@pytest.mark.needs("gguf")
def test_overflow_without_check_matches_gguf() -> None:
    from gguf import quants

    x = np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)
    x[1, 7] = 1e6
    for qtype, f in TQ.items():
        with pytest.raises(ValueError, match=r"block 1 \(flat indices 256\.\.511\) has max\|x\| = 1e\+06"):
            f(x)
        t = f(x, check_finite=False)
        with np.errstate(over="ignore"):
            assert t.to_gguf_bytes() == quants.quantize(x, _ggml(qtype)).tobytes()
        assert np.isinf(t.scales[1])


@pytest.mark.parametrize("qtype", sorted(TQ))
def test_gguf_round_trip(qtype: str) -> None:
    rng = np.random.default_rng(11)
    for shape in SHAPES:
        t = TQ[qtype](_data(rng, shape, "normal"))
        raw = t.to_gguf_bytes()
        assert len(raw) == t.size // 256 * (66 if qtype == "tq2_0" else 54)
        for data in (raw, bytearray(raw), np.frombuffer(raw, np.uint8)):
            u = TernaryTensor.from_gguf_bytes(data, shape, qtype)
            assert u.packed.tobytes() == t.packed.tobytes() and u.scales.tobytes() == t.scales.tobytes()
        assert pickle.loads(pickle.dumps(t)).to_gguf_bytes() == raw


def test_i2s_gguf_bytes_are_bitnet_cpp_bytes() -> None:
    t = bitnet_go.quantize_i2s(np.random.default_rng(1).standard_normal((4, 100)).astype(np.float32))
    assert t.to_gguf_bytes() == t.to_bitnet_cpp_bytes()
    u = TernaryTensor.from_gguf_bytes(t.to_gguf_bytes(), (4, 100), "i2_s")
    np.testing.assert_array_equal(u.values(), t.values())


def test_gguf_bytes_errors() -> None:
    t = bitnet_go.quantize_tq2_0(np.ones((2, 256), np.float32))
    raw = t.to_gguf_bytes()
    with pytest.raises(ValueError, match=r"data must have 132 bytes for shape \(2, 256\) in tq2_0 .* got 131"):
        TernaryTensor.from_gguf_bytes(raw[:-1], (2, 256), "tq2_0")
    with pytest.raises(ValueError, match=r"data must have 108 bytes"):
        TernaryTensor.from_gguf_bytes(raw, (2, 256), "tq1_0")
    with pytest.raises(ValueError, match=r"shape \(2, 128\) has rows of K = 128"):
        TernaryTensor.from_gguf_bytes(raw, (2, 128), "tq2_0")
    with pytest.raises(ValueError, match="tiled per model"):
        TernaryTensor.from_gguf_bytes(raw, (2, 256), "tl1")
    with pytest.raises(ValueError, match="qtype must be one of"):
        TernaryTensor.from_gguf_bytes(raw, (2, 256), "q4_0")
    with pytest.raises(TypeError, match="qtype must be a str"):
        TernaryTensor.from_gguf_bytes(raw, (2, 256), 35)
    bad = bytearray(raw)
    bad[70] = 0xFF  # block 1: code 3
    with pytest.raises(ValueError, match="invalid TQ2_0 code 3"):
        TernaryTensor.from_gguf_bytes(bytes(bad), (2, 256), "tq2_0")
    raw1 = bytearray(bitnet_go.quantize_tq1_0(np.zeros(256, np.float32)).to_gguf_bytes())
    raw1[5] = 1  # not the base-3 encoding of any codes
    with pytest.raises(ValueError, match="invalid TQ1_0 byte 0x01 at byte 5"):
        TernaryTensor.from_gguf_bytes(bytes(raw1), (256,), "tq1_0")
    for q in ("tl1", "tl2"):
        with pytest.raises(ValueError, match="separate F32 tensor"):
            t.to(q).to_gguf_bytes()


def test_quantize_errors() -> None:
    for qtype, f in TQ.items():
        with pytest.raises(ValueError, match=rf"{qtype} packs blocks of 256 values along rows: shape \(4, 3, 3\)"):
            f(np.ones((4, 3, 3), np.float32))
        with pytest.raises(ValueError, match=r"shape \(300,\) has rows of K = 300"):
            f(np.ones(300, np.float32))
        with pytest.raises(ValueError, match="method='absmax'"):
            f(np.ones(256, np.float32), method="absmean")
        x = np.ones(512, np.float32)
        x[300] = np.nan
        with pytest.raises(ValueError, match="flat index 300"):
            f(x)
        t = f(x, check_finite=False)  # NaN left out of the maximum, quantized to 0
        assert t.values()[300] == 0 and t.scales[1] == 1 and t.values()[299] == 1
        x[300] = -np.inf
        assert f(x, check_finite=False).scales[1] == np.inf
        with pytest.raises(ValueError, match="at least one element"):
            f(np.ones((0, 256), np.float32))


def test_make_checks_tq_fields() -> None:
    t = bitnet_go.quantize_tq2_0(np.ones((1, 256), np.float32))
    with pytest.raises(ValueError, match=r"scales\[0\] = 0.1 is not"):
        TernaryTensor._make("tq2_0", (1, 256), 256, None, np.array(t.packed), np.array([0.1], np.float32))
    with pytest.raises(ValueError, match="has block_size=256"):
        TernaryTensor._make("tq2_0", (1, 256), None, None, np.array(t.packed), np.array(t.scales))
    nan = TernaryTensor._make("tq1_0", (256,), 256, None, np.full(52, 0x79, np.uint8), np.array([np.nan], np.float32))
    assert np.isnan(nan.scales[0])


@pytest.mark.parametrize("src", ALL_QTYPES)
def test_to_among_qtypes(src: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 512)).astype(np.float32)
    t = TQ[src](x) if src in TQ else bitnet_go.quantize_i2s(x).to(src)
    for dst in ALL_QTYPES:
        u = t.to(dst)
        assert u.qtype == dst
        np.testing.assert_array_equal(u.values(), t.values())
        back = u.to(src)
        assert back.packed.tobytes() == t.packed.tobytes()
        if dst in TQ and src not in TQ:  # one scale per 256 values, rounded to float16
            assert u.block_size == 256
            np.testing.assert_array_equal(u.scales, np.repeat(t.scales.astype(np.float16).astype(np.float32), 6))
        else:
            assert u.block_size == t.block_size
            np.testing.assert_array_equal(u.scales, t.scales)
        per = np.repeat(u.scales, u.size if u.block_size is None else u.block_size)[: u.size]
        np.testing.assert_array_equal(u.dequantize().ravel(), u.values().ravel().astype(np.float32) * per)


def test_to_tq_scales() -> None:
    x = np.random.default_rng(8).standard_normal((2, 1024)).astype(np.float32)
    t = bitnet_go.quantize_i2s(x, block_size=512)
    u = t.to("tq2_0")
    np.testing.assert_array_equal(u.scales, np.repeat(t.scales.astype(np.float16).astype(np.float32), 2))
    with pytest.raises(ValueError, match=r"block_size=128 changes scale inside such a block"):
        bitnet_go.quantize_i2s(x, block_size=128).to("tq1_0")
    with pytest.raises(ValueError, match=r"shape \(4, 3\) has rows of K = 3"):
        bitnet_go.quantize_i2s(np.ones((4, 3), np.float32)).to("tq2_0")
    big = bitnet_go.quantize_i2s(np.full(256, 1e5, np.float32))
    with pytest.raises(ValueError, match="past it"):
        big.to("tq2_0")


@pytest.mark.parametrize("qtype", sorted(TQ))
@pytest.mark.parametrize("act_bits", [None, 8])
def test_conv2d_and_linear_with_tq_weights(qtype: str, act_bits: int | None) -> None:
    rng = np.random.default_rng([3, act_bits or 0])
    for o, c, k, groups in ((8, 256, 1, 1), (6, 64, 2, 1), (4, 128, 2, 2), (16, 256, 3, 1)):
        w = TQ[qtype](rng.standard_normal((o, c // groups, k, k)).astype(np.float32))
        ref = w.to("i2_s")  # the same values and scales, block_size 256
        assert ref.block_size == 256
        x = rng.standard_normal((2, c, 5, 5)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        for alg in ("auto", "im2col", "direct") + (("lut",) if act_bits else ()):
            kw = dict(padding=1, groups=groups, act_bits=act_bits, algorithm=alg)
            got = bitnet_go.conv2d_quantized(x, w, b, **kw)
            np.testing.assert_array_equal(got, bitnet_go.conv2d_quantized(x, ref, b, **kw))
        if k == 1 and groups == 1:  # linear: a (out, in) weight
            wl = TQ[qtype](rng.standard_normal((o, c)).astype(np.float32))
            xl = rng.standard_normal((3, c)).astype(np.float32)
            got = bitnet_go.linear_quantized(xl, wl, act_bits=act_bits)
            np.testing.assert_array_equal(got, bitnet_go.linear_quantized(xl, wl.to("i2_s"), act_bits=act_bits))
            want = xl.astype(np.float64) @ wl.dequantize().astype(np.float64).T
            np.testing.assert_allclose(got, want, rtol=0.05 if act_bits else 1e-4, atol=0.5 if act_bits else 1e-3)


@pytest.mark.parametrize("qtype", ["tq2_0", "tq1_0"])
@pytest.mark.parametrize("block_size", [None, 256, 512, 128])
def test_pack_as_repack_is_the_quantizer(qtype: str, block_size: int | None) -> None:
    """The converter's ``pack_as`` to TQ (values repacked, zero blocks' scale 0, where the scales allow) gives
    the bytes of the TQ quantizer on ``t.dequantize()``, on tensors with zero blocks and scales on either side of
    what the repack takes (subnormal, tiny, past float16, negative, NaN: the quantizer's own route)."""
    from bitnet_go.convert._formats import _repacks_to_tq, pack_as

    rng = np.random.default_rng(len(qtype) * 1000 + (block_size or 1))
    odd_scales = np.float32([1e-39, 2.0**-126, 3e-8, 65504, 65519, 7e4, -0.5, np.nan, 1.0])
    repacked = 0
    for trial in range(12):
        rows, k = int(rng.integers(1, 6)), 256 * int(rng.integers(1, 5))
        x = (rng.standard_normal((rows, k)) * 10.0 ** rng.uniform(-4, 4)).astype(np.float32)
        x.reshape(-1, 256)[rng.random(rows * k // 256) < 0.3] = 0  # zero blocks
        t = bitnet_go.quantize_i2s(x, block_size=block_size, method="absmax" if trial % 2 else "absmean")
        if trial >= 6:  # scales the repack may not take
            odd = odd_scales[trial - 6 + rng.integers(3)]
            t = TernaryTensor._make("i2_s", t.shape, t.block_size, t.method, t.packed, np.full_like(t.scales, odd))
        try:
            want = TQ[qtype](t.dequantize())
        except ValueError as e:
            with pytest.raises(ValueError) as got_err:
                pack_as(t, qtype)
            assert str(got_err.value) == str(e)
            continue
        repacked += _repacks_to_tq(t)
        got = pack_as(t, qtype)
        assert got.to_gguf_bytes() == want.to_gguf_bytes(), (trial, _repacks_to_tq(t))
        assert (got.block_size, got.method, got.shape) == (want.block_size, want.method, want.shape)
    assert repacked >= (6 if block_size != 128 else 0)
