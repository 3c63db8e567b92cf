"""bitnet_go.quantize / dequantize / choose_qparams bit for bit against torch
(quantize_per_tensor, quantize_per_channel, the observers' qparams) and
torchao (choose_qparams_affine, quantize_affine, dequantize_affine). Every
case draws its data from the seed in its test id."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import bitnet_go

torch = pytest.importorskip(
    "torch", reason="torch is not installed: the quantize/dequantize parity tests against torch are skipped"
)

# torch.quantize_per_tensor & co. warn that they are deprecated (torch 2.15): filtered here, per test
DEPRECATED = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")

TORCH_DTYPES = {"int8": torch.qint8, "uint8": torch.quint8, "uint4": torch.quint4x2}
RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15)}
KINDS = ("normal", "ties", "zeros", "constant", "huge", "tiny", "wide", "positive", "negative")


@pytest.fixture(autouse=True)
def _fbgemm():
    old = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = old


def rand_shape(rng: np.random.Generator, max_rank: int = 4, min_rank: int = 1) -> tuple[int, ...]:
    rank = int(rng.integers(min_rank, max_rank + 1))
    return tuple(int(v) for v in rng.choice([1, 2, 3, 5, 7, 8, 9, 16, 17, 31, 33], size=rank))


def rand_x(rng: np.random.Generator, shape: tuple[int, ...], kind: str, scale: float = 1.0) -> np.ndarray:
    """Data of one kind; ``ties`` puts values at exact k + 0.5 steps of ``scale``."""
    n = int(np.prod(shape))
    if kind == "normal":
        x = rng.standard_normal(n) * 10 ** rng.uniform(-2, 2)
    elif kind == "ties":
        x = (rng.integers(-300, 300, n) + 0.5) * scale
    elif kind == "zeros":
        x = np.zeros(n)
    elif kind == "constant":
        x = np.full(n, rng.standard_normal() * 10 ** rng.uniform(-3, 3))
    elif kind == "huge":
        x = rng.standard_normal(n) * 1e30
    elif kind == "tiny":
        x = rng.standard_normal(n) * 1e-30
    elif kind == "wide":
        x = rng.standard_normal(n) * 10 ** rng.uniform(-20, 20, n)
    elif kind == "positive":
        x = np.abs(rng.standard_normal(n)) + 1
    else:
        x = -np.abs(rng.standard_normal(n)) - 1
    x = x.astype(np.float32)
    if kind == "normal" and n > 2:
        x[rng.integers(0, n)] = 0.0
    return x.reshape(shape)


def given_params(rng: np.random.Generator, dtype: str) -> tuple[np.float32, int]:
    """A scale (a power of two: ties stay ties; or any float) and a zero point of the range."""
    lo, hi = RANGES[dtype]
    scale = np.float32(2.0 ** int(rng.integers(-8, 4))) if rng.random() < 0.5 else np.float32(rng.uniform(1e-3, 2))
    return scale, int(rng.integers(lo, hi + 1))


def bits(a: object) -> np.ndarray:
    a = np.asarray(a.numpy() if hasattr(a, "numpy") else a, np.float32)
    return a.view(np.int32)


def torch_int_repr(q: object) -> np.ndarray:
    return q.int_repr().numpy()


# ---------------------------------------------------------------- per tensor, given scale/zero point


@DEPRECATED
@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint4"])
@pytest.mark.parametrize("seed", range(12))
def test_per_tensor_given_matches_torch(dtype: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 1])
    for kind in ("normal", "ties", "zeros", "constant", "positive", "negative"):
        scale, zp = given_params(rng, dtype)
        x = rand_x(rng, rand_shape(rng), kind, float(scale))
        if kind in ("constant", "normal"):
            x = (x / np.abs(x).max() * 300 * scale).astype(np.float32) if np.abs(x).max() else x
        t = torch.quantize_per_tensor(torch.from_numpy(x), float(scale), zp, TORCH_DTYPES[dtype])
        q = bitnet_go.quantize(x, dtype, scale=scale, zero_point=zp)
        if dtype == "uint4":  # torch's quint4x2 int_repr is the packed bytes: element 2i in the low nibble
            assert np.array_equal(q.packed, torch_int_repr(t)), (kind, scale, zp)
        else:
            assert np.array_equal(q.int_repr(), torch_int_repr(t)), (kind, scale, zp)
        assert np.array_equal(bits(q.dequantize()), bits(t.dequantize())), (kind, scale, zp)
        assert q.dtype == dtype and q.shape == x.shape and q.axis is None and q.group_size is None


@DEPRECATED
@pytest.mark.parametrize("seed", range(4))
def test_fbgemm_multiplies_by_the_reciprocal(seed: int) -> None:
    """FBGEMM's example: x * (1/scale) is 127.5 where x / scale is 127.499992."""
    x = np.float32([0.273939937, -0.273939937] * (seed + 1))
    scale = np.float32(0.00214854861)
    t = torch.quantize_per_tensor(torch.from_numpy(x), float(scale), 0, torch.qint8)
    q = bitnet_go.quantize(x, "int8", scale=scale, zero_point=0)
    assert np.array_equal(q.int_repr(), torch_int_repr(t))
    assert q.int_repr()[0] == 127 and q.int_repr()[1] == -128


