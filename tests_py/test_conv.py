"""conv2d_quantized against torch.nn.functional.conv2d, bad input, and the bench suite.

Configurations are drawn from a fixed seed (the case number is in the test id),
over the ranges of the issue: N 1-4 (and unbatched), C and O 1-64, H and W 1-40,
kernels 1x1 to 7x7 (non-square too), stride 1-3, padding 0-3 and "same",
dilation 1-3, groups 1/2/4/depthwise, bias or not, per-tensor, per-channel and
sub-channel weight scales, both act_bits, every algorithm, numpy and torch input.

Without torch the tests marked ``needs("torch")`` skip (conftest.py) and the rest runs.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

import bitnet_go
from bitnet_go import _conv, diagnostics
from bitnet_go._core import ops

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the tests marked needs("torch") skip
    torch = None


def _conv2d(*args, **kwargs):
    """conv2d_quantized's result and the algorithm that ran."""
    out, info = diagnostics.conv2d_with_info(*args, **kwargs)
    return out, info.algorithm


N_CASES = 240
MAX_MACS = 6_000_000  # per call, to keep the file fast on a shared 2-core machine
NAIVE_MACS = 1_500_000
ALGORITHMS = ["auto", "im2col", "direct", "naive"]


pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel:UserWarning")


@pytest.fixture(autouse=True)
def _threads():
    old = bitnet_go.get_num_threads()
    yield
    bitnet_go.set_num_threads(old)


def _out_size(n: int, lo: int, hi: int, k: int, s: int, d: int) -> int:
    return (n + lo + hi - d * (k - 1) - 1) // s + 1


