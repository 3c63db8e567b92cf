"""bitnet_go.functional (linear, linear_dynamic, matmul, conv2d) against torch's fbgemm engine.

Every case draws fresh seeded random data and compares codes (``int_repr``) bit for bit: with
``torch.ops.quantized`` / ``torch.ao.nn.quantized.functional`` where torch computes the case,
and with a NumPy int64 computation of fbgemm's formula (``_reference``) where torch refuses it
(int8 activations, ternary and int4 weights). Without torch the torch tests skip (conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import bitnet_go
from bitnet_go import functional as F

try:
    import torch
except ImportError:  # the tests marked needs("torch") skip
    torch = None

# torch 2.15 warns that its quantized tensors are deprecated
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.fixture
def fbgemm() -> object:
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = old


def _zp(rng: np.random.Generator, case: int, signed: bool = False) -> int:
    """Zero points 0, 128 and random, in turn (int8: shifted by -128)."""
    z = (0, 128, int(rng.integers(0, 256)))[case % 3]
    return z - 128 if signed else z


def _reference(qa, za, sa, qw, zw, sw, bias, so, zo, signed, relu):  # noqa: ANN001, ANN202 (test helper)
    """fbgemm's linear in NumPy: int64 raw, float32 requantization (per-tensor weights: bias times
    float32(1/(sa*sw)) in float64; per-channel: bias / (sa*sw) in float32)."""
    qa = qa.astype(np.int64)
    qw = qw.astype(np.int64)
    n = qw.shape[0]
    zw = np.broadcast_to(np.asarray(zw, np.int64), (n,))
    raw = (qa - za) @ (qw - zw[:, None]).T
    sw = np.asarray(sw, np.float32)
    atw = np.float32(sa) * sw  # float32 products
    rf = raw.astype(np.int32).astype(np.float32)
    if bias is not None:
        b = np.asarray(bias, np.float32)
        bq = b * np.float32(1.0 / np.float64(atw[0])) if sw.size == 1 else b / atw
        rf = rf + bq.astype(np.float32)
    mult = (atw / np.float32(so)).astype(np.float32)
    v = np.rint((rf * mult).astype(np.float32).astype(np.float64)) + zo
    lo, hi = (-128, 127) if signed else (0, 255)
    if relu:
        lo = max(lo, zo)
    return np.clip(v, lo, hi).astype(np.int8 if signed else np.uint8)


def _tq_act(rng, shape, signed, zp):  # noqa: ANN001, ANN202
    s = float(rng.uniform(0.01, 0.1))
    codes = rng.integers(-128, 128, shape) if signed else rng.integers(0, 256, shape)
    return torch._make_per_tensor_quantized_tensor(
        torch.from_numpy(codes.astype(np.int8 if signed else np.uint8)), s, zp
    )


def _tq_weight(rng, shape, per_channel, case):  # noqa: ANN001, ANN202
    codes = torch.from_numpy(rng.integers(-128, 128, shape).astype(np.int8))
    if per_channel:
        s = torch.from_numpy(rng.uniform(0.001, 0.05, shape[0])).double()
        z = torch.from_numpy(rng.integers(-20, 20, shape[0]) if case % 2 else np.zeros(shape[0], np.int64))
        return torch._make_per_channel_quantized_tensor(codes, s, z, 0)
    return torch._make_per_tensor_quantized_tensor(codes, float(rng.uniform(0.001, 0.05)), 0)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(24))
def test_linear_matches_torch(case: int, fbgemm: object) -> None:
    rng = np.random.default_rng(1000 + case)
    m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 300)), int(rng.integers(1, 70))
    if case % 5 == 0:
        k = 64 * int(rng.integers(1, 4))
    lead = (2, m) if case % 4 == 3 else (m,)
    qx = _tq_act(rng, (*lead, k), False, _zp(rng, case))
    qw = _tq_weight(rng, (n, k), case % 2 == 0, case)
    bias = None if case % 3 == 2 else torch.from_numpy(rng.standard_normal(n).astype(np.float32) * 3)
    so, zo = float(rng.uniform(0.05, 1.0)), int(rng.integers(0, 256))
    relu = case % 6 == 1
    packed = torch.ops.quantized.linear_prepack(qw, bias)
    op = torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear
    want = op(qx, packed, so, zo)
    got = F.linear(qx, qw, None if bias is None else bias.numpy(), scale=so, zero_point=zo, relu=relu)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.quint8
    np.testing.assert_array_equal(got.int_repr().numpy(), want.int_repr().numpy())
    # the same through bitnet_go tensors (numpy in, QuantizedTensor out)
    x_bg = bitnet_go.quantize(qx.dequantize().numpy(), "uint8", scale=qx.q_scale(), zero_point=qx.q_zero_point())
    np.testing.assert_array_equal(x_bg.int_repr(), qx.int_repr().numpy())


@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(24))
def test_conv2d_matches_torch(case: int, fbgemm: object) -> None:
    rng = np.random.default_rng(2000 + case)
    g = int(rng.choice([1, 1, 2, 3]))
    c, o = g * int(rng.integers(1, 6)), g * int(rng.integers(1, 7))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    h, w = int(rng.integers(kh + 2, 12)), int(rng.integers(kw + 2, 12))
    stride = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    padding = (int(rng.integers(0, 2)), int(rng.integers(0, 2)))
    dilation = (int(rng.integers(1, 3)), 1)
    qx = _tq_act(rng, (int(rng.integers(1, 3)), c, h, w), False, _zp(rng, case))
    qw = _tq_weight(rng, (o, c // g, kh, kw), case % 2 == 0, case)
    bias = None if case % 3 == 2 else torch.from_numpy(rng.standard_normal(o).astype(np.float32))
    so, zo = float(rng.uniform(0.05, 1.0)), int(rng.integers(0, 256))
    want = torch.ao.nn.quantized.functional.conv2d(qx, qw, bias, stride, padding, dilation, g, scale=so, zero_point=zo)
    got = F.conv2d(qx, qw, None if bias is None else bias.numpy(), stride=stride, padding=padding, dilation=dilation,
                   groups=g, scale=so, zero_point=zo)  # fmt: skip
    np.testing.assert_array_equal(got.int_repr().numpy(), want.int_repr().numpy())


@pytest.mark.parametrize("case", range(12))
def test_linear_int8_activations_match_reference(case: int) -> None:
    rng = np.random.default_rng(3000 + case)
    m, k, n = int(rng.integers(1, 7)), int(rng.integers(1, 200)), int(rng.integers(1, 40))
    za = _zp(rng, case, signed=True)
    xa = rng.integers(-128, 128, (m, k)).astype(np.int8)
    x = bitnet_go.quantize(((xa.astype(np.float32) - za) * 0.05), "int8", scale=0.05, zero_point=za)
    np.testing.assert_array_equal(x.int_repr(), xa)
    per_ch = case % 2 == 0
    wv = rng.standard_normal((n, k)).astype(np.float32)
    if per_ch:
        w = bitnet_go.quantize(wv, "int8", axis=0, scale=rng.uniform(0.01, 0.05, n).astype(np.float32),
                               zero_point=rng.integers(-10, 10, n).astype(np.int32))  # fmt: skip
    else:
        w = bitnet_go.quantize(wv, "int8", scale=0.02, zero_point=int(rng.integers(-10, 10)))
    bias = None if case % 3 == 2 else rng.standard_normal(n).astype(np.float32)
    so, zo, relu = float(rng.uniform(0.05, 1)), int(rng.integers(-128, 128)), case % 4 == 1
    got = F.linear(x, w, bias, scale=so, zero_point=zo, relu=relu)
    assert got.qtype == "int8"
    want = _reference(xa, za, np.float32(0.05), w.int_repr(), w.zero_points, w.scales, bias, so, zo, True, relu)
    np.testing.assert_array_equal(got.int_repr(), want)


@pytest.mark.parametrize("case", range(10))
def test_linear_ternary_matches_reference(case: int) -> None:
    rng = np.random.default_rng(4000 + case)
    m, k, n = int(rng.integers(1, 6)), 128 * int(rng.integers(1, 3)), int(rng.integers(1, 30))
    signed = case % 2 == 1
    za = _zp(rng, case, signed)
    xa = (rng.integers(-128, 128, (m, k)) if signed else rng.integers(0, 256, (m, k))).astype(
        np.int8 if signed else np.uint8
    )
    x = bitnet_go.quantize(
        (xa.astype(np.float32) - za) * 0.03, "int8" if signed else "uint8", scale=0.03, zero_point=za
    )
    # one scale; one a row; one for the tensor as a block; one per 2 or 3 rows (the last block short)
    block = (None, k, k * n, 2 * k, 3 * k)[case % 5]
    w = bitnet_go.quantize_i2s(rng.standard_normal((n, k)).astype(np.float32), block_size=block)
    so, zo = 0.5, _zp(rng, case + 1, signed)
    bias = rng.standard_normal(n).astype(np.float32)
    s = w.scales[:1] if w.scales.size == 1 else w.scales[np.arange(n) * k // (block or k * n)]
    want = _reference(xa, za, np.float32(0.03), w.values(), 0, s, bias, so, zo, signed, False)
    # TL1 / TL2 copies of the weight go as their kept I2_S conversion: the same codes, every call
    for q in ("i2_s", "tl1", "tl2"):
        wq = w.to(q)
        for _ in range(2):
            got = F.linear(x, wq, bias, scale=so, zero_point=zo)
            np.testing.assert_array_equal(got.int_repr(), want, err_msg=q)


@pytest.mark.parametrize("case", range(6))
def test_linear_int4_groups_match_reference(case: int) -> None:
    rng = np.random.default_rng(5000 + case)
    m, groups, bs, n = (
        int(rng.integers(1, 6)),
        int(rng.integers(1, 4)),
        int(rng.choice([16, 32, 48])),
        int(rng.integers(1, 20)),
    )
    k = groups * bs
    za = _zp(rng, case, signed=True)
    xa = rng.integers(-128, 128, (m, k)).astype(np.int8)
    x = bitnet_go.quantize((xa.astype(np.float32) - za) * 0.05, "int8", scale=0.05, zero_point=za)
    ng = n * groups
    w = bitnet_go.quantize(rng.standard_normal((n, k)).astype(np.float32), "int4", group_size=bs,
                           scale=rng.uniform(0.05, 0.3, ng).astype(np.float32),
                           zero_point=rng.integers(-3, 4, ng).astype(np.int32))  # fmt: skip
    bias = rng.standard_normal(n).astype(np.float32)
    so, zo = 0.7, int(rng.integers(-20, 20))
    got = F.linear(x, w, bias, scale=so, zero_point=zo)
    # reference: int64 per group, float32 sum over groups in order, then bias, / so, lrintf
    qw = w.int_repr().astype(np.int64).reshape(n, groups, bs)
    zw = w.zero_points.reshape(n, groups).astype(np.int64)
    sw = w.scales.reshape(n, groups)
    qa = xa.astype(np.int64).reshape(m, groups, bs) - za
    y = np.zeros((m, n), np.float32)
    for g in range(groups):
        raw = qa[:, g] @ (qw[:, g] - zw[:, g, None]).T
        y = (y + (raw.astype(np.float32) * (np.float32(0.05) * sw[:, g])).astype(np.float32)).astype(np.float32)
    y = (y + bias).astype(np.float32)
    want = np.clip(np.rint((y / np.float32(so)).astype(np.float32).astype(np.float64)) + zo, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got.int_repr(), want)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(10))
def test_matmul(case: int, fbgemm: object) -> None:
    rng = np.random.default_rng(6000 + case)
    signed = case % 2 == 1
    b, m, k, n = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 100)), int(rng.integers(1, 20))
    # batch dimensions: equal, or broadcasting as torch.matmul's (a 1, a missing dimension)
    ba, bb = ((b,), (b,), (b, 1), (3,), (2, 1))[case % 5], ((b,), (1,), (1, 3), (), (2,))[case % 5]
    qa = _tq_act(rng, (*ba, m, k), signed, _zp(rng, case, signed))
    qb = _tq_act(rng, (*bb, k, n), signed, _zp(rng, case + 1, signed))
    so, zo = float(rng.uniform(0.1, 2)), _zp(rng, case + 2, signed)
    got = F.matmul(qa, qb, scale=so, zero_point=zo).int_repr().numpy()
    batch = np.broadcast_shapes(ba, bb)
    a = np.broadcast_to(qa.int_repr().numpy(), (*batch, m, k)).reshape(-1, m, k)
    bm = np.broadcast_to(qb.int_repr().numpy(), (*batch, k, n)).reshape(-1, k, n)
    want = np.stack([_reference(a[i], qa.q_zero_point(), np.float32(qa.q_scale()), bm[i].T, qb.q_zero_point(),
                                np.float32(qb.q_scale()), None, so, zo, signed, False)
                     for i in range(len(a))]).reshape(*batch, m, n)  # fmt: skip
    np.testing.assert_array_equal(got, want)
    # torch dequantizes and multiplies in float32: at most one code apart
    t = torch.ops.quantized.matmul(qa, qb, so, zo).int_repr().numpy().astype(np.int64)
    assert np.abs(t - got.astype(np.int64)).max() <= 1


@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(10))
def test_linear_dynamic_matches_torch(case: int, fbgemm: object) -> None:
    rng = np.random.default_rng(7000 + case)
    m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 300)), int(rng.integers(1, 50))
    x = torch.from_numpy((rng.standard_normal((m, k)) * rng.uniform(0.1, 5)).astype(np.float32))
    qw = _tq_weight(rng, (n, k), case % 2 == 0, 0)
    bias = None if case % 3 == 2 else torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    rr = case % 4 != 3
    want = torch.ops.quantized.linear_dynamic(x, torch.ops.quantized.linear_prepack(qw, bias), rr)
    got = F.linear_dynamic(x, qw, None if bias is None else bias.numpy(), reduce_range=rr)
    # fbgemm quantizes the activations with a fused multiply-add whose tail differs from
    # vector lanes; a code off by one moves an output by about sa*sw*|w|
    tol = float(np.float32(qw.q_per_channel_scales().max() if case % 2 == 0 else qw.q_scale()))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=tol * (x.abs().max().item() / 60 + 1) * 4)


def test_errors() -> None:
    x = bitnet_go.quantize(np.zeros((2, 4), np.float32), "uint8", scale=0.1, zero_point=0)
    w = bitnet_go.quantize(np.zeros((3, 4), np.float32), "int8", scale=0.1, zero_point=0)
    with pytest.raises(TypeError, match="uint8 or int8"):
        F.linear(np.zeros((2, 4), np.float32), w, scale=1.0, zero_point=0)
    with pytest.raises(TypeError, match="weight must be"):
        F.linear(x, np.zeros((3, 4), np.float32), scale=1.0, zero_point=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        F.linear(bitnet_go.quantize(np.zeros((2, 5), np.float32), "uint8", scale=0.1, zero_point=0), w, scale=1.0,
                 zero_point=0)  # fmt: skip
    with pytest.raises(ValueError, match="scale"):
        F.linear(x, w, scale=0.0, zero_point=0)
    with pytest.raises(ValueError, match=r"zero_point must be in uint8.s range \[0, 255\], got 300"):
        F.linear(x, w, scale=1.0, zero_point=300)
    with pytest.raises(ValueError, match="bias"):
        F.linear(x, w, np.zeros(2, np.float32), scale=1.0, zero_point=0)
    w4 = bitnet_go.quantize(np.zeros((3, 4), np.float32), "int4", group_size=2, scale=np.ones(6, np.float32),
                            zero_point=np.zeros(6, np.int32))  # fmt: skip
    with pytest.raises(TypeError, match="weight must be"):
        F.conv2d(bitnet_go.quantize(np.zeros((1, 4, 3, 3), np.float32), "uint8", scale=0.1, zero_point=0), w4,
                 scale=1.0, zero_point=0)  # fmt: skip
    xs = bitnet_go.quantize(np.zeros((2, 4), np.float32), "int8", scale=0.1, zero_point=0)
    with pytest.raises(TypeError, match="one dtype"):
        F.matmul(x, xs, scale=1.0, zero_point=0)


@pytest.mark.parametrize("case", range(6))
def test_linear_i2s_runs_gemv_and_matches_int8_path(case: int) -> None:
    """An I2_S weight with rows of whole 128-value groups goes to Go as its own codes and runs
    linear_gemv; its outputs equal those of the same weight sent as int8 values (the tile/dot
    path), also past 64 rows. Rows of other lengths keep the int8 path."""
    from bitnet_go._core import qops

    rng = np.random.default_rng(6000 + case)
    m = int(rng.choice([1, 3, 8, 65]))
    n, k = int(rng.integers(1, 40)), 128 * int(rng.integers(1, 4))
    if case == 5:
        k = 128 * int(rng.integers(1, 3)) + 64
    signed = case % 2 == 1
    za = _zp(rng, case, signed)
    dt = np.int8 if signed else np.uint8
    xa = (rng.integers(-128, 128, (m, k)) if signed else rng.integers(0, 256, (m, k))).astype(dt)
    x = bitnet_go.quantize((xa.astype(np.float32) - za) * 0.03, dt.__name__, scale=0.03, zero_point=za)
    w = bitnet_go.quantize_i2s(rng.standard_normal((n, k)).astype(np.float32), block_size=(None, k)[case % 2])
    xq, _ = F._act(x, "x")
    so, zo = np.float32([0.4]), np.int32([_zp(rng, case + 1, signed)])
    bias = rng.standard_normal(n).astype(np.float32)
    q8, cs8 = F._ternary(w, 1, True)
    want = np.empty((m, n), dt)
    qops.linear(xq, q8, bias, cs8, qops.Q(want, so, zo), relu=False)
    hit = F._ternary_i2s(w)
    if case == 5:
        assert hit is None
    else:
        assert hit is not None
        got = np.empty((m, n), dt)
        kernel = qops.linear(xq, hit[0], bias, hit[1], qops.Q(got, so, zo), relu=False)
        assert kernel.startswith("linear_gemv/"), kernel
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(F.linear(x, w, bias, scale=float(so[0]), zero_point=int(zo[0])).int_repr(), want)


@pytest.mark.parametrize("case", range(4))
def test_weights_kept_by_id_stay_exact(case: int) -> None:
    """A bitnet_go weight goes to Go with a number of its own (``bng_qops_params.weight_id``), under
    which Go keeps its panels without comparing codes: weights called in turn, and new weights made
    after old ones are freed (their memory reused), each still get their own products, on the
    dot-kernel path (one row), the panel path (300 rows) and conv2d (always panels)."""
    import gc

    from bitnet_go._quantized import PlainTensor
    from bitnet_go.functional import _weight

    rng = np.random.default_rng(7000 + case)
    k, n = int(rng.integers(60, 300)), int(rng.integers(8, 70))
    m = (1, 300)[case % 2]
    x = bitnet_go.quantize(rng.standard_normal((m, k)).astype(np.float32), "uint8", scale=0.05, zero_point=128)
    xa = x.int_repr()
    # the same codes as an image of k channels and m pixels, for a 1x1 conv2d
    xc = bitnet_go.quantize((xa.T.reshape(1, k, 1, m).astype(np.float32) - 128) * 0.05, "uint8", scale=0.05,
                            zero_point=128)  # fmt: skip
    np.testing.assert_array_equal(xc.int_repr().reshape(k, m), xa.T)

    def weight(shape: tuple[int, ...]) -> bitnet_go.QuantizedTensor:
        return bitnet_go.quantize(rng.standard_normal(shape).astype(np.float32), "int8", axis=0,
                                  scale=rng.uniform(0.01, 0.05, n).astype(np.float32),
                                  zero_point=np.zeros(n, np.int32))  # fmt: skip

    def want(w: bitnet_go.QuantizedTensor) -> np.ndarray:
        return _reference(xa, 128, np.float32(0.05), w.int_repr().reshape(n, k), 0, w.scales, None, 0.5, 128, False,
                          False)  # fmt: skip

    def check(w: bitnet_go.QuantizedTensor, wc: bitnet_go.QuantizedTensor) -> None:
        np.testing.assert_array_equal(F.linear(x, w, scale=0.5, zero_point=128).int_repr(), want(w))
        got = F.conv2d(xc, wc, scale=0.5, zero_point=128).int_repr().reshape(n, m)
        np.testing.assert_array_equal(got, want(wc).T)

    ws = [weight((n, k)), weight((n, k)), weight((n, k, 1, 1)), weight((n, k, 1, 1))]
    ids = {_weight(w, 1, True)[0].weight_id for w in ws}
    assert len(ids) == 4 and 0 not in ids
    for i in (0, 1, 0, 1):
        check(ws[i], ws[2 + i])
    for _ in range(3):  # freed, their memory likely reused by the next ones
        del ws
        gc.collect()
        ws = [weight((n, k)), weight((n, k)), weight((n, k, 1, 1)), weight((n, k, 1, 1))]
        new = {_weight(w, 1, True)[0].weight_id for w in ws}
        assert len(new) == 4 and not ids & new
        ids |= new
        check(ws[0], ws[2])
        check(ws[1], ws[3])
    # a weight that views a writable array may change in place: no number, its codes compared
    codes = ws[0].int_repr().copy()
    view = PlainTensor._make("int8", (n, k), 0, None, codes.reshape(-1).view(np.uint8), ws[0].scales.copy(),
                             np.zeros(n, np.int32))  # fmt: skip
    assert _weight(view, 1, True)[0].weight_id == 0
    check(view, ws[2])
    codes[0, :] ^= 0x55
    check(view, ws[2])


def _conv_reference(xq, za, sa, wq, zw, sw, bias, so, zo, pad, groups):  # noqa: ANN001, ANN202 (test helper)
    """conv2d (stride 1, no dilation) as one :func:`_reference` linear per group over NumPy im2col
    columns, padded positions holding the input zero point."""
    n, c, h, w_ = xq.shape
    o, cg, kh, kw = wq.shape
    xp = np.full((n, c, h + 2 * pad, w_ + 2 * pad), za, np.int64)
    xp[:, :, pad : pad + h, pad : pad + w_] = xq
    ho, wo = h + 2 * pad - kh + 1, w_ + 2 * pad - kw + 1
    og = o // groups
    out = np.empty((n, o, ho, wo), xq.dtype)
    sw, zw = np.broadcast_to(sw, (o,)), np.broadcast_to(zw, (o,))
    for g in range(groups):
        cols = np.stack([xp[:, g * cg : (g + 1) * cg, i : i + ho, j : j + wo] for i in range(kh) for j in range(kw)], 2)
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(n * ho * wo, cg * kh * kw)  # (c, i, j) as the weight's rows
        ws = slice(g * og, (g + 1) * og)
        sws = sw[ws] if np.unique(sw).size > 1 else sw[:1]
        r = _reference(cols, za, sa, wq[ws].reshape(og, -1), zw[ws], sws, None if bias is None else bias[ws], so, zo,
                       xq.dtype == np.int8, False)  # fmt: skip
        out[:, ws] = r.reshape(n, ho, wo, og).transpose(0, 3, 1, 2)
    return out


@pytest.mark.parametrize("case", range(12))
def test_conv2d_depthwise_matches_reference(case: int) -> None:
    """groups = channels (fbgemm's depthwise kernel in torch adds int16 pairs with saturation and can
    differ: the reference is the exact formula), channels a multiple of 8 or not, padding."""
    rng = np.random.default_rng(9000 + case)
    c = (8, 16, 24, 6, 13, 32)[case % 6]
    pad, kk = case % 2, (3, 5, 1)[case % 3]
    h = int(rng.integers(kk, 10))
    za = _zp(rng, case)
    xq = rng.integers(0, 256, (int(rng.integers(1, 3)), c, h, h)).astype(np.uint8)
    x = bitnet_go.quantize((xq.astype(np.float32) - za) * 0.05, "uint8", scale=0.05, zero_point=za)
    wv = rng.standard_normal((c, 1, kk, kk)).astype(np.float32)
    w = bitnet_go.quantize(wv, "int8", axis=0) if case % 2 else bitnet_go.quantize(wv, "int8", scale=0.02, zero_point=0)
    bias = None if case % 4 == 3 else rng.standard_normal(c).astype(np.float32)
    so, zo = float(rng.uniform(0.05, 0.5)), int(rng.integers(0, 256))
    got = F.conv2d(x, w, bias, padding=pad, groups=c, scale=so, zero_point=zo)
    want = _conv_reference(xq, za, np.float32(0.05), w.int_repr(), w.zero_points, w.scales, bias, so, zo, pad, c)
    np.testing.assert_array_equal(got.int_repr(), want)


def _bad(kind: type[Exception], match: str, fn: object) -> None:
    with pytest.raises(kind, match=match):
        fn()  # type: ignore[operator]


def test_arguments_checked_with_clear_errors() -> None:
    x = bitnet_go.quantize(np.ones((2, 4), np.float32), "uint8", scale=0.1, zero_point=0)
    w = bitnet_go.quantize(np.ones((3, 4), np.float32), "int8", scale=0.1, zero_point=0)
    xc = bitnet_go.quantize(np.ones((1, 6, 5, 5), np.float32), "uint8", scale=0.1, zero_point=0)
    wc = bitnet_go.quantize(np.ones((6, 2, 3, 3), np.float32), "int8", scale=0.1, zero_point=0)
    for scale in ([0.1], np.float32([0.1]), "0.1", True):
        _bad(TypeError, "scale must be a number", lambda s=scale: F.linear(x, w, scale=s, zero_point=0))
    for scale in (float("nan"), float("inf"), -1.0):
        _bad(ValueError, "scale must be finite and > 0", lambda s=scale: F.linear(x, w, scale=s, zero_point=0))
    for zp in (1.0, "3", True):
        _bad(TypeError, "zero_point must be an int", lambda z=zp: F.linear(x, w, scale=0.1, zero_point=z))
    _bad(ValueError, "got 1099511627776", lambda: F.linear(x, w, scale=0.1, zero_point=2**40))
    # numpy scalars and 0-d arrays are numbers
    assert F.linear(x, w, scale=np.float32(0.1), zero_point=np.int64(3)).zero_point[0] == 3
    assert F.linear(x, w, scale=np.array(0.1), zero_point=np.array(3)).zero_point[0] == 3
    _bad(TypeError, "relu must be a bool", lambda: F.linear(x, w, scale=0.1, zero_point=0, relu="False"))
    for g in (3.7, "3", None):
        _bad(TypeError, "groups must be an int", lambda g=g: F.conv2d(xc, wc, groups=g, scale=0.1, zero_point=0))
    w0 = bitnet_go.quantize(np.float32(1.0), "int8", scale=0.1, zero_point=0)
    _bad(ValueError, "weight must have 2 dimensions, got a 0-d", lambda: F.linear(x, w0, scale=0.1, zero_point=0))
    t0 = bitnet_go.quantize_i2s(np.float32(1.0))
    _bad(ValueError, "weight must have 4 dimensions, got a 0-d", lambda: F.conv2d(xc, t0, scale=0.1, zero_point=0))
    _bad(ValueError, "got a 0-d array", lambda: F.linear_dynamic(np.float32(1.0), w))
    tb = bitnet_go.quantize_i2s(np.ones((2, 3, 3, 3), np.float32), block_size=9)
    _bad(TypeError, "conv2d takes one scale per tensor or per output channel",
         lambda: F.conv2d(bitnet_go.quantize(np.ones((1, 3, 5, 5), np.float32), "uint8", scale=0.1, zero_point=0), tb,
                          scale=0.1, zero_point=0))  # fmt: skip
    a3 = bitnet_go.quantize(np.ones((2, 3, 5), np.float32), "uint8", scale=0.1, zero_point=0)
    b3 = bitnet_go.quantize(np.ones((3, 5, 4), np.float32), "uint8", scale=0.1, zero_point=0)
    _bad(ValueError, r"qa's batch dimensions \(2,\) and qb's \(3,\) do not broadcast",
         lambda: F.matmul(a3, b3, scale=0.1, zero_point=0))  # fmt: skip
    _bad(TypeError, "scale must be a number", lambda: F.add(x, x, scale=np.float32([0.1, 0.2]), zero_point=0))


@pytest.mark.needs("torch")
def test_empty_and_zero_width_operands_are_refused_clearly(fbgemm: object) -> None:
    """Operands with no input features or channels, and element-wise results with no elements (a
    bitnet_go tensor holds at least one): ValueErrors, never Go's panics. torch batch dimensions of
    0 in linear and conv2d give torch's empty result."""
    q = torch.quantize_per_tensor
    _bad(ValueError, "in_features must be >= 1",
         lambda: F.linear(q(torch.zeros(2, 0), 0.1, 0, torch.quint8), q(torch.zeros(3, 0), 0.1, 0, torch.qint8),
                          scale=0.1, zero_point=5))  # fmt: skip
    _bad(
        ValueError,
        "in_features must be >= 1",
        lambda: F.linear_dynamic(torch.zeros(2, 0), q(torch.zeros(3, 0), 0.1, 0, torch.qint8)),
    )
    for wshape in ((6, 0, 3, 3), (6, 0, 1, 1)):
        _bad(ValueError, "at least one channel",
             lambda s=wshape: F.conv2d(q(torch.zeros(1, 0, 9, 9), 0.1, 0, torch.quint8),
                                       q(torch.zeros(*s), 0.1, 0, torch.qint8), scale=0.1, zero_point=0))  # fmt: skip
    x1, w0 = q(torch.zeros(1, 1, 5, 5), 0.1, 0, torch.quint8), q(torch.zeros(1, 1, 0, 3), 0.1, 0, torch.qint8)
    _bad(ValueError, "kernel of at least 1x1", lambda: F.conv2d(x1, w0, scale=0.1, zero_point=0))
    e = q(torch.zeros(0, 4), 0.1, 3, torch.quint8)
    _bad(ValueError, "qx has no elements", lambda: F.relu(e))
    _bad(ValueError, "has no elements", lambda: F.add(e, e, scale=0.1, zero_point=0))
    _bad(ValueError, "has no elements",
         lambda: F.add(q(torch.zeros(0), 0.1, 3, torch.quint8), q(torch.zeros(1), 0.1, 3, torch.quint8), scale=0.1,
                       zero_point=0))  # fmt: skip
    _bad(ValueError, "q has no elements", lambda: F.requantize(e, 0.2, 0))
    got = F.linear(q(torch.zeros(0, 4), 0.1, 3, torch.quint8), q(torch.ones(2, 4), 0.1, 0, torch.qint8), scale=0.1,
                   zero_point=5)  # fmt: skip
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (0, 2)
    got = F.conv2d(q(torch.zeros(0, 2, 5, 5), 0.1, 0, torch.quint8), q(torch.ones(3, 2, 3, 3), 0.1, 0, torch.qint8),
                   scale=0.1, zero_point=0)  # fmt: skip
    assert isinstance(got, torch.Tensor) and tuple(got.shape) == (0, 3, 3, 3)


