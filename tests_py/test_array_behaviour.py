"""Array behaviour of quantized tensors (TernaryTensor, PlainTensor): ``dtype``, ``ndim``, ``size``,
``len()``, the notebook HTML repr, and ``np.asarray(t)`` refused with a TypeError. No torch needed."""

from __future__ import annotations

import html.parser
import pickle
import re

import numpy as np
import pytest

import bitnet_go
from bitnet_go import QuantizedTensor, TernaryTensor
from bitnet_go._quantized import PlainTensor

PLAIN = ("int8", "uint8", "int4", "uint4", "binary")
SHAPES = [(), (7,), (3, 5), (2, 3, 64), (4, 1, 1, 129)]


def _x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).standard_normal(shape), np.float32)


def _tensors(shape: tuple[int, ...]) -> list[QuantizedTensor]:
    """One tensor of each format (ternary packings and plain types) of ``shape``."""
    x = _x(shape)
    t = bitnet_go.quantize_i2s(x)
    out: list[QuantizedTensor] = [t]
    if shape:  # TL1/TL2 (like I2_S) take any shape; 0-d goes through I2_S only to keep it short
        out += [t.to("tl1"), t.to("tl2")]
    out += [bitnet_go.quantize(x, dt) for dt in PLAIN]
    return out


def _codes(t: QuantizedTensor) -> np.ndarray:
    return t.values() if isinstance(t, TernaryTensor) else t.int_repr()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dtype_ndim_size_len(shape: tuple[int, ...]) -> None:
    for t in _tensors(shape):
        assert t.dtype == ("ternary" if isinstance(t, TernaryTensor) else t.qtype)
        assert t.ndim == len(shape) and isinstance(t.ndim, int)
        assert t.size == int(np.prod(shape)) and isinstance(t.size, int)
        assert bool(t) is True  # as before __len__ existed, whatever the shape
        if shape:
            assert len(t) == shape[0] == len(np.empty(shape))
        else:
            with pytest.raises(TypeError, match=r"len\(\) of a 0-d .*use \.size"):
                len(t)
            with pytest.raises(TypeError):
                len(np.empty(shape))  # numpy agrees: a 0-d array has no len()


def test_dtype_of_each_plain_type_and_packing() -> None:
    x = _x((4, 8))
    t = bitnet_go.quantize_i2s(x)
    assert [u.dtype for u in (t, t.to("tl1"), t.to("tl2"))] == ["ternary"] * 3
    assert [bitnet_go.quantize(x, dt).dtype for dt in PLAIN] == list(PLAIN)
    assert bitnet_go.quantize(x, "ternary").dtype == "ternary"


@pytest.mark.parametrize(
    "convert",
    [np.asarray, np.array, lambda t: np.array(t, dtype=object), lambda t: np.asarray(t, np.float32),
     lambda t: np.asarray([t, t]), lambda t: np.ones(t.shape) + t, lambda t: np.float32(2) * t],
    ids=["asarray", "array", "array-object", "asarray-float32", "list-of-two", "ufunc", "scalar-mul"],
)  # fmt: skip
def test_numpy_conversion_raises_instead_of_an_object_array(convert) -> None:
    for t in _tensors((3, 5)):
        codes = r"\.values\(\) \(or \.int_repr\(\)\)" if isinstance(t, TernaryTensor) else r"\.int_repr\(\)"
        with pytest.raises(TypeError, match=rf"does not convert to a numpy array implicitly: call {codes}.*"
                                            r"\.dequantize\(\)") as e:  # fmt: skip
            convert(t)
        assert type(t).__name__ in str(e.value)


def test_numpy_really_calls_array() -> None:
    """numpy goes through ``__array__`` (no object array is made on the way): a subclass that
    allows it gets its array back."""

    class Allowing(TernaryTensor):
        __slots__ = ()

        def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
            return self.values()

    t = bitnet_go.quantize_i2s(_x((2, 3)))
    u = object.__new__(Allowing)
    u._init(t.qtype, t.shape, t.block_size, t.packed, t.scales)
    object.__setattr__(u, "method", t.method)
    a = np.asarray(u)
    assert a.dtype == np.int8 and a.shape == (2, 3)
    np.testing.assert_array_equal(a, t.values())