def draw_config(i: int) -> dict:
    """A valid random configuration, drawn from seed i."""
    rng = np.random.default_rng(1000 + i)
    while True:
        gkind = rng.choice(["1", "2", "4", "dw"], p=[0.4, 0.2, 0.2, 0.2])
        kh = int(rng.integers(1, 8))
        kw = kh if rng.random() < 0.6 else int(rng.integers(1, 8))
        stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        if rng.random() < 0.5:
            stride = (stride[0], stride[0])
        dil = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) if rng.random() < 0.4 else (1, 1)
        if rng.random() < 0.15 and stride == (1, 1):
            padding: object = "same"
        elif rng.random() < 0.15:
            padding = "valid"
        elif rng.random() < 0.3:
            padding = (int(rng.integers(0, 4)), int(rng.integers(0, 4)))
        else:
            padding = int(rng.integers(0, 4))
        if gkind == "dw":
            c = int(rng.integers(1, 65))
            groups, o = c, c * int(rng.choice([1, 1, 2]))
            if o > 64:
                o = c
        else:
            groups = int(gkind)
            c = groups * int(rng.integers(1, 64 // groups + 1))
            o = groups * int(rng.integers(1, 64 // groups + 1))
        if rng.random() < 0.12:  # pointwise: the 1x1 GEMM on the input
            kh = kw = 1
            stride, dil, padding = (1, 1), (1, 1), 0
        h = int(rng.choice([int(rng.integers(1, 41)), int(rng.choice([1, 2, 3, 5, 7, 11, 13, 17, 23, 31, 37, 40]))]))
        w = int(rng.choice([h, int(rng.integers(1, 41))]))
        n = int(rng.integers(1, 5))
        if isinstance(padding, str):
            pads = _conv._padding(padding, (kh, kw), stride, dil)
        else:
            ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
            pads = (ph, pw, ph, pw)
        ho = _out_size(h, pads[0], pads[2], kh, stride[0], dil[0])
        wo = _out_size(w, pads[1], pads[3], kw, stride[1], dil[1])
        if ho < 1 or wo < 1:
            continue
        macs = n * o * (c // groups) * kh * kw * ho * wo
        while macs > MAX_MACS and n > 1:
            n -= 1
            macs = n * o * (c // groups) * kh * kw * ho * wo
        if macs > MAX_MACS:
            continue
        k = (c // groups) * kh * kw
        scales = str(rng.choice(["tensor", "channel", "sub"]))
        block = None if scales == "tensor" else k
        if scales == "sub":
            divs = [d for d in (2, 3, 4, 9) if k % d == 0]
            block = k // int(rng.choice(divs)) if divs else k
        return dict(
            n=n, c=c, h=h, w=w, o=o, kh=kh, kw=kw, stride=stride, padding=padding, dilation=dil,
            groups=groups, bias=bool(rng.random() < 0.5), block=block, macs=macs,
            unbatched=bool(n == 1 and rng.random() < 0.3), torch_in=bool(rng.random() < 0.25),
            act_bits=[None, 8][i % 2], seed=i,
        )  # fmt: skip


def make_inputs(cfg: dict) -> tuple[np.ndarray, bitnet_go.TernaryTensor, np.ndarray | None]:
    rng = np.random.default_rng(cfg["seed"])
    x = rng.standard_normal((cfg["n"], cfg["c"], cfg["h"], cfg["w"]), dtype=np.float32)
    wshape = (cfg["o"], cfg["c"] // cfg["groups"], cfg["kh"], cfg["kw"])
    # std 1/sqrt(fan_in), the usual initialisation: outputs of order 1, as in a network
    wf = rng.standard_normal(wshape, dtype=np.float32) / np.float32(math.sqrt(math.prod(wshape[1:])))
    if cfg["block"] is None:
        t = bitnet_go.quantize_conv_weight(wf, per_channel=False)
    elif cfg["block"] == wf[0].size:
        t = bitnet_go.quantize_conv_weight(wf)
    else:
        t = bitnet_go.quantize_i2s(wf, block_size=cfg["block"])
    b = rng.standard_normal(cfg["o"]).astype(np.float32) if cfg["bias"] else None
    return x, t, b


def conv_kwargs(cfg: dict) -> dict:
    return dict(stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"], groups=cfg["groups"])


def torch_float_ref(x: np.ndarray, t: bitnet_go.TernaryTensor, b: np.ndarray | None, cfg: dict) -> np.ndarray:
    """F.conv2d(x, t.dequantize(), b) evaluated in float64 (the exact value, rounded once)."""
    bias = None if b is None else torch.from_numpy(b).double()
    wd = torch.from_numpy(t.dequantize()).double()
    return F.conv2d(torch.from_numpy(x).double(), wd, bias, **conv_kwargs(cfg)).numpy()


def torch_int8_ref(x: np.ndarray, t: bitnet_go.TernaryTensor, b: np.ndarray | None, cfg: dict) -> np.ndarray:
    """The W1.58A8 path in PyTorch, with the documented float32 operation order.

    a = 127 / max(max|x_n|, 1e-5) (float32 tensor division), q = clamp(round(x*a)),
    integer conv per weight scale block in float64 (exact), then
    t_b = (acc_b.float32 / a) * s_b, out = ((t_0 + t_1) + ...) + bias.
    """
    xt = torch.from_numpy(x)
    m = xt.abs().amax(dim=(1, 2, 3), keepdim=True).clamp(min=1e-5)
    a = torch.tensor(127.0, dtype=torch.float32) / m  # tensor / tensor: true float32 division
    q = torch.clamp(torch.round(xt * a), -128, 127).double()
    vals = torch.from_numpy(t.values()).double()
    o = vals.shape[0]
    k = vals[0].numel()
    nb = 1 if t.scales.size == 1 else k // t.block_size
    bl = k // nb
    scales = torch.from_numpy(np.array(t.scales))
    flat = vals.reshape(o, k)
    y = None
    for blk in range(nb):
        mask = torch.zeros(k, dtype=torch.float64)
        mask[blk * bl : (blk + 1) * bl] = 1
        wb = (flat * mask).reshape(vals.shape)
        acc = F.conv2d(q, wb, None, **conv_kwargs(cfg))
        s = scales[0] if t.scales.size == 1 else scales.reshape(o, nb)[:, blk].reshape(1, o, 1, 1)
        tb = (acc.to(torch.float32) / a) * s
        y = tb if y is None else y + tb
    assert y is not None
    if b is not None:
        y = y + torch.from_numpy(b).reshape(1, o, 1, 1)
    return y.numpy()


CONFIGS = [draw_config(i) for i in range(N_CASES)]


def test_config_coverage():
    """The drawn configurations span the ranges the issue asks for."""
    cs = CONFIGS
    assert len(cs) >= 200
    assert {c["n"] for c in cs} == {1, 2, 3, 4}
    assert min(c["c"] for c in cs) == 1 and max(c["c"] for c in cs) >= 48
    assert max(c["o"] for c in cs) >= 48 and max(max(c["h"], c["w"]) for c in cs) >= 37
    assert {c["kh"] for c in cs} == set(range(1, 8)) and any(c["kh"] != c["kw"] for c in cs)
    assert {s for c in cs for s in c["stride"]} == {1, 2, 3}
    assert {d for c in cs for d in c["dilation"]} == {1, 2, 3}
    assert any(c["padding"] == "same" for c in cs) and any(c["padding"] == 3 for c in cs)
    assert {c["groups"] for c in cs} >= {1, 2, 4}
    assert any(c["groups"] == c["c"] and c["c"] > 4 for c in cs)
    assert {c["block"] is None for c in cs} == {True, False}
    assert any(c["block"] not in (None, (c["c"] // c["groups"]) * c["kh"] * c["kw"]) for c in cs)
    assert any(c["kh"] == c["kw"] == 1 and c["padding"] == 0 and c["stride"] == (1, 1) for c in cs)
    assert any(c["unbatched"] for c in cs) and any(c["torch_in"] for c in cs)
    assert any(c["bias"] for c in cs) and not all(c["bias"] for c in cs)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"case{c['seed']}" for c in CONFIGS])
def test_parity_with_torch(cfg: dict):
    bitnet_go.set_num_threads(1 + cfg["seed"] % 2)
    x, t, b = make_inputs(cfg)
    if cfg["act_bits"] == 8:
        ref = torch_int8_ref(x, t, b, cfg)
    else:
        ref = torch_float_ref(x, t, b, cfg)
    xin: object = x[0] if cfg["unbatched"] else x
    if cfg["torch_in"]:
        xin = torch.from_numpy(np.asarray(xin))
    algos = [a for a in ALGORITHMS if a != "naive" or cfg["macs"] <= NAIVE_MACS]
    if cfg["act_bits"] == 8:
        algos.append("lut")
    outs = {}
    for alg in algos:
        out, kernel = _conv2d(xin, t, b, act_bits=cfg["act_bits"], algorithm=alg, **conv_kwargs(cfg))
        if cfg["unbatched"]:
            assert out.shape == ref.shape[1:]
            out = out[None]
        assert out.shape == ref.shape and out.dtype == np.float32, (alg, out.shape, ref.shape)
        if cfg["act_bits"] == 8:
            np.testing.assert_allclose(out, ref, rtol=1e-6, atol=0, err_msg=f"{alg} ({kernel})")
        else:
            err = np.linalg.norm(out.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
            assert err <= 1e-5, f"{alg} ({kernel}): relative error {err}"
            np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5, err_msg=f"{alg} ({kernel})")
        outs[alg] = out
    if cfg["act_bits"] == 8:  # every algorithm gives the same bits
        for alg, out in outs.items():
            assert np.array_equal(out, outs["auto"]), alg
        assert np.array_equal(outs["lut"], outs["im2col"])


@pytest.mark.needs("torch")
def test_float_path_matches_torch_float32():
    """Against torch's own float32 F.conv2d as well (not only the float64 value)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 21, 19), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((24, 8, 3, 5), dtype=np.float32) / np.float32(11))
    b = rng.standard_normal(24).astype(np.float32)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(t.dequantize()), torch.from_numpy(b), padding="same", groups=2)
    for alg in ALGORITHMS:
        out = bitnet_go.conv2d_quantized(torch.from_numpy(x), t, b, padding="same", groups=2, algorithm=alg)
        r = ref.numpy()
        assert np.linalg.norm(out - r) / np.linalg.norm(r) <= 1e-5
        np.testing.assert_allclose(out, r, rtol=1e-4, atol=1e-5)


def test_planner_kernels():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 8, 10, 10), dtype=np.float32)
    dw = bitnet_go.quantize_conv_weight(rng.standard_normal((8, 1, 3, 3), dtype=np.float32))
    pw = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 8, 1, 1), dtype=np.float32))
    g3 = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 8, 3, 3), dtype=np.float32))
    assert _conv2d(x, dw, groups=8)[1] == "depthwise"
    assert _conv2d(x, pw)[1] == "gemm1x1"
    assert _conv2d(x, g3)[1] == "im2col"
    assert _conv2d(x, g3, algorithm="direct")[1] == "direct"
    assert _conv2d(x, pw, algorithm="im2col")[1] == "im2col"
    assert _conv2d(x, pw, stride=2)[1] == "im2col"
    assert _conv2d(x, g3, algorithm="naive")[1] == "naive"


@pytest.mark.needs("torch")
def test_inputs_forms():
    """Non-contiguous, float64, integer and torch inputs; lists for bias; empty batch."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 9, 9), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 3, 3, 3), dtype=np.float32))
    ref = bitnet_go.conv2d_quantized(x, t, [1, 2, 3, 4], groups=2)
    xt = np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # same values, not C-contiguous
    assert not xt.flags.c_contiguous
    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(xt, t, np.arange(1, 5), groups=2), ref)
    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x.astype(np.float64), t, [1, 2, 3, 4], groups=2), ref)
    np.testing.assert_array_equal(
        bitnet_go.conv2d_quantized(torch.from_numpy(x).double(), t, torch.arange(1, 5), groups=2), ref
    )
    xi = rng.integers(-3, 4, size=(1, 6, 5, 5))
    np.testing.assert_allclose(
        bitnet_go.conv2d_quantized(xi, t, groups=2),
        F.conv2d(torch.from_numpy(xi).float(), torch.from_numpy(t.dequantize()), groups=2).numpy(),
        rtol=1e-5,
        atol=1e-5,
    )
    empty = bitnet_go.conv2d_quantized(np.zeros((0, 6, 9, 9), np.float32), t, groups=2, act_bits=8)
    assert empty.shape == (0, 4, 7, 7)
    assert bitnet_go.conv2d_quantized(x, t, groups=2, stride=[2], dilation=(1,)).shape == (2, 4, 4, 4)


@pytest.mark.needs("torch")
def test_same_padding_even_kernel_matches_torch():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 8, 9), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((5, 3, 4, 2), dtype=np.float32))
    for dil in (1, 2, (3, 1)):
        out = bitnet_go.conv2d_quantized(x, t, padding="same", dilation=dil)
        ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(t.dequantize()), padding="same", dilation=dil).numpy()
        assert out.shape == ref.shape == (1, 5, 8, 9)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("seed", range(8))
def test_winograd_matches_torch(seed: int) -> None:
    """3x3 stride-1 layers of 32+ channels with act_bits=None run Winograd F(2x2, 3x3) where the
    conv_directf family is SIMD (``implicit_f32_winograd/<family>``), within the float tolerance of
    torch's float64 conv: odd and even planes (tiles cut at the edges), padding 0-2 per side,
    channels past whole 16/32 blocks, every scale mode, bias or not, 1 and 2 threads. The bound is
    the float tests' (1e-5 relative, 1e-5 of the largest output absolute) and an RMS error of 1e-6 of
    the outputs' (about 8 float32 ulps; the direct kernels measure 3-9e-7 on ResNet layers, Winograd
    2-6e-7)."""
    rng = np.random.default_rng(2000 + seed)
    c, o = int(rng.integers(32, 90)), int(rng.integers(32, 90))
    h, w = int(rng.integers(15, 40)), int(rng.integers(15, 40))
    n = int(rng.integers(1, 3))
    pads = [int(v) for v in rng.integers(0, 3, size=2)]
    cfg = dict(stride=1, padding=tuple(pads), dilation=1, groups=1)
    wf = rng.standard_normal((o, c, 3, 3), dtype=np.float32) * 0.1
    mode = seed % 3  # per tensor, per channel, a scale per 3x3 kernel
    t = (
        bitnet_go.quantize_i2s(wf, block_size=9)
        if mode == 2
        else bitnet_go.quantize_conv_weight(wf, per_channel=mode == 1)
    )
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    b = rng.standard_normal(o).astype(np.float32) if seed % 2 else None
    ref = torch_float_ref(x, t, b, cfg)
    simd = bitnet_go.cpu_features()["kernels"]["conv_directf"] != "generic"
    for th in (1, 2):
        bitnet_go.set_num_threads(th)
        out, info = diagnostics.conv2d_with_info(x, t, b, **cfg)
        macs = n * out.shape[2] * out.shape[3] * o * c * 9
        # the planner's rule: 4M direct multiply-adds per thread
        assert info.kernel.startswith("implicit_f32_winograd/") == (simd and macs // th >= 1 << 22), (info, macs)
        what = f"{info.kernel} threads={th}"
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()), err_msg=what)
        assert np.sqrt(np.mean((out - ref) ** 2) / np.mean(ref**2)) < 1e-6, what


def test_threads_give_same_bits():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 32, 30, 30), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((40, 32, 3, 3), dtype=np.float32))
    outs = []
    for th in (1, 2, 3):
        bitnet_go.set_num_threads(th)
        outs.append(bitnet_go.conv2d_quantized(x, t, padding=1, act_bits=8))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.needs("torch")
def test_weights_changed_in_place_are_repacked():
    """Layouts kept between calls (BITNET_GO_WEIGHT_CACHE_MB) never outlive the codes they came from:
    a weight whose packed bytes are overwritten in place gives the new weight's results, on both paths."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 24, 12, 12), dtype=np.float32)
    cfg = dict(stride=1, padding=1, dilation=1, groups=1)
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((20, 24, 3, 3), dtype=np.float32))
    for step in range(3):
        if step:
            other = bitnet_go.quantize_conv_weight(rng.standard_normal((20, 24, 3, 3), dtype=np.float32))
            for a, b in ((t.packed, other.packed), (t.scales, other.scales)):
                a.flags.writeable = True  # read-only by default; a user can still do this
                a[...] = b  # same array, same address, new codes
                a.flags.writeable = False
        for _ in range(2):
            got8 = bitnet_go.conv2d_quantized(x, t, padding=1, act_bits=8)
            np.testing.assert_array_equal(got8, torch_int8_ref(x, t, None, cfg))
            got = bitnet_go.conv2d_quantized(x, t, padding=1)
            want = torch_float_ref(x, t, None, cfg)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def test_check_finite_off_does_not_crash():
    x = np.ones((1, 2, 5, 5), np.float32)
    x[0, 0, 1, 1] = np.nan
    x[0, 1, 2, 2] = np.inf
    t = bitnet_go.quantize_conv_weight(np.ones((2, 2, 3, 3), np.float32))
    for alg in ALGORITHMS:
        for ab in (None, 8):
            out = bitnet_go.conv2d_quantized(x, t, act_bits=ab, algorithm=alg, check_finite=False)
            assert out.shape == (1, 2, 3, 3)


@pytest.mark.needs("torch")
def test_quantize_conv_weight():
    rng = np.random.default_rng(10)
    w = rng.standard_normal((6, 2, 3, 5), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(w)
    assert t.shape == w.shape and t.block_size == 30 and t.scales.shape == (6,)
    ref = bitnet_go.quantize_i2s(w, block_size=30)
    np.testing.assert_array_equal(t.values(), ref.values())
    tt = bitnet_go.quantize_conv_weight(torch.from_numpy(w), per_channel=False, method="absmax")
    assert tt.block_size is None and tt.scales.shape == (1,) and tt.method == "absmax"
    with pytest.raises(ValueError, match="w must have 4 dimensions"):
        bitnet_go.quantize_conv_weight(w[0])
    with pytest.raises(TypeError, match="already a TernaryTensor"):
        bitnet_go.quantize_conv_weight(t)
    with pytest.raises(ValueError, match="method"):
        bitnet_go.quantize_conv_weight(w, method="mean")


def _bad_cases():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 4, 6, 6), dtype=np.float32)
    wf = rng.standard_normal((6, 2, 3, 3), dtype=np.float32)
    t = bitnet_go.quantize_conv_weight(wf)
    odd_blocks = bitnet_go.quantize_i2s(wf, block_size=4)  # 4 does not divide K = 18
    t3 = bitnet_go.quantize_i2s(rng.standard_normal((3, 3), dtype=np.float32))
    xnan = x.copy()
    xnan[0, 1, 2, 3] = np.nan
    ok = dict(x=x, weight=t, groups=2)
    return [
        ("x rank", dict(ok, x=x[0, 0]), ValueError, r"x must have 3 \(C, H, W\) or 4"),
        ("x rank 5", dict(ok, x=x[None]), ValueError, r"x must have 3"),
        ("weight rank", dict(ok, weight=t3), ValueError, r"weight must have 4 dimensions \(O, C/groups, kH, kW\)"),
        ("float weight", dict(ok, weight=wf), TypeError, r"quantize_conv_weight"),
        ("torch weight", dict(ok, weight=None if torch is None else torch.from_numpy(wf)), TypeError,
         r"quantize_conv_weight"),
        ("weight type", dict(ok, weight="w"), TypeError, r"weight must be a TernaryTensor"),
        ("C mismatch", dict(ok, groups=1), ValueError, r"weight has 2 input channels per group, but x has C=4"),
        ("groups C", dict(ok, groups=3), ValueError, r"groups=3 must divide the input channels C=4"),
        ("groups O", dict(ok, x=rng.standard_normal((1, 8, 6, 6)), groups=4), ValueError,
         r"groups=4 must divide the weight's output channels O=6"),
        ("groups 0", dict(ok, groups=0), ValueError, r"groups must be >= 1"),
        ("groups float", dict(ok, groups=2.0), TypeError, r"groups must be an int"),
        ("stride 0", dict(ok, stride=0), ValueError, r"stride must be >= 1"),
        ("stride neg pair", dict(ok, stride=(1, -1)), ValueError, r"stride must be >= 1"),
        ("stride float", dict(ok, stride=1.5), TypeError, r"stride must be an int or a pair"),
        ("stride triple", dict(ok, stride=(1, 1, 1)), TypeError, r"stride must be an int or a pair"),
        ("dilation 0", dict(ok, dilation=0), ValueError, r"dilation must be >= 1"),
        ("padding neg", dict(ok, padding=-1), ValueError, r"padding must be >= 0"),
        ("padding str", dict(ok, padding="full"), ValueError, r"padding must be an int, a pair"),
        ("same strided", dict(ok, padding="same", stride=2), ValueError, r"'same' is not supported for strided"),
        ("output < 1", dict(ok, x=x[:, :, :2, :]), ValueError, r"output size would be 0x4"),
        ("dilated output < 1", dict(ok, dilation=3), ValueError, r"output size would be 0x0"),
        ("bias length", dict(ok, bias=np.zeros(5, np.float32)), ValueError, r"bias must have shape \(O,\) = \(6,\)"),
        ("bias rank", dict(ok, bias=np.zeros((6, 1), np.float32)), ValueError, r"bias must have shape"),
        ("block size", dict(ok, weight=odd_blocks), ValueError, r"block_size=4 must be None .* divide K = .* = 18"),
        ("nan x", dict(ok, x=xnan), ValueError, r"x contains NaN or Inf \(first at index \(0, 1, 2, 3\)"),
        ("nan bias", dict(ok, bias=np.array([0, 1, np.inf, 0, 0, 0], np.float32)), ValueError,
         r"bias contains NaN or Inf \(first at index 2"),
        ("complex x", dict(ok, x=x.astype(np.complex64)), TypeError, r"x must be a real"),
        ("string x", dict(ok, x=np.array([["a"]])), TypeError, r"x must be a real numeric array"),
        ("object bias", dict(ok, bias=np.array([None] * 6)), TypeError, r"bias must be a real numeric array"),
        ("act_bits 4", dict(ok, act_bits=4), ValueError, r"act_bits must be None .* or 8"),
        ("act_bits bool", dict(ok, act_bits=True), ValueError, r"act_bits must be None"),
        ("act_bits float", dict(ok, act_bits=8.0), ValueError, r"act_bits must be None .* got 8.0"),
        ("act_bits complex", dict(ok, act_bits=8 + 0j), ValueError, r"act_bits must be None"),
        ("act_bits array", dict(ok, act_bits=np.array(8)), ValueError, r"act_bits must be None"),
        ("act_bits arrays", dict(ok, act_bits=np.array([8, 8])), ValueError, r"act_bits must be None"),
        ("algorithm", dict(ok, algorithm="winograd"), ValueError, r"algorithm must be one of"),
        ("empty C", dict(ok, x=np.zeros((1, 0, 6, 6), np.float32)), ValueError, r"at least one channel"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "name,kwargs,exc,match",
    [
        pytest.param(*c, id=c[0], marks=[pytest.mark.needs("torch")] if c[0] == "torch weight" else [])
        for c in _bad_cases()
    ],
)
def test_bad_input(name, kwargs, exc, match):
    kw = dict(kwargs)
    x, w = kw.pop("x"), kw.pop("weight")
    with pytest.raises(exc, match=match):
        bitnet_go.conv2d_quantized(x, w, **kw)


def test_abi_revalidates():
    """The C ABI checks its own arguments, whoever calls it: no crash on lies."""
    import ctypes

    from bitnet_go._core import lib as _lib

    x = np.ones((1, 2, 4, 4), np.float32)
    t = bitnet_go.quantize_conv_weight(np.ones((3, 2, 3, 3), np.float32))
    out = np.empty((1, 3, 2, 2), np.float32)

    from bitnet_go._core import descriptor as d

    def call(**over):
        a = dict(x=_lib.ptr(x), n=1, c=2, h=4, w=4, packed=_lib.ptr(t.packed), plen=t.packed.size,
                 scales=_lib.ptr(t.scales), ns=t.scales.size, bs=18, qt=0, o=3, wc=2, kh=3, kw=3,
                 bias=None, nb=0, sh=1, sw=1, pt=0, pl=0, pb=0, pr=0, dh=1, dw=1, g=1,
                 ab=0, alg=0, cf=1, out=_lib.ptr(out), oh=2, ow=2, olen=out.size, info=None)  # fmt: skip
        a.update(over)
        keep = []

        def tensor(data, nbytes, dtype, shape, scales=None, ns=0, bs=0):
            dims = (ctypes.c_int64 * len(shape))(*shape)
            keep.append(dims)
            return d.Tensor(
                version=d.TENSOR_V1,
                dtype=dtype,
                device_type=d.CPU,
                data=data,
                nbytes=nbytes,
                ndim=len(shape),
                axis=-1,
                shape=dims,
                scales=scales,
                n_scales=ns,
                block_size=bs,
            )

        xt = tensor(
            a["x"],
            4 * a["n"] * a["c"] * a["h"] * a["w"] if a["n"] < 1 << 20 else x.nbytes,
            d.DTYPES["float32"],
            (a["n"], a["c"], a["h"], a["w"]),
        )
        wt = tensor(a["packed"], a["plen"], a["qt"], (a["o"], a["wc"], a["kh"], a["kw"]), a["scales"], a["ns"], a["bs"])
        bt = None
        if a["bias"] is not None or a["nb"]:
            bt = ctypes.byref(tensor(a["bias"], 4 * a["nb"], d.DTYPES["float32"], (a["nb"],)))
        ot = tensor(a["out"], 4 * a["olen"], d.DTYPES["float32"], (1, 3, a["oh"], a["ow"]))
        p = d.Conv2dParams(d.CONV2D_V1, a["ab"], a["alg"], a["cf"])
        p.stride[:], p.padding[:] = [a["sh"], a["sw"]], [a["pt"], a["pl"], a["pb"], a["pr"]]
        p.dilation[:], p.groups = [a["dh"], a["dw"]], a["g"]
        info = a["info"]
        _lib.call(
            "bng_conv2d",
            ctypes.byref(xt),
            ctypes.byref(wt),
            bt,
            ctypes.byref(ot),
            ctypes.byref(p),
            None if info is None else ctypes.byref(info),
        )

    call()
    for over, match in [
        (dict(plen=t.packed.size - 1), "packed must have"),
        (dict(ns=5), "scales must have"),
        (dict(bs=5), "block_size=5"),
        (dict(bs=-1), "block_size must be"),
        (dict(qt=1), "tl1"),
        (dict(qt=7), "qtype must be"),
        (dict(oh=3), "does not match"),
        (dict(olen=3), "out: 12 bytes do not hold 12 float32 values"),
        (dict(olen=-1), "must be non-negative"),
        (dict(nb=3), "bias is NULL but its length is 12"),
        (dict(x=None), "x is NULL"),
        (dict(n=1 << 31, h=1 << 31, w=1 << 31), "x: shape"),
        (dict(wc=3), "weight has 3 input channels per group"),
        (dict(sh=0), "stride"),
        (dict(pt=-5), "padding"),
        (dict(ab=3), "act_bits"),
        (dict(alg=9), "algorithm must be"),
        (dict(alg=4), "depthwise"),
    ]:
        with pytest.raises(ValueError, match=match):
            call(**over)
    info = d.OpInfo(d.OP_INFO_V1)
    call(info=info, alg=3)
    assert ops.KERNEL_NAMES[info.algorithm] == "direct" and info.kernel.decode() == "direct/generic"


@pytest.mark.needs("torch", "matplotlib")
def test_bench_suite_quick(tmp_path):
    """The conv bench suite runs end to end (tiny shapes, one repeat), JSON-able rows, plot."""
    from bitnet_go.bench import SUITES
    from bitnet_go.bench import conv as bench_conv

    assert SUITES["conv"] == "bitnet_go.bench.conv"
    p = argparse.ArgumentParser()
    bench_conv.add_arguments(p)
    args = p.parse_args(["--conv-quick"])
    args.threads, args.repeat = "1", 1
    rows = bench_conv.run(args)
    assert rows and all(r["ours_f32_ms"] > 0 and r["ours_i8_ms"] > 0 for r in rows)
    assert any(r.get("naive_ms") for r in rows) and any(r.get("torch_f32_ms") for r in rows)
    assert all(r["mem_extra_mb"] is None or r["mem_extra_mb"] >= 0 for r in rows)
    assert all(math.isfinite(r["ours_f32_gflops"]) for r in rows)
    # fractions of the measured peak where the family has peak loops (none for the generic kernels)
    simd = bitnet_go.cpu_features()["family"] != "generic"
    for r in rows:
        for key in ("f32", "i8"):
            assert (r[f"peak_{key}_gops"] > 0) == simd
            if simd:
                assert r[f"{key}_of_peak"] == pytest.approx(r[f"ours_{key}_gflops"] / r[f"peak_{key}_gops"])
                assert 0 < r[f"{key}_of_peak"] < 1.5  # a kernel cannot beat its own instruction mix
    bench_conv.plot(rows, str(tmp_path / "conv.png"))
    assert (tmp_path / "conv.png").stat().st_size > 0


@pytest.mark.needs("torch")
def test_bench_depthwise_quick():
    """The --conv-depthwise table runs end to end (tiny layers, one repeat): every row timed against
    torch fp32, the depthwise kernel reported."""
    from bitnet_go.bench import conv as bench_conv

    p = argparse.ArgumentParser()
    bench_conv.add_arguments(p)
    args = p.parse_args(["--conv-quick", "--conv-depthwise"])
    args.threads, args.repeat = "1", 1
    rows = bench_conv.run(args)
    assert len(rows) == len(bench_conv.QUICK_DW_LAYERS)
    for r in rows:
        assert r["ours_f32_ms"] > 0 and r["ours_i8_ms"] > 0 and r["torch_f32_ms"] > 0
        assert r["ratio_f32"] == pytest.approx(r["ours_f32_ms"] / r["torch_f32_ms"])
        assert r["kernel_f32"].startswith(("depthwise:depthwise/", "depthwise:depthwise_lanes/"))
        assert r["kernel_i8"].startswith("depthwise:")


@pytest.mark.needs("torch")
@pytest.mark.parametrize("seed", range(6))
def test_depthwise_against_torch(seed: int):
    """Depthwise layers (groups = C; odd sizes, strides 1-3, padding, dilation, multiplier, block
    scales, bias) through the depthwise kernel agree with F.conv2d on the dequantized weight;
    act_bits=8 gives the naive kernel's bits."""
    import torch

    rng = np.random.default_rng(1000 + seed)
    n, c = int(rng.integers(1, 4)), int(rng.integers(1, 40))
    mult, k = int(rng.choice([1, 1, 2])), int(rng.choice([3, 5]))
    h, w = int(rng.integers(k, 40)), int(rng.integers(k, 40))
    stride, pad, dil = int(rng.integers(1, 4)), int(rng.integers(0, k)), int(rng.choice([1, 1, 2]))
    if (h + 2 * pad - dil * (k - 1) - 1) < 0 or (w + 2 * pad - dil * (k - 1) - 1) < 0:
        pad = dil * (k - 1)
    wf = rng.standard_normal((c * mult, 1, k, k), dtype=np.float32)
    scales = seed % 3  # per tensor, per channel, blocks of k values (k scales a channel)
    if scales == 2:
        wt = bitnet_go.quantize_i2s(wf, block_size=k)
    else:
        wt = bitnet_go.quantize_conv_weight(wf, per_channel=scales == 1)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    bias = rng.standard_normal(c * mult, dtype=np.float32) if seed % 2 else None
    kw = dict(stride=stride, padding=pad, dilation=dil, groups=c)
    out, info = diagnostics.conv2d_with_info(x, wt, bias, **kw)
    assert info.algorithm == "depthwise" and info.kernel.startswith(("depthwise/", "depthwise_lanes/"))
    ref = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(wt.dequantize()), None if bias is None else torch.from_numpy(bias), **kw
    ).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    got8 = bitnet_go.conv2d_quantized(x, wt, bias, act_bits=8, **kw)
    want8 = bitnet_go.conv2d_quantized(x, wt, bias, act_bits=8, algorithm="naive", **kw)
    np.testing.assert_array_equal(got8, want8)