@pytest.mark.parametrize("bad_at", [0, 5, 11])
def test_weight_zero_points_outside_int8_are_named(bad_at: int) -> None:
    """Go checks every weight zero point (per channel, per group) and names the first outside int8."""
    from bitnet_go._core import qops

    rng = np.random.default_rng(bad_at)
    x = qops.Q(rng.integers(0, 256, (2, 32)).astype(np.uint8), np.float32([0.1]), np.int32([3]))
    out = qops.Q(np.empty((2, 12), np.uint8), np.float32([0.5]), np.int32([0]))
    codes = rng.integers(-128, 128, (12, 32)).astype(np.int8)
    zp = rng.integers(-128, 128, 12).astype(np.int32)
    zp[bad_at] = 200
    w = qops.Q(codes, np.full(12, 0.02, np.float32), zp, axis=0)
    with pytest.raises(ValueError, match=r"zero point must be in int8's range \[-128, 127\], got 200"):
        qops.linear(x, w, None, None, out, relu=False)
    zg = np.zeros(24, np.int32)  # two groups of 16 per row
    zg[2 * bad_at + 1] = -129
    wg = qops.Q(codes, np.full(24, 0.02, np.float32), zg, block_size=16)
    with pytest.raises(ValueError, match=r"zero point must be in int8's range \[-128, 127\], got -129"):
        qops.linear(x, wg, None, None, out, relu=False)
    zp[bad_at] = 7  # all in range: the call runs
    qops.linear(x, w._replace(zero_points=zp), None, None, out, relu=False)
