"""The element-wise quantized ops (bitnet_go._qelem) bit for bit against torch's (FBGEMM engine).

torch's ``qadd`` dequantizes with ``fma(scale, q, scale * -zp)`` in its vectorised loop (64
codes an iteration) and with ``scale * (q - zp)`` on the remaining ``n % 64`` elements of each
thread's range (one thread here, so the last ``n % 64`` of a same-shape add). bitnet_go uses the
vectorised formula everywhere: the tests compare with torch bit for bit outside torch's tail, and
inside it check that torch gives its scalar formula (NumPy) and bitnet_go the vectorised one.
Random data is fresh per case from the seed in the test id.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import bitnet_go
from bitnet_go._qelem import add, add_relu, relu, requantize
from bitnet_go._quantized import PlainTensor

RANGES = {"uint8": (0, 255), "int8": (-128, 127)}
NP = {"uint8": np.uint8, "int8": np.int8}
VEC = 64
"""Codes per iteration of torch's vectorised quantized loop (2 x Vectorized<quint8>: 32 on AVX2)."""


@pytest.fixture
def torch_fbgemm() -> Iterator[object]:
    """torch with the FBGEMM engine on one thread (so its scalar tail is the last n % 64)."""
    torch = pytest.importorskip("torch")
    engine, threads = torch.backends.quantized.engine, torch.get_num_threads()
    torch.backends.quantized.engine = "fbgemm"
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's quantized tensors are deprecated
        yield torch
    torch.backends.quantized.engine = engine
    torch.set_num_threads(threads)


# ---------------------------------------------------------------- references (NumPy)


def deq_vec(q: np.ndarray, s: np.float32, zp: int) -> np.ndarray:
    """torch's vectorised dequantize: fma(s, q, float32(s * -zp)), one rounding (exact in float64)."""
    pre = np.float32(s * np.float32(-zp))
    return (np.float64(s) * q.astype(np.float64) + np.float64(pre)).astype(np.float32)


def deq_scalar(q: np.ndarray, s: np.float32, zp: int) -> np.ndarray:
    """torch's scalar dequantize_val: float32(s) * float32(q - zp)."""
    return (np.float32(s) * (q.astype(np.int32) - zp).astype(np.float32)).astype(np.float32)


def quant(c: np.ndarray, s: np.float32, zp: int, dtype: str) -> np.ndarray:
    """nearbyint(c * float32(1/s)) + zp, clamped (ties to even)."""
    t = (c * (np.float32(1) / np.float32(s))).astype(np.float32)
    lo, hi = RANGES[dtype]
    return np.clip(np.rint(t) + zp, lo, hi).astype(np.int64)


Params = tuple[np.float32, int]


def ref_add(qa: np.ndarray, qb: np.ndarray, pa: Params, pb: Params, po: Params, dtype: str, fused: bool,
            deq: Callable[[np.ndarray, np.float32, int], np.ndarray]) -> np.ndarray:  # fmt: skip
    """torch's qadd with dequantize formula ``deq``, in NumPy."""
    c = (deq(qa, *pa) + deq(qb, *pb)).astype(np.float32)
    if fused:
        c = np.maximum(c, np.float32(0))
    return quant(c, *po, dtype)


# ---------------------------------------------------------------- helpers