@pytest.mark.parametrize("cfg", CONFIGS[::4], ids=[f"case{c['seed']}" for c in CONFIGS[::4]])
def test_qtypes_give_identical_results(cfg: dict):
    """Issue 5: for the same values and scales, I2_S, TL1 and TL2 weights give bit-identical outputs
    (both activation paths, every algorithm the planner picks)."""
    x, t, b = make_inputs(cfg)
    kw = conv_kwargs(cfg)
    for act_bits in (None, 8):
        ref = bitnet_go.conv2d_quantized(x, t, b, act_bits=act_bits, **kw)
        for qtype in ("tl1", "tl2"):
            u = t.to(qtype)
            assert u.qtype == qtype
            out = bitnet_go.conv2d_quantized(x, u, b, act_bits=act_bits, **kw)
            np.testing.assert_array_equal(out, ref, err_msg=f"{qtype} act_bits={act_bits}")
            if act_bits == 8:  # the LUT kernels read TL1 / TL2 rows directly
                out, kernel = _conv2d(x, u, b, act_bits=8, algorithm="lut", **kw)
                assert kernel == "lut"
                np.testing.assert_array_equal(out, ref, err_msg=f"lut {qtype}")


def test_lut_algorithm():
    """algorithm='lut' needs act_bits=8; the planner picks it only for TL weights on linear-layer
    shapes with the generic kernels (with SIMD kernels multiply-add is faster everywhere)."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 8, 10, 10), dtype=np.float32)
    g3 = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 8, 3, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="algorithm='lut' needs act_bits=8"):
        bitnet_go.conv2d_quantized(x, g3, algorithm="lut")
    assert _conv2d(x, g3, act_bits=8, algorithm="lut")[1] == "lut"
    xv = rng.standard_normal((1, 1024, 1, 1), dtype=np.float32)
    wv = bitnet_go.quantize_conv_weight(rng.standard_normal((512, 1024, 1, 1), dtype=np.float32))
    # the rule (gokern/ops/conv2d preferLUT): TL1 / TL2 weights on the GEMV's shapes (1x1, one group,
    # at most 8 positions a sample) with the generic LUT kernels only; never I2_S, never below 16
    # output channels per group, never with the SIMD LUT kernels
    generic = bitnet_go.cpu_features()["kernels"]["conv_lut"] == "generic"
    linear_pick = "lut" if generic else "gemm1x1"
    xb = rng.standard_normal((3, 1024, 2, 2), dtype=np.float32)  # 4 positions a sample
    for q in ("tl1", "tl2"):
        assert _conv2d(xv, wv.to(q), act_bits=8)[1] == linear_pick, q
        assert _conv2d(xb, wv.to(q), act_bits=8)[1] == linear_pick, q
        assert _conv2d(xv, wv.to(q))[1] == "gemm1x1"
    assert _conv2d(xv, wv, act_bits=8)[1] == "gemm1x1"
    assert _conv2d(x, g3.to("tl1"), act_bits=8)[1] == "im2col"  # O = 4
    g32 = bitnet_go.quantize_conv_weight(rng.standard_normal((32, 8, 3, 3), dtype=np.float32))
    assert _conv2d(x[:, :, :7, :7], g32.to("tl2"), act_bits=8)[1] == "im2col"  # 5x5 outputs: not a GEMV
    assert _conv2d(x[:, :, :7, :7], g32, act_bits=8)[1] == "im2col"
    w1 = bitnet_go.quantize_conv_weight(rng.standard_normal((32, 8, 1, 1), dtype=np.float32))
    assert _conv2d(x[:, :, :3, :3], w1.to("tl1"), act_bits=8)[1] == "gemm1x1"  # 9 positions: not a GEMV
    for q in ("i2_s", "tl1", "tl2"):
        np.testing.assert_array_equal(
            _conv2d(xv, wv.to(q), act_bits=8)[0], _conv2d(xv, wv, act_bits=8, algorithm="im2col")[0]
        )
        np.testing.assert_array_equal(
            _conv2d(xb, wv.to(q), act_bits=8)[0], _conv2d(xb, wv, act_bits=8, algorithm="lut")[0]
        )


def test_tl_weights_by_id():
    """TL1 / TL2 / TQ weights (each with a weight_id) keep their conversion to I2_S, and the layouts
    derived from it under the conversion's own number: calls that alternate between
    weights of one shape (same shapes, other values) each give their own weight's result (the naive
    oracle's), on the GEMV and on a 3x3 layer, and one changed in place gives its new result; a
    weight_id of 2^63 or more is refused
    (those numbers are Go's own)."""
    rng = np.random.default_rng(31)
    for shape, xs, kw in (((96, 256, 1, 1), (3, 256, 1, 1), {}), ((24, 16, 3, 3), (2, 16, 9, 9), {"padding": 1})):
        ws = [bitnet_go.quantize_conv_weight(rng.standard_normal(shape, dtype=np.float32)) for _ in range(2)]
        x = rng.standard_normal(xs, dtype=np.float32)
        for q in ("tl1", "tl2", "tq2_0"):
            if q == "tq2_0" and shape[1] * shape[2] * shape[3] % 256:
                continue
            tws = [w.to(q) for w in ws]
            # the oracle on the weight as it is (TL: the I2_S weight's bits; TQ: its own scale blocks)
            refs = [bitnet_go.conv2d_quantized(x, tw, act_bits=8, algorithm="naive", **kw) for tw in tws]
            for _ in range(3):
                for tw, ref in zip(tws, refs):
                    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x, tw, act_bits=8, **kw), ref, err_msg=q)
    # a TL weight changed in place (its read-only arrays made writable, as a user can): the new result
    for q in ("tl1", "tl2"):
        a, b = (bitnet_go.quantize_conv_weight(rng.standard_normal(shape, dtype=np.float32)).to(q) for _ in range(2))
        want = bitnet_go.conv2d_quantized(x, b, act_bits=8, algorithm="naive", **kw)
        bitnet_go.conv2d_quantized(x, a, act_bits=8, **kw)  # a's conversion and layouts kept
        for dst, src in ((a.packed, b.packed), (a.scales, b.scales)):
            dst.flags.writeable = True
            dst[...] = src
            dst.flags.writeable = False
        np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x, a, act_bits=8, **kw), want, err_msg=q)
    w = ws[0].to("tl1")
    out = np.empty((2, 24, 7, 7), np.float32)
    for wid in (1 << 63, (1 << 64) - 1):
        plan = ops.conv2d_plan(w.packed, w.scales, "tl1", w.block_size, w.shape, (1, 1), (0, 0, 0, 0), (1, 1), 1,
                               8, "auto", True, None, wid)  # fmt: skip
        with pytest.raises(ValueError, match="weight_id must be below 2"):
            ops.conv2d_run(plan, x, None, out)