@DEPRECATED
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("seed", range(3))
def test_nan_and_inf_without_check_finite_match_torch_per_tensor(dtype: str, seed: int) -> None:
    """torch's per-tensor FBGEMM path: NaN -> qmax, +Inf -> qmax, -Inf -> qmin (zero point 0)."""
    rng = np.random.default_rng([seed, 2])
    x = rng.standard_normal(int(rng.integers(1, 40))).astype(np.float32)
    x[rng.integers(0, x.size, 3)] = [np.nan, np.inf, -np.inf]
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.05, 0, TORCH_DTYPES[dtype])
    q = bitnet_go.quantize(x, dtype, scale=0.05, zero_point=0, check_finite=False)
    assert np.array_equal(q.int_repr(), torch_int_repr(t))
    with pytest.raises(ValueError, match="NaN|Inf|finite"):
        bitnet_go.quantize(x, dtype, scale=0.05, zero_point=0)


@DEPRECATED
@pytest.mark.parametrize("zp", [0, 3, 8, 15])
def test_uint4_nan_without_check_finite_matches_torch_quint4x2(zp: int) -> None:
    """torch's quint4x2 per-tensor path (not FBGEMM's) gives qmin (0) for NaN, whatever the zero
    point. (It also gives 0 for +Inf and for values past 2^63 * scale, an int64 cast overflow;
    we saturate those to qmax, as the formula says: documented, not compared here.)"""
    rng = np.random.default_rng([zp, 9])
    x = rng.standard_normal(int(rng.integers(1, 40))).astype(np.float32)
    x[rng.integers(0, x.size, 3)] = np.nan
    t = torch.quantize_per_tensor(torch.from_numpy(x), 0.1, zp, torch.quint4x2)
    q = bitnet_go.quantize(x, "uint4", scale=0.1, zero_point=zp, check_finite=False)
    assert np.array_equal(q.packed, torch_int_repr(t))


# ---------------------------------------------------------------- per channel, given


@DEPRECATED
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("seed", range(10))
def test_per_channel_given_matches_torch_on_every_axis(dtype: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 3])
    shape = rand_shape(rng)
    for axis in range(len(shape)):
        c = shape[axis]
        params = [given_params(rng, dtype) for _ in range(c)]
        scales = np.float32([p[0] for p in params])
        zps = np.int32([p[1] for p in params])
        kind = KINDS[int(rng.integers(0, 4))]
        x = rand_x(rng, shape, kind, float(scales.min()))
        if kind != "ties":
            x = (x * 100 * scales.min()).astype(np.float32)
        t = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scales.astype(np.float64)),
                                       torch.from_numpy(zps.astype(np.int64)), axis, TORCH_DTYPES[dtype])  # fmt: skip
        q = bitnet_go.quantize(x, dtype, scale=scales, zero_point=zps, axis=axis)
        assert np.array_equal(q.int_repr(), torch_int_repr(t)), (axis, kind)
        assert np.array_equal(bits(q.dequantize()), bits(t.dequantize())), (axis, kind)
        assert q.axis == axis and q.scale.shape == (c,)
        q2 = bitnet_go.quantize(x, dtype, scale=scales, zero_point=zps, axis=axis - len(shape))
        assert np.array_equal(q2.int_repr(), q.int_repr())