def test_the_explicit_conversions_still_work() -> None:
    t = bitnet_go.quantize_i2s(_x((3, 5)))
    assert t.values().dtype == np.int8 and t.int_repr().dtype == np.int8
    assert t.dequantize().dtype == np.float32 and t.dequantize().shape == (3, 5)
    q = bitnet_go.quantize(_x((3, 5)), "uint8")
    assert q.int_repr().dtype == np.uint8 and q.dequantize().shape == (3, 5)
    # and the tensor still goes where numpy arrays of bytes are taken as buffers of its fields
    assert np.asarray(t.packed).dtype == np.uint8


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_histogram_counts_every_code(shape: tuple[int, ...]) -> None:
    for t in _tensors(shape):
        hist = t.histogram()
        assert sum(n for _, n in hist) == t.size
        codes, counts = np.unique(_codes(t).astype(np.int64), return_counts=True)
        got = dict(zip(codes.tolist(), counts.tolist()))
        if t.dtype == "ternary":
            assert [lab for lab, _ in hist] == ["-1", "0", "+1"]
            assert [n for _, n in hist] == [got.get(c, 0) for c in (-1, 0, 1)]
        elif t.dtype == "binary":
            assert [lab for lab, _ in hist] == ["-1", "+1"]
            assert [n for _, n in hist] == [got.get(c, 0) for c in (-1, 1)]
        elif t.dtype in ("int4", "uint4"):
            lo = -8 if t.dtype == "int4" else 0
            assert [lab for lab, _ in hist] == [str(c) for c in range(lo, lo + 16)]
            assert [n for _, n in hist] == [got.get(c, 0) for c in range(lo, lo + 16)]
        else:  # 16 bins of 16 codes
            lo = -128 if t.dtype == "int8" else 0
            assert len(hist) == 16 and hist[0][0] == f"{lo}..{lo + 15}" and hist[-1][0] == f"{lo + 240}..{lo + 255}"
            for i, (_, n) in enumerate(hist):
                assert n == sum(got.get(c, 0) for c in range(lo + 16 * i, lo + 16 * i + 16))


def test_histogram_of_a_large_tensor_in_chunks() -> None:
    x = _x((3, 1_000_001), seed=1)  # 3 chunks of 2**20 and a short one
    t = bitnet_go.quantize_i2s(x)
    v = t.values()
    assert t.histogram() == [("-1", int((v == -1).sum())), ("0", int((v == 0).sum())), ("+1", int((v == 1).sum()))]
    q = bitnet_go.quantize(x, "int8")
    c = q.int_repr().astype(np.int64)
    assert [n for _, n in q.histogram()] == np.histogram(c, bins=16, range=(-128, 128))[0].tolist()


def test_scales_summary() -> None:
    t = bitnet_go.quantize_i2s([1.0, -3.0, 2.0, 0.0, 4.0, 4.0], block_size=2, method="absmax")
    assert t.scales_summary() == {"count": 3, "min": 2.0, "max": 4.0, "mean": 3.0, "non_finite": 0}
    nan = bitnet_go.quantize_i2s([np.nan, 1.0, 2.0, 3.0], block_size=2, check_finite=False)
    s = nan.scales_summary()
    assert s["count"] == 2 and s["non_finite"] == 1 and s["min"] == s["max"] == s["mean"] == 2.5
    assert "(1 NaN/Inf)" in nan._repr_html_()
    allnan = bitnet_go.quantize_i2s([np.nan, 1.0], check_finite=False).scales_summary()
    assert allnan["non_finite"] == 1 and np.isnan(allnan["min"])