def rand_params(rng: np.random.Generator, dtype: str) -> tuple[np.float32, int]:
    """A scale (power of two, random, or small) and a zero point (0, the middle, an end, random)."""
    lo, hi = RANGES[dtype]
    k = rng.integers(4)
    scale = (np.float32(2.0 ** int(rng.integers(-8, 2))) if k == 0 else np.float32(rng.uniform(1e-3, 2)) if k < 3
             else np.float32(rng.uniform(1e-6, 1e-3)))  # fmt: skip
    zp = [0, (lo + hi + 1) // 2, int(rng.choice([lo, hi])), int(rng.integers(lo, hi + 1))][int(rng.integers(4))]
    if dtype == "uint8" and zp == 0 and rng.random() < 0.5:
        zp = 128
    return scale, zp


def codes(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    lo, hi = RANGES[dtype]
    return rng.integers(lo, hi + 1, size=shape).astype(NP[dtype])


def bng(c: np.ndarray, dtype: str, scale: np.float32, zp: int) -> PlainTensor:
    """A bitnet_go tensor holding the codes ``c``."""
    return PlainTensor._make(dtype, c.shape, None, None, np.ascontiguousarray(c).reshape(-1).view(np.uint8),
                             np.float32([scale]), np.int32([zp]))  # fmt: skip


def tq(torch: object, c: np.ndarray, scale: np.float32, zp: int) -> object:
    """A torch quantized tensor holding the codes ``c``."""
    return torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.array(c, order="C")), float(scale), zp)  # type: ignore[attr-defined]


