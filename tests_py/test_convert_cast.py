"""The Go casts of the converter (``_core.ops.cast``: bfloat16 -> float32 / float16, float32 -> float16)
against numpy bit for bit, and the converter's output files against the numpy casts it replaced."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go._core.ops import cast
from bitnet_go.bench.convert import make_checkpoint
from bitnet_go.convert import _convert, _reader, convert_checkpoint


def _numpy_f32(a: np.ndarray, dtype: str) -> np.ndarray:
    """The converter's former numpy widening."""
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return np.array(a, dtype=np.float32, order="C")


def _numpy_f16(a: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return _numpy_f32(a, dtype).astype(np.float16)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request: pytest.FixtureRequest) -> int:
    old = bitnet_go.get_num_threads()
    bitnet_go.set_num_threads(request.param)
    yield request.param
    bitnet_go.set_num_threads(old)


def test_bf16_every_pattern(threads: int) -> None:
    """All 65536 bfloat16 bit patterns (NaN, Inf, subnormals, ±0): widened exactly, rounded to float16 as numpy."""
    b = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    f = cast(b, "bfloat16", "float32")
    assert f.dtype == np.float32 and np.array_equal(f.view(np.uint32), b.astype(np.uint32) << 16)
    h = cast(b, "bfloat16", "float16")
    want = _numpy_f16(b, "BF16")
    bad = np.nonzero(h.view(np.uint16) != want.view(np.uint16))[0]
    assert bad.size == 0, [(hex(b[i]), hex(h.view(np.uint16)[i]), hex(want.view(np.uint16)[i])) for i in bad[:5]]


@pytest.mark.parametrize("n", [0, 1, 7, 4097, 300_001])
def test_f32_to_f16_random(threads: int, n: int) -> None:
    """Random float32 bit patterns and values around float16's range and its ties, fresh per case."""
    rng = np.random.default_rng(1000 + n + threads)
    x = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).copy()
    near = rng.standard_normal(n // 2).astype(np.float32) * np.exp2(rng.integers(-28, 18, n // 2)).astype(np.float32)
    x[: n // 2] = near
    # exact ties between neighbouring float16 values
    h = rng.integers(0, 0x7BFF, n // 4, dtype=np.uint16).view(np.float16)
    x[n // 2 : n // 2 + n // 4] = (h.astype(np.float64) + np.nextafter(h, np.float16(np.inf)).astype(np.float64)) / 2
    got = cast(x.reshape(-1, 1) if n else x, "float32", "float16").reshape(-1)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_cast_shapes_and_errors() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert cast(x, "float32", "float16").shape == (3, 4)
    assert cast(np.array(0x3F80, np.uint16), "bfloat16", "float32").tolist() == 1.0
    with pytest.raises(TypeError, match="takes a uint16 array, got float32"):
        cast(x, "bfloat16", "float32")
    with pytest.raises(ValueError, match="got float16 to float32"):
        cast(x, "float16", "float32")
    with pytest.raises(ValueError, match="C-contiguous"):
        cast(x[:, ::2], "float32", "float16")


@pytest.mark.parametrize("dtype", ["BF16", "F16", "F32", "F64"])
def test_reader_casts(dtype: str) -> None:
    """``to_float32`` / ``to_float16`` of every float dtype a checkpoint holds, strided input included."""
    rng = np.random.default_rng(7)
    v = (rng.standard_normal((6, 10)) * 1e3).astype(np.float32)
    a = {"BF16": (v.view(np.uint32) >> 16).astype(np.uint16), "F16": v.astype(np.float16),
         "F32": v, "F64": v.astype(np.float64) * 1.0001}[dtype]  # fmt: skip
    for arr in (a, a[:, ::3]):
        assert np.array_equal(_reader.to_float32(arr, dtype).view(np.uint32), _numpy_f32(arr, dtype).view(np.uint32))
        assert np.array_equal(_reader.to_float16(arr, dtype).view(np.uint16), _numpy_f16(arr, dtype).view(np.uint16))


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(("qtype", "to"), [("i2_s", "gguf"), ("tq2_0", "gguf"), ("i2_s", "safetensors")])
def test_converter_output_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qtype: str, to: str) -> None:
    """The converter writes the same bytes with the Go casts as with the numpy casts it used before, and with
    the float tensors converted whole as by slices of rows (``CHUNK_BYTES``)."""
    d = tmp_path / "model"
    d.mkdir()
    make_checkpoint(d, 1 << 20, seed=3)

    def run(name: str) -> str:
        out = tmp_path / f"{name}.{to}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            convert_checkpoint(d, out, qtype=qtype, to=to, threads=2, progress=False, tokenizer=False, force=True)
        return hashlib.sha256(out.read_bytes()).hexdigest()

    ours = run("go")
    monkeypatch.setattr(_convert, "to_float32", _numpy_f32)
    monkeypatch.setattr(_convert, "to_float16", _numpy_f16)
    monkeypatch.setattr(_convert, "CHUNK_BYTES", 1000)  # the embedding (512 KiB) in slices of 1 or 2 rows
    assert run("numpy") == ours


@pytest.mark.parametrize("block_size", [None, 128, 7])
@pytest.mark.parametrize("method", ["absmean", "absmax"])
@pytest.mark.parametrize("n", [1, 129, 70_001, (1 << 20) + 5])
def test_quantize_bf16(threads: int, block_size: int | None, method: str, n: int) -> None:
    """The converter's bfloat16 quantization: the tensor quantize_i2s makes of the widened values, bit for bit."""
    rng = np.random.default_rng(n * 7 + (block_size or 0) + threads)
    v = rng.standard_normal(n).astype(np.float32) * np.float32(0.02)
    bits = (v.view(np.uint32) >> 16).astype(np.uint16)
    bits[rng.integers(0, n, n // 100)] = rng.integers(0, 1 << 16, n // 100).astype(np.uint16) & 0x7F7F  # finite
    got = _convert._quantize_bf16(bits, block_size, method)
    want = bitnet_go.quantize_i2s(_numpy_f32(bits, "BF16"), block_size=block_size, method=method, device="cpu")
    assert np.array_equal(got.packed, want.packed)
    assert np.array_equal(got.scales.view(np.uint32), want.scales.view(np.uint32))
    assert got.shape == want.shape and got.block_size == want.block_size and got.method == want.method


@pytest.mark.parametrize("bad", [0x7F80, 0xFFC0, 0x7F81])
def test_quantize_bf16_non_finite(bad: int) -> None:
    bits = np.full(300, 0x3C00, np.uint16)
    bits[123] = bad
    with pytest.raises(ValueError) as want:
        bitnet_go.quantize_i2s(_numpy_f32(bits, "BF16"), device="cpu")
    with pytest.raises(ValueError) as got:
        _convert._quantize_bf16(bits, None, "absmean")
    assert str(got.value) == str(want.value) and "123" in str(got.value)
    with pytest.raises(ValueError, match="at least one element"):
        _convert._quantize_bf16(np.empty(0, np.uint16), None, "absmean")