class _Balanced(html.parser.HTMLParser):
    """Checks that every opened tag is closed, in order, and collects the text."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack.pop() == tag, (tag, self.stack)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _html_text(t: QuantizedTensor) -> str:
    p = _Balanced()
    p.feed(t._repr_html_())
    p.close()
    assert not p.stack
    return " ".join(p.text)


def test_repr_html_of_a_ternary_tensor() -> None:
    x = _x((64, 128))
    t = bitnet_go.quantize_i2s(x, block_size=128)
    text = _html_text(t)
    s = t.scales_summary()
    wants = [
        "TernaryTensor",
        "ternary",
        "i2_s",
        "(64, 128)",
        f"64: min {s['min']:.4g}, max {s['max']:.4g}",
        f"mean {s['mean']:.4g}",
        f"{t.nbytes:,} (float32: {4 * t.size:,}, ",
        "x smaller",
        "2.250",
        "cpu",
    ]
    for want in wants:
        assert want in text, (want, text)
    v = t.values()
    rows = re.findall(r"<tr><td[^>]*>([^<]+)</td><td[^>]*>([\d,]+)</td>", t._repr_html_())
    assert rows == [(lab, f"{int((v == c).sum()):,}") for lab, c in (("-1", -1), ("0", 0), ("+1", 1))]
    assert "matplotlib" not in t._repr_html_() and "<img" not in t._repr_html_()
    assert "tl2" in _html_text(t.to("tl2"))


@pytest.mark.parametrize("dtype", PLAIN)
def test_repr_html_of_plain_tensors(dtype: str) -> None:
    q = bitnet_go.quantize(_x((8, 32)), dtype, axis=0)
    text = _html_text(q)
    assert dtype in text and "(8, 32)" in text and "8: min" in text
    assert ("zero_points" in text) and (("8: min" in text.split("zero_points")[1]) == (dtype != "binary"))
    rows = re.findall(r"<tr><td[^>]*>([^<]+)</td><td[^>]*>([\d,]+)</td>", q._repr_html_())
    assert [(lab, int(n.replace(",", ""))) for lab, n in rows] == q.histogram()


def test_repr_html_of_a_tiny_tensor_says_larger() -> None:
    q = bitnet_go.quantize(1.5, "int8", scale=0.5, zero_point=0)  # 1 byte of data, 8 of scale and zero point
    assert "x larger" in _html_text(q)


def test_existing_behaviour_kept() -> None:
    t = bitnet_go.quantize_i2s(_x((3, 5)), block_size=5)
    u = pickle.loads(pickle.dumps(t))
    assert type(u) is TernaryTensor and repr(u) == repr(t) and len(u) == 3
    np.testing.assert_array_equal(u.values(), t.values())
    assert repr(t).startswith("TernaryTensor(qtype='i2_s', shape=(3, 5), block_size=5, method='absmean'")
    q = bitnet_go.quantize(_x((3, 5)), "int4", group_size=5)
    r = pickle.loads(pickle.dumps(q))
    assert type(r) is PlainTensor and repr(r) == repr(q) and r.ndim == 2
    assert repr(q).startswith("QuantizedTensor(dtype='int4', shape=(3, 5), group_size=5")
    with pytest.raises(AttributeError, match="immutable"):
        t.shape = (15,)  # type: ignore[misc]
    with pytest.raises(TypeError):
        t[0]  # not indexable (yet)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int4", "uint4", "binary"])
def test_plain_to_device(dtype: str) -> None:
    """A plain tensor's .to('cpu') is itself (it was an AttributeError); a GPU or a dtype is a
    ValueError saying what to use instead."""
    q = bitnet_go.quantize(np.linspace(-1, 1, 8, dtype=np.float32), dtype)
    assert q.to("cpu") is q
    with pytest.raises(ValueError, match=f"^{dtype} tensors stay on the host: the GPU kernels take ternary"):
        q.to("cuda:0")
    with pytest.raises(ValueError, match="^to\\(\\) moves a tensor between devices; for another dtype use"):
        q.to("int8")
    for bad in ("gpu", 0, None):
        with pytest.raises(ValueError, match="^device must be 'cpu'"):
            q.to(bad)  # type: ignore[arg-type]