# ---------------------------------------------------------------- qparams from min/max: the observers' rule


def torch_observer_qparams(x: np.ndarray, dtype: str, scheme: str, axis: int | None = None,
                           reduce_range: bool = False, qmin: int | None = None, qmax: int | None = None):  # fmt: skip
    from torch.ao.quantization import observer as tob

    if axis is None:
        qs = torch.per_tensor_affine if scheme == "affine" else torch.per_tensor_symmetric
        obs = tob.MinMaxObserver(dtype=TORCH_DTYPES[dtype], qscheme=qs, reduce_range=reduce_range,
                                 quant_min=qmin, quant_max=qmax)  # fmt: skip
    else:
        qs = torch.per_channel_affine if scheme == "affine" else torch.per_channel_symmetric
        obs = tob.PerChannelMinMaxObserver(ch_axis=axis, dtype=TORCH_DTYPES[dtype], qscheme=qs,
                                           reduce_range=reduce_range, quant_min=qmin, quant_max=qmax)  # fmt: skip
    obs(torch.from_numpy(x))
    s, z = obs.calculate_qparams()
    return s.numpy().astype(np.float32).reshape(-1), z.numpy().astype(np.int64).reshape(-1)


@DEPRECATED
@pytest.mark.parametrize("scheme", ["affine", "symmetric"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint4"])
@pytest.mark.parametrize("seed", range(10))
def test_computed_per_tensor_matches_torch(dtype: str, scheme: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 4, len(dtype), len(scheme)])
    for kind in KINDS:
        x = rand_x(rng, rand_shape(rng), kind)
        ts, tz = torch_observer_qparams(x, dtype, scheme)
        s, z = bitnet_go.choose_qparams(x.min(), x.max(), dtype, scheme)
        assert np.array_equal(bits(s), bits(ts)) and np.array_equal(z, tz), (kind, s, ts, z, tz)
        q = bitnet_go.quantize(x, dtype, scheme=scheme)
        assert np.array_equal(bits(q.scale), bits(ts)) and np.array_equal(q.zero_point, tz), kind
        if float(ts[0]) < 1e-37 or not np.isfinite(float(x.astype(np.float64).max() / ts[0])):
            continue  # torch's int32 arithmetic wraps for |x / scale| >= 2**31 (see test_overflow)
        t = torch.quantize_per_tensor(torch.from_numpy(x), float(ts[0]), int(tz[0]), TORCH_DTYPES[dtype])
        got = q.packed if dtype == "uint4" else q.int_repr()
        assert np.array_equal(got, torch_int_repr(t)), kind


@DEPRECATED
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("seed", range(6))
def test_computed_per_channel_matches_torch(dtype: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 5, len(dtype)])
    for scheme in ("affine", "symmetric"):
        shape = rand_shape(rng, min_rank=2)  # torch's PerChannelMinMaxObserver fails on 1-D input (flatten)
        for axis in range(len(shape)):
            x = rand_x(rng, shape, KINDS[int(rng.integers(0, len(KINDS)))])
            ts, tz = torch_observer_qparams(x, dtype, scheme, axis)
            q = bitnet_go.quantize(x, dtype, scheme=scheme, axis=axis)
            assert np.array_equal(bits(q.scale), bits(ts)) and np.array_equal(q.zero_point, tz), (scheme, axis)
            t = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(ts.astype(np.float64)),
                                           torch.from_numpy(tz), axis, TORCH_DTYPES[dtype])  # fmt: skip
            assert np.array_equal(q.int_repr(), torch_int_repr(t)), (scheme, axis)