def shape_of_n(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    """``n`` elements in 1 to 3 dimensions (torch coalesces a contiguous tensor into one run)."""
    divs = [d for d in range(1, n + 1) if n % d == 0]
    a = int(rng.choice(divs))
    return (n,) if rng.random() < 0.4 else (a, n // a) if rng.random() < 0.6 else (1, a, n // a)


LENGTHS = [1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 200, 1000, 4097, 70001]


# ---------------------------------------------------------------- parity


@pytest.mark.needs("torch")
@pytest.mark.parametrize("fused", [False, True], ids=["add", "add_relu"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("seed", range(4))
def test_add_matches_torch(torch_fbgemm: object, dtype: str, fused: bool, seed: int) -> None:
    torch = torch_fbgemm
    rng = np.random.default_rng([seed, 17, fused, dtype == "int8"])
    top = torch.ops.quantized.add_relu if fused else torch.ops.quantized.add  # type: ignore[attr-defined]
    ours = add_relu if fused else add
    for n in LENGTHS + [int(rng.integers(1, 3000)) for _ in range(4)]:
        shape = shape_of_n(rng, n)
        (sa, za), (sb, zb), (so, zo) = (rand_params(rng, dtype) for _ in range(3))
        if rng.random() < 0.3:
            so = sa  # sums on exact ties
        qa, qb = codes(rng, shape, dtype), codes(rng, shape, dtype)
        want = top(tq(torch, qa, sa, za), tq(torch, qb, sb, zb), float(so), zo).int_repr().numpy().astype(np.int64)
        a = tq(torch, qa, sa, za) if rng.random() < 0.5 else bng(qa, dtype, sa, za)
        b = tq(torch, qb, sb, zb) if rng.random() < 0.5 else bng(qb, dtype, sb, zb)
        got = ours(a, b, scale=so, zero_point=zo)
        assert got.dtype == dtype and got.shape == shape and got.scale[0] == so and got.zero_point[0] == zo
        g = got.int_repr().astype(np.int64).reshape(-1)
        want = want.reshape(-1)
        body = n - n % VEC
        where = (n, shape, (sa, za), (sb, zb), (so, zo))
        assert np.array_equal(g[:body], want[:body]), where
        args = (qa.reshape(-1)[body:], qb.reshape(-1)[body:], (sa, za), (sb, zb), (so, zo), dtype, fused)
        assert np.array_equal(want[body:], ref_add(*args, deq_scalar)), ("torch's tail", *where)
        assert np.array_equal(g[body:], ref_add(*args, deq_vec)), ("our tail", *where)
        assert np.array_equal(g, ref_add(qa.reshape(-1), qb.reshape(-1), *args[2:], deq_vec)), where


def _tie_case(rng: np.random.Generator, dtype: str) -> tuple:
    """Parameters and one pair of codes on which torch's two dequantize formulas give different codes."""
    lo, hi = RANGES[dtype]
    qa, qb = np.meshgrid(np.arange(lo, hi + 1), np.arange(lo, hi + 1))
    qa, qb = qa.reshape(-1), qb.reshape(-1)
    for _ in range(2000):
        sa, sb = (np.float32(rng.uniform(1e-3, 1)) for _ in range(2))
        so = np.float32(2.0 ** int(rng.integers(-6, 0)))
        za, zb, zo = (int(rng.integers(lo, hi + 1)) for _ in range(3))
        p = ((sa, za), (sb, zb), (so, zo))
        vec, sca = ref_add(qa, qb, *p, dtype, False, deq_vec), ref_add(qa, qb, *p, dtype, False, deq_scalar)
        diff = np.nonzero(vec != sca)[0]
        if diff.size:
            i = int(diff[0])
            return p, int(qa[i]), int(qb[i])
    raise AssertionError("no tie found")  # pragma: no cover


@pytest.mark.needs("torch")
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("seed", range(3))
def test_torch_tail_is_the_last_n_mod_64(torch_fbgemm: object, dtype: str, seed: int) -> None:
    """On a pair where the formulas differ, torch gives the scalar one exactly at the last n % 64
    elements (the model the parity test relies on), bitnet_go the vectorised one everywhere."""
    torch = torch_fbgemm
    rng = np.random.default_rng([seed, 29, dtype == "int8"])
    ((sa, za), (sb, zb), (so, zo)), a, b = _tie_case(rng, dtype)
    vec = ref_add(np.array([a]), np.array([b]), (sa, za), (sb, zb), (so, zo), dtype, False, deq_vec)[0]
    for n in [1, 63, 64, 65, 130, 1000, int(rng.integers(1, 5000))]:
        qa, qb = np.full(n, a, NP[dtype]), np.full(n, b, NP[dtype])
        want = torch.ops.quantized.add(tq(torch, qa, sa, za), tq(torch, qb, sb, zb), float(so), zo)  # type: ignore[attr-defined]
        want = want.int_repr().numpy().astype(np.int64)
        scalar_at = np.nonzero(want != vec)[0]
        assert np.array_equal(scalar_at, np.arange(n - n % VEC, n)), (n, scalar_at)
        got = add(bng(qa, dtype, sa, za), bng(qb, dtype, sb, zb), scale=so, zero_point=zo).int_repr()
        assert np.all(got.astype(np.int64) == vec), n


def rand_broadcast(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    nd = int(rng.integers(1, 5))
    out = [int(rng.integers(1, 6)) if rng.random() < 0.7 else int(rng.integers(30, 150)) for _ in range(nd)]

    def one() -> tuple[int, ...]:
        s = out[int(rng.integers(0, nd + 1)) :]
        return tuple(1 if rng.random() < 0.35 else d for d in s)

    return one(), one()


@pytest.mark.needs("torch")
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("seed", range(4))
def test_add_broadcasts_like_torch(torch_fbgemm: object, dtype: str, seed: int) -> None:
    """Broadcast shapes: bitnet_go is the vectorised formula everywhere; torch is that formula
    wherever both formulas agree, and one of the two where they do not."""
    torch = torch_fbgemm
    rng = np.random.default_rng([seed, 31, dtype == "int8"])
    for _ in range(12):
        sha, shb = rand_broadcast(rng)
        (sa, za), (sb, zb), (so, zo) = (rand_params(rng, dtype) for _ in range(3))
        fused = bool(rng.random() < 0.5)
        qa, qb = codes(rng, sha, dtype), codes(rng, shb, dtype)
        top = torch.ops.quantized.add_relu if fused else torch.ops.quantized.add  # type: ignore[attr-defined]
        want = top(tq(torch, qa, sa, za), tq(torch, qb, sb, zb), float(so), zo).int_repr().numpy().astype(np.int64)
        got = (add_relu if fused else add)(bng(qa, dtype, sa, za), bng(qb, dtype, sb, zb), scale=so, zero_point=zo)
        assert got.shape == want.shape, (sha, shb)
        ba, bb = np.broadcast_arrays(qa, qb)
        args = ((sa, za), (sb, zb), (so, zo), dtype, fused)
        vec, sca = ref_add(ba, bb, *args, deq_vec), ref_add(ba, bb, *args, deq_scalar)
        g = got.int_repr().astype(np.int64)
        assert np.array_equal(g, vec), (sha, shb)
        assert np.array_equal(want[vec == sca], vec[vec == sca]), (sha, shb)
        assert np.all((want == vec) | (want == sca)), (sha, shb)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("seed", range(3))
def test_relu_matches_torch(torch_fbgemm: object, dtype: str, seed: int) -> None:
    torch = torch_fbgemm
    rng = np.random.default_rng([seed, 37, dtype == "int8"])
    for n in LENGTHS + [int(rng.integers(1, 3000))]:
        shape = shape_of_n(rng, n)
        s, z = rand_params(rng, dtype)
        q = codes(rng, shape, dtype)
        want = torch.relu(tq(torch, q, s, z))  # type: ignore[attr-defined]
        got = relu(tq(torch, q, s, z) if rng.random() < 0.5 else bng(q, dtype, s, z))
        assert np.array_equal(got.int_repr(), want.int_repr().numpy()), (n, s, z)
        assert got.shape == shape and got.scale[0] == np.float32(want.q_scale()) and got.zero_point[0] == z


@pytest.mark.needs("torch")
@pytest.mark.parametrize("seed", range(4))
def test_requantize_matches_torch_quantize_of_dequantize(torch_fbgemm: object, seed: int) -> None:
    torch = torch_fbgemm
    rng = np.random.default_rng([seed, 41])
    tdt = {"uint8": torch.quint8, "int8": torch.qint8}  # type: ignore[attr-defined]
    for n in LENGTHS:
        src, dst = (str(rng.choice(["uint8", "int8"])) for _ in range(2))
        shape = shape_of_n(rng, n)
        (s, z), (so, zo) = rand_params(rng, src), rand_params(rng, dst)
        if rng.random() < 0.3:
            so = np.float32(s * 2)  # ties
        q = codes(rng, shape, src)
        t = tq(torch, q, s, z)
        want = torch.quantize_per_tensor(t.dequantize(), float(so), zo, tdt[dst])  # type: ignore[attr-defined]
        got = requantize(t if rng.random() < 0.5 else bng(q, src, s, z), so, zo, dst)
        assert got.dtype == dst and got.shape == shape
        assert np.array_equal(got.int_repr(), want.int_repr().numpy()), (n, src, dst, s, z, so, zo)
    q = bitnet_go.quantize([0.5, -1.0], "int8", scale=0.25, zero_point=3)
    assert requantize(q, 0.5, 1).dtype == "int8"  # dtype None: q's


# ---------------------------------------------------------------- errors


def test_errors() -> None:
    u8 = bitnet_go.quantize(np.ones((2, 3), np.float32), "uint8", scale=0.5, zero_point=3)
    i8 = bitnet_go.quantize(np.ones((2, 3), np.float32), "int8", scale=0.5, zero_point=3)
    with pytest.raises(TypeError, match="int8 or uint8 quantized tensor, got dtype 'int4'"):
        add(bitnet_go.quantize([1.0], "int4", scale=1.0), u8, scale=1.0, zero_point=0)
    with pytest.raises(TypeError, match="dtype 'ternary'"):
        relu(bitnet_go.quantize_i2s(np.ones(8, np.float32)))
    with pytest.raises(TypeError, match="dtype 'binary'"):
        relu(bitnet_go.quantize([1.0, -1.0], "binary"))
    with pytest.raises(TypeError, match="must be a quantized tensor"):
        add(np.ones((2, 3), np.float32), u8, scale=1.0, zero_point=0)
    with pytest.raises(TypeError, match="one dtype"):
        add(u8, i8, scale=1.0, zero_point=0)
    with pytest.raises(ValueError, match="per tensor"):
        relu(bitnet_go.quantize(np.ones((2, 3), np.float32), "uint8", axis=0))
    with pytest.raises(ValueError, match="do not broadcast"):
        other = bitnet_go.quantize(np.ones((2, 4), np.float32), "uint8", scale=0.5, zero_point=3)
        add(u8, other, scale=1.0, zero_point=0)
    for scale in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="scale must be finite and > 0"):
            add(u8, u8, scale=scale, zero_point=0)
    with pytest.raises(ValueError, match=r"^zero_point must be in uint8's range \[0, 255\], got 300$"):
        add(u8, u8, scale=1.0, zero_point=300)
    with pytest.raises(ValueError, match=r"^zero_point must be in int8's range \[-128, 127\], got 128$"):
        requantize(u8, 1.0, 128, "int8")
    # scale and zero_point are one number each, as in bitnet_go.functional's other ops (torch's
    # float scale and int zero point): a one-element list or array is refused as linear refuses it
    for scale in ([1.0], np.float32([1.0])):
        with pytest.raises(TypeError, match="^scale must be a number"):
            add(u8, u8, scale=scale, zero_point=0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="^scale must be a number"):
            requantize(u8, scale, 0)  # type: ignore[arg-type]
    for zp in (3.0, [3], True):
        with pytest.raises(TypeError, match="^zero_point must be an int"):
            add_relu(u8, u8, scale=1.0, zero_point=zp)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dtype"):
        requantize(u8, 1.0, 0, "int4")
    with pytest.raises(TypeError, match="scale must be a number"):
        add(u8, u8, scale="1", zero_point=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="zero_point must be an int, got float 1.5"):
        add(u8, u8, scale=1.0, zero_point=1.5)  # type: ignore[arg-type]


@pytest.mark.needs("torch")
def test_torch_errors(torch_fbgemm: object) -> None:
    torch = torch_fbgemm
    x = torch.randn(2, 3)  # type: ignore[attr-defined]
    pc = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2]), torch.tensor([1, 2]), 0, torch.quint8)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="per tensor"):
        add(pc, pc, scale=0.1, zero_point=0)
    q32 = torch.quantize_per_tensor(x, 0.1, 0, torch.qint32)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="torch.quint8 or torch.qint8"):
        relu(q32)
    with pytest.raises(TypeError, match="must be a quantized tensor"):
        relu(x)