HUGE_RUNNER = """
import pickle, sys
from bitnet_go import diagnostics
cases = pickle.load(open(sys.argv[1], "rb"))
outs = []
for x, t, b, kw in cases:
    res = {}
    for alg in ("auto", "naive", "im2col", "direct", "lut"):
        for ab in (None, 8):
            if alg != "lut" or ab == 8:
                out, info = diagnostics.conv2d_with_info(x, t, b, act_bits=ab, algorithm=alg, **kw)
                res[alg, ab] = out, info.algorithm
    outs.append(res)
pickle.dump(outs, open(sys.argv[2], "wb"))
"""


@pytest.mark.needs("torch")
def test_huge_strides_dilations_paddings(tmp_path):
    """Strides, dilations and paddings up to 2**31 cost time in proportion to the data, not to their
    values (a column stride of 2**31 once ran for minutes), with every algorithm and both paths, and
    match torch. Run in a subprocess with a time limit, so that a hang fails instead of hanging."""
    import os
    import pickle
    import subprocess
    import sys

    rng = np.random.default_rng(12)
    big = 2**31
    cases = []
    for xs, ws, kw in [
        ((1, 4, 16, 2), (4, 4, 1, 1), dict(stride=(1, big))),  # the call
        ((1, 4, 2, 16), (4, 4, 1, 1), dict(stride=(big, 1))),
        ((2, 3, 5, 6), (5, 3, 3, 3), dict(stride=big, padding=1)),
        ((1, 3, 4, 40), (4, 3, 2, 2), dict(stride=(1, 2**20))),
        ((1, 3, 5, 6), (4, 3, 2, 3), dict(stride=big // 2, padding=big // 2, dilation=big // 2)),
        ((1, 3, 5, 6), (4, 3, 2, 3), dict(stride=big, padding=big, dilation=big)),
        ((1, 2, 3, 4), (3, 2, 1, 1), dict(stride=(1, big), padding=(3, big // 2))),
        ((8, 4, 2, 2), (16, 4, 1, 1), dict(stride=big, padding=big - 1)),
    ]:
        x = rng.standard_normal(xs, dtype=np.float32)
        t = bitnet_go.quantize_conv_weight(rng.standard_normal(ws, dtype=np.float32))
        b = rng.standard_normal(ws[0]).astype(np.float32)
        cases.append((x, t, b, kw))
    src, dst = tmp_path / "cases.pkl", tmp_path / "outs.pkl"
    src.write_bytes(pickle.dumps(cases))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", HUGE_RUNNER, str(src), str(dst)], env=env, timeout=60, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = pickle.loads(dst.read_bytes())
    for (x, t, b, kw), res in zip(cases, outs):
        cfg = dict(stride=kw.get("stride", 1), padding=kw.get("padding", 0), dilation=kw.get("dilation", 1), groups=1)
        ref, ref8 = torch_float_ref(x, t, b, cfg), torch_int8_ref(x, t, b, cfg)
        for (alg, ab), (out, kernel) in res.items():
            what = f"{kw} {alg} ({kernel}) act_bits={ab}"
            assert out.shape == ref.shape, what
            if ab == 8:
                np.testing.assert_allclose(out, ref8, rtol=1e-6, atol=0, err_msg=what)
            else:
                np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5, err_msg=what)


def _nonfinite_pattern(out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.isnan(out), np.isposinf(out), np.isneginf(out)


@pytest.mark.needs("torch")
def test_nonfinite_propagate_like_torch():
    """With check_finite=False NaN and +-Inf propagate as in torch through every float-path kernel,
    zero weights included (0*NaN = 0*Inf = NaN): the NaN / +Inf / -Inf pattern of the output is torch's.
    With act_bits=8 every algorithm gives naive's result (NaN activations quantize to 0; an Inf makes
    its sample's outputs NaN)."""
    rng = np.random.default_rng(13)
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    shapes = [  # x shape, weight shape, kwargs, the kernels expected
        ((1, 1, 1, 1), (1, 1, 1, 1), {}, {"depthwise", "im2col", "naive"}),
        ((2, 128, 2, 2), (6, 128, 1, 1), {}, {"gemm1x1", "im2col", "naive"}),  # GEMV (few positions)
        ((1, 12, 6, 7), (9, 12, 1, 1), {}, {"gemm1x1", "im2col", "naive"}),
        ((2, 5, 7, 8), (7, 5, 3, 3), dict(padding=1, stride=(1, 2)), {"im2col", "direct", "naive"}),
        ((1, 8, 9, 9), (8, 4, 3, 2), dict(groups=2, stride=(2, 1), dilation=(1, 2)), {"im2col", "direct", "naive"}),
        ((2, 6, 7, 7), (12, 1, 3, 3), dict(groups=6, padding=1), {"depthwise", "im2col", "naive"}),
    ]
    for xs, ws, kw, kernels in shapes:
        wf = rng.standard_normal(ws, dtype=np.float32) * (rng.random(ws) < 0.5)  # many zero weights
        wf[0] = 0  # and an all-zero output channel
        t = bitnet_go.quantize_conv_weight(wf)
        wd = torch.from_numpy(t.dequantize()).double()
        b = rng.standard_normal(ws[0]).astype(np.float32)
        clean = rng.standard_normal(xs, dtype=np.float32)
        flat = clean.size
        for vals in ([nan], [inf], [-inf], [inf, -inf], [nan, -inf]):
            for at in (0, flat // 2, flat - 1):
                x = clean.copy().reshape(-1)
                for i, v in enumerate(vals):
                    x[min(at + i * xs[3], flat - 1)] = v
                x = x.reshape(xs)
                ref = F.conv2d(torch.from_numpy(x).double(), wd, torch.from_numpy(b).double(), **kw).numpy()
                want = _nonfinite_pattern(ref)
                seen = set()
                naive8 = _conv2d(x, t, b, act_bits=8, algorithm="naive", check_finite=False, **kw)[0]
                for alg in ("auto", "naive", "im2col", "direct", "lut"):
                    for ab in (None, 8):
                        if alg == "lut" and ab is None:
                            continue
                        out, kernel = _conv2d(x, t, b, act_bits=ab, algorithm=alg, check_finite=False, **kw)
                        what = f"{xs} {ws} {kw} values {vals} at {at}: {alg} ({kernel}) act_bits={ab}"
                        if ab == 8:
                            np.testing.assert_array_equal(out, naive8, err_msg=what)
                            continue
                        seen.add(kernel)
                        for name, g, w in zip(("NaN", "+Inf", "-Inf"), _nonfinite_pattern(out), want):
                            assert np.array_equal(g, w), f"{what}: {name} at {np.argwhere(g != w)[:5].tolist()}"
                assert seen == kernels, (xs, ws, seen)
    # the int8 path's documented semantics, on naive itself
    x = rng.standard_normal((2, 3, 5, 5), dtype=np.float32)
    x[0, 1, 2, 2], x[1, 0, 0, 0] = inf, nan
    t = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 3, 3, 3), dtype=np.float32))
    out = bitnet_go.conv2d_quantized(x, t, act_bits=8, algorithm="naive", check_finite=False)
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()
    x1 = x[1:].copy()
    x1[0, 0, 0, 0] = 0
    np.testing.assert_array_equal(out[1:], bitnet_go.conv2d_quantized(x1, t, act_bits=8, algorithm="naive"))


@pytest.mark.needs("torch")
def test_abi_one_block_is_per_tensor():
    """A weight whose single block covers the whole tensor (block_size >= its size, dividing K or not)
    is one scale per tensor, through the C ABI (the Python layer has its own check)."""

    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 3, 7, 6), dtype=np.float32)
    t = bitnet_go.quantize_i2s(rng.standard_normal((4, 3, 3, 3), dtype=np.float32), block_size=1000)
    assert t.scales.size == 1 and t.block_size == 1000
    cfg = dict(stride=1, padding=1, dilation=1, groups=1)
    for bs in (1000, 108, 109):
        for ab, alg in ((0, 0), (0, 1), (0, 2), (0, 3), (8, 0), (8, 1), (8, 2), (8, 3), (8, 6)):
            out = np.full((2, 4, 7, 6), np.nan, np.float32)
            algo = list(ops.ALGORITHM_CODES)[alg]
            plan = ops.conv2d_plan(t.packed, t.scales, "i2_s", bs, (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1,
                                   ab or None, algo, True)  # fmt: skip
            ops.conv2d_run(plan, x, None, out)
            if ab == 8:
                np.testing.assert_allclose(out, torch_int8_ref(x, t, None, cfg), rtol=1e-6, atol=0)
            else:
                np.testing.assert_allclose(out, torch_float_ref(x, t, None, cfg), rtol=1e-5, atol=1e-5)