@DEPRECATED
@pytest.mark.parametrize("seed", range(6))
def test_reduce_range_and_custom_ranges_match_torch(seed: int) -> None:
    rng = np.random.default_rng([seed, 6])
    for dtype in ("int8", "uint8"):
        lo, hi = RANGES[dtype]
        for scheme in ("affine", "symmetric"):
            for reduce in (False, True):
                if reduce and scheme == "symmetric" and dtype == "uint8":
                    with pytest.raises(ValueError, match="reduce_range"):
                        bitnet_go.choose_qparams(-1.0, 1.0, dtype, scheme, reduce_range=True)
                    continue
                qmin = int(rng.integers(lo, 1))
                qmax = int(rng.integers(max(qmin + 1, 0), hi + 1))
                for custom in ((None, None), (qmin, qmax)):
                    x = rand_x(rng, rand_shape(rng), KINDS[int(rng.integers(0, len(KINDS)))])
                    ts, tz = torch_observer_qparams(x, dtype, scheme, None, reduce, *custom)
                    s, z = bitnet_go.choose_qparams(x.min(), x.max(), dtype, scheme, reduce_range=reduce,
                                                    quant_min=custom[0], quant_max=custom[1])  # fmt: skip
                    assert np.array_equal(bits(s), bits(ts)) and np.array_equal(z, tz), (scheme, reduce, custom)


def test_choose_qparams_eps_and_vectors() -> None:
    s, z = bitnet_go.choose_qparams([0.0, -1.0], [0.0, 1.0], "int8", "symmetric")
    assert s[0] == np.float32(np.finfo(np.float32).eps) and s[1] == np.float32(1) / np.float32(127.5)
    assert z.tolist() == [0, 0] and s.dtype == np.float32 and z.dtype == np.int32
    s, _ = bitnet_go.choose_qparams(0.0, 0.0, "int8", eps=0.5)
    assert s[0] == 0.5


# ---------------------------------------------------------------- torchao


def ao_block_size(shape: tuple[int, ...], axis: int | None, group_size: int | None) -> tuple[int, ...]:
    if axis is not None:
        return tuple(1 if i == axis else d for i, d in enumerate(shape))
    if group_size is not None:
        return (1,) * (len(shape) - 1) + (group_size,)
    return shape


AO_TARGET = {"int8": (torch.int8, None, None), "uint8": (torch.uint8, None, None),
             "int4": (torch.int8, -8, 7), "uint4": (torch.uint8, 0, 15)}  # fmt: skip
AO_MAPPINGS = ("symmetric", "symmetric_no_clipping_err", "asymmetric")
"""Our mapping names; torchao's ``MappingType`` member of each is its upper-case name."""


@pytest.fixture
def quant_primitives() -> Any:
    """torchao's ``quant_primitives``; only the tests against torchao skip without it (the torch
    parity tests of this module run on a machine with torch alone, as the device machine)."""
    return pytest.importorskip(
        "torchao.quantization.quant_primitives",
        reason="torchao is not installed: the parity tests against it are skipped",
    )


@pytest.mark.parametrize("mapping", AO_MAPPINGS)
@pytest.mark.parametrize("dtype", list(AO_TARGET))
@pytest.mark.parametrize("seed", range(6))
def test_matches_torchao_per_tensor_channel_and_group(
    quant_primitives: Any, dtype: str, mapping: str, seed: int
) -> None:
    rng = np.random.default_rng([seed, 7, len(dtype), len(mapping)])
    tdt = AO_TARGET[dtype][0]
    lo, hi = RANGES[dtype]
    for trial in range(6):
        shape = rand_shape(rng, 3)
        kind = KINDS[int(rng.integers(0, len(KINDS)))]
        x = rand_x(rng, shape, kind)
        g = [d for d in (1, 2, 4, 8, 16, 32) if shape[-1] % d == 0]
        choices = [(None, None)] + [(a, None) for a in range(len(shape))] + [(None, int(rng.choice(g)))]
        axis, group = choices[trial % len(choices)]
        block = ao_block_size(shape, axis, group)
        if np.prod(block) == 1 and x.size > 1:
            # torchao: a block of one element leaves no dim to reduce, and torch.amin(dim=[]) then
            # reduces over all of them (one scale), which quantize_affine cannot view: not comparable
            continue
        xt = torch.from_numpy(x)
        ts, tz = quant_primitives.choose_qparams_affine(
            xt, getattr(quant_primitives.MappingType, mapping.upper()), block, tdt, lo, hi
        )
        tq = quant_primitives.quantize_affine(xt, block, ts, tz, tdt, lo, hi)
        tdq = quant_primitives.dequantize_affine(tq, block, ts, tz, tdt, lo, hi)
        q = bitnet_go.quantize(x, dtype, mapping=mapping, axis=axis, group_size=group)  # type: ignore[arg-type]
        where = (kind, shape, axis, group)
        assert np.array_equal(bits(q.scale), bits(ts.reshape(-1))), where
        assert np.array_equal(q.zero_point, tz.reshape(-1).numpy()), where
        assert np.array_equal(q.int_repr().astype(np.int64), tq.numpy().astype(np.int64)), where
        assert np.array_equal(bits(q.dequantize()), bits(tdq)), where