# ---------------------------------------------------------------- the bench rows (bench/qops_elem.py)


def test_bench_rows(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from bitnet_go.bench import qops_elem

    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeat", type=int, default=1)
    qops_elem.add_arguments(p)
    rows = qops_elem.run_elementwise(p.parse_args(["--qelem-sizes", "4K,1000"]))
    assert "ours ms" in capsys.readouterr().out
    assert [(r["op"], r["n"], r["threads"]) for r in rows] == [
        (op, n, th) for n in (4096, 1000) for th in (1, 2) for op in qops_elem.OPS
    ]
    for r in rows:
        assert r["ours_min_ms"] <= r["ours_ms"] <= r["ours_max_ms"] and r["ours_gbs"] > 0
        assert r["kernel"] == bitnet_go.cpu_features()["kernels"]["qelem"]
        if "torch_ms" in r:  # torch installed
            assert r["x_torch"] == pytest.approx(r["torch_ms"] / r["ours_ms"])
            assert r["of_f32_add"] == pytest.approx(r["ours_gbs"] / r["f32_add_gbs"])
            # relu and requantize are torch's bit for bit; add only differs in torch's tail at ties
            assert r["diff"] == 0 if r["op"] in ("relu", "requantize") else r["diff"] <= r["n"] % 64
            assert (r["op"] == "requantize") == ("target" not in r)
    with pytest.raises(SystemExit, match="unknown element-wise ops"):
        qops_elem.run_elementwise(p.parse_args(["--qelem-ops", "mul"]))