@pytest.mark.parametrize("seed", range(3))
def test_group_size_that_does_not_divide_is_refused_like_torchao(quant_primitives: Any, seed: int) -> None:
    rng = np.random.default_rng([seed, 8])
    x = rng.standard_normal((3, 10)).astype(np.float32)
    with pytest.raises(ValueError, match="group_size must divide the last dimension"):
        bitnet_go.quantize(x, "int4", group_size=4)
    with pytest.raises(AssertionError):
        quant_primitives.choose_qparams_affine(
            torch.from_numpy(x), quant_primitives.MappingType.SYMMETRIC, (1, 4), torch.int8, -8, 7
        )
    q = bitnet_go.quantize(x, "int4", group_size=5)
    assert q.group_size == 5 and q.scale.shape == (6,)


# ---------------------------------------------------------------- packing


def ref_pack_nibbles(v: np.ndarray) -> np.ndarray:
    """Element 2i in the low nibble of byte i; an odd count leaves the last high nibble 0."""
    u = (v.reshape(-1).astype(np.int64) & 0xF).astype(np.uint8)
    if u.size % 2:
        u = np.append(u, np.uint8(0))
    return (u[0::2] | (u[1::2] << 4)).astype(np.uint8)


def ref_pack_bits(x: np.ndarray) -> np.ndarray:
    """Bit b of byte j is element 8j+b: 1 for x >= 0 (also -0.0), unused bits 0."""
    b = (x.reshape(-1) >= 0).astype(np.uint8)
    out = np.zeros((b.size + 7) // 8, np.uint8)
    for i, v in enumerate(b):
        out[i // 8] |= v << (i % 8)
    return out


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("seed", range(8))
def test_nibble_packing(dtype: str, seed: int) -> None:
    rng = np.random.default_rng([seed, 9])
    for _ in range(5):
        shape = rand_shape(rng)
        x = rand_x(rng, shape, KINDS[int(rng.integers(0, len(KINDS)))])
        q = bitnet_go.quantize(x, dtype)
        v = q.int_repr()
        lo, hi = RANGES[dtype]
        assert v.shape == shape and v.min() >= lo and v.max() <= hi
        assert np.array_equal(q.packed, ref_pack_nibbles(v))
        assert q.nbytes == (v.size + 1) // 2 + 8


def ref_binary_scales(x: np.ndarray, axis: int | None, group: int | None) -> np.ndarray:
    a = np.abs(x.astype(np.float64))
    if axis is not None:
        m = np.moveaxis(a, axis, 0).reshape(x.shape[axis], -1).sum(axis=1) / (x.size // x.shape[axis])
    elif group is not None:
        m = a.reshape(-1, group).sum(axis=1) / group
    else:
        m = np.array([a.sum() / a.size])
    return m.astype(np.float32)


@pytest.mark.parametrize("seed", range(8))
def test_binary(seed: int) -> None:
    rng = np.random.default_rng([seed, 10])
    for trial in range(6):
        shape = rand_shape(rng)
        x = rand_x(rng, shape, KINDS[int(rng.integers(0, len(KINDS)))])
        x.reshape(-1)[0] = -0.0
        g = [d for d in (1, 2, 4, 8) if shape[-1] % d == 0]
        axis, group = [(None, None), (int(rng.integers(0, len(shape))), None), (None, int(rng.choice(g)))][trial % 3]
        q = bitnet_go.quantize(x, "binary", axis=axis, group_size=group)
        assert np.array_equal(q.packed, ref_pack_bits(x))
        assert np.array_equal(q.int_repr(), np.where(x >= 0, 1, -1).astype(np.int8))
        assert np.array_equal(bits(q.scale), bits(ref_binary_scales(x, axis, group)))
        s = ref_binary_scales(x, axis, group)
        want = np.where(x >= 0, 1, -1).astype(np.float32)
        if axis is not None:
            want = want * np.expand_dims(s, [d for d in range(len(shape)) if d != axis])
        else:
            want = (want.reshape(s.size, -1) * s[:, None]).reshape(shape)
        assert np.array_equal(bits(q.dequantize()), bits(want.astype(np.float32)))
        assert q.zero_point is None


def test_binary_given_scale() -> None:
    q = bitnet_go.quantize(np.float32([1, -2, 0, -0.0]), "binary", scale=0.25)
    assert q.dequantize().tolist() == [0.25, -0.25, 0.25, 0.25]


# ---------------------------------------------------------------- the tensor


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int4", "uint4", "binary"])
def test_tensor_pickles_and_describes_itself(dtype: str) -> None:
    import pickle

    x = np.random.default_rng(11).standard_normal((3, 8)).astype(np.float32)
    q = bitnet_go.quantize(x, dtype, axis=0)
    r = pickle.loads(pickle.dumps(q))
    assert isinstance(r, bitnet_go.QuantizedTensor) and r.dtype == dtype and r.axis == 0
    assert np.array_equal(r.int_repr(), q.int_repr()) and np.array_equal(r.dequantize(), q.dequantize())
    assert "<table>" in q._repr_html_() and dtype in repr(q)
    assert np.array_equal(bitnet_go.dequantize(q), q.dequantize())
    with pytest.raises(AttributeError):
        q.scales = None  # type: ignore[misc]


def test_ternary_is_the_ternary_case() -> None:
    x = np.random.default_rng(12).standard_normal(300).astype(np.float32)
    t = bitnet_go.quantize(x, "ternary")
    assert isinstance(t, bitnet_go.TernaryTensor) and t.dtype == "ternary"
    assert np.array_equal(t.int_repr(), bitnet_go.quantize_i2s(x).values())
    assert "<table>" in t._repr_html_()


def test_torch_tensors_are_accepted() -> None:
    x = torch.linspace(-1, 1, 11)
    q = bitnet_go.quantize(x, "int8", scale=torch.tensor(0.1), zero_point=torch.tensor(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
    assert np.array_equal(q.int_repr(), t.int_repr().numpy())


def test_overflow_clamps_where_torch_wraps() -> None:
    """|x / scale| >= 2**31: we clamp (qmax); torch's FBGEMM path adds the zero point to
    an int32 that has been clipped at 2**31 - 128 and wraps (an undocumented torch bug)."""
    x = np.float32([1e30, 3e9, -1e30])
    q = bitnet_go.quantize(x, "uint8", scale=1.0, zero_point=255)
    assert q.int_repr().tolist() == [255, 255, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.quantize_per_tensor(torch.from_numpy(x), 1.0, 255, torch.quint8)
    assert t.int_repr().tolist()[:2] == [0, 0]  # torch wraps


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int4", "uint4", "binary"])
@pytest.mark.parametrize("seed", range(3))
def test_dequantize_into_out_equals_a_new_array(dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = rand_shape(rng)
    q = bitnet_go.quantize(rand_x(rng, shape, "normal"), dtype, axis=0 if seed == 1 else None)
    want = q.dequantize()
    buf = np.full(shape, np.nan, np.float32)
    assert q.dequantize(out=buf) is buf
    np.testing.assert_array_equal(bits(buf), bits(want))
    with pytest.raises(ValueError, match="out must be float32 of shape"):
        q.dequantize(out=np.empty(shape, np.float64))
    with pytest.raises(ValueError, match="out must be float32 of shape"):
        q.dequantize(out=np.empty((*shape, 2), np.float32))
    with pytest.raises(TypeError, match="out must be a numpy.ndarray"):
        q.dequantize(out=[0.0])  # type: ignore[arg-type]
    if buf.size > 1:
        with pytest.raises(ValueError, match="C-contiguous"):
            q.dequantize(out=np.empty((*shape, 2), np.float32)[..., 0])
