"""quantize_i2s: parity with the PyTorch reference, round trips, bad input,
threads, memory.

Without torch the tests marked ``needs("torch")`` skip (conftest.py) and the rest runs.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import subprocess
import sys
import threading
import zlib

import numpy as np
import pytest

import bitnet_go
from bitnet_go._core import descriptor, ops
from bitnet_go._core import lib as _lib

try:
    import torch

    from torch_ref import ref_pack, ref_quantize  # imports torch
except ImportError:  # the tests marked needs("torch") skip
    torch = None

BLOCKS = [None, 32, 64, 128, 256, 96, 100]
SIZES = [1, 127, 128, 129, 4095, 1_000_003]
SHAPES = [(7,), (3, 5), (2, 3, 64), (2, 3, 4, 33), (4, 1, 1, 129)]


def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Normal data with per-element magnitudes spread over many binades, some exact zeros."""
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.exp2(rng.integers(-8, 8, size=shape)).astype(np.float32)
    x[rng.random(shape) < 0.05] = 0
    return x


def check_against_reference(x: np.ndarray, block_size: int | None, method: str) -> bitnet_go.TernaryTensor:
    t = bitnet_go.quantize_i2s(x, block_size=block_size, method=method)
    q_ref, s_ref = ref_quantize(torch.from_numpy(x), block_size, method)
    assert t.shape == x.shape and t.block_size == block_size and t.method == method and t.qtype == "i2_s"
    assert t.scales.dtype == np.float32 and t.packed.dtype == np.uint8
    np.testing.assert_array_equal(t.scales.view(np.uint32), s_ref.numpy().view(np.uint32))
    np.testing.assert_array_equal(t.values().reshape(-1), q_ref.numpy())
    np.testing.assert_array_equal(t.packed, ref_pack(q_ref).numpy())
    return t


@pytest.mark.needs("torch")
@pytest.mark.parametrize("method", ["absmean", "absmax"])
@pytest.mark.parametrize("block_size", BLOCKS)
@pytest.mark.parametrize("n", SIZES)
def test_parity_sizes(n: int, block_size: int | None, method: str) -> None:
    seed = zlib.crc32(f"{n}/{block_size}/{method}".encode())  # stable across runs: replayable
    check_against_reference(draw(np.random.default_rng(seed), (n,)), block_size, method)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", ["absmean", "absmax"])
def test_parity_shapes_and_seeds(shape: tuple[int, ...], method: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for block_size in BLOCKS:
        check_against_reference(draw(rng, shape), block_size, method)


@pytest.mark.needs("torch")
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_parity_independent_of_threads(threads: int) -> None:
    bitnet_go.set_num_threads(threads)
    rng = np.random.default_rng(100 + threads)
    for block_size in (None, 96, 4096):
        check_against_reference(draw(rng, (300_001,)), block_size, "absmean")


@pytest.mark.needs("torch")
@pytest.mark.parametrize("method", ["absmean", "absmax"])
def test_all_zero_blocks(method: str) -> None:
    x = np.zeros(1000, np.float32)
    x[500:600] = np.random.default_rng(1).standard_normal(100, dtype=np.float32)
    t = check_against_reference(x, 100, method)
    eps = np.float32(1e-5 if method == "absmean" else 1e-8)
    assert (t.scales[:5] == eps).all() and (t.scales[6:] == eps).all()
    assert (t.values()[:500] == 0).all()


@pytest.mark.needs("torch")
def test_absmax_ties_at_half() -> None:
    # scale = 2; +-1 sit exactly at +-0.5 and stay 0; the next floats up become +-1.
    up = np.nextafter(np.float32(1), np.float32(2))
    x = np.array([2, 1, -1, up, -up, 0.5, -2], np.float32)
    t = check_against_reference(x, None, "absmax")
    assert t.values().tolist() == [1, 0, 0, 1, -1, 0, -1]


@pytest.mark.needs("torch")
def test_absmean_ties_round_half_even() -> None:
    x = np.array([0.5, -0.5, 1.5, -1.5, 1, -1], np.float32)  # mean|x| = 1
    t = check_against_reference(x, None, "absmean")
    assert t.values().tolist() == [0, 0, 1, -1, 1, -1]
    assert t.scales.tolist() == [1.0]


def test_golden_vectors() -> None:
    """The vectors in tests_go/testdata, also checked by the Go tests."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "tests_go" / "testdata" / "i2s_golden.json"
    cases = json.loads(path.read_text())
    assert len(cases) >= 5
    for c in cases:
        x = np.array(c["x"], np.float64).astype(np.float32)
        t = bitnet_go.quantize_i2s(x, block_size=c["block_size"], method=c["method"])
        assert t.packed.tobytes().hex() == c["packed_hex"], c["name"]
        assert [int(v) for v in t.scales.view(np.uint32)] == c["scale_bits"], c["name"]


# ---- round trips ---------------------------------------------------------------


@pytest.mark.needs("torch")
@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 1000, 4097])
def test_pack_unpack_round_trip(n: int) -> None:
    rng = np.random.default_rng(n)
    v = rng.integers(-1, 2, size=n).astype(np.int8)
    packed = np.empty(-(-n // 128) * 32, np.uint8)
    ops.pack("i2_s", v, 1, packed)
    np.testing.assert_array_equal(packed, ref_pack(torch.from_numpy(v)).numpy())
    back = np.empty(n, np.int8)
    ops.unpack("i2_s", packed, 1, back)
    np.testing.assert_array_equal(back, v)


@pytest.mark.parametrize("shape", [(1,), (128,), (129,), (64, 100), (3, 4, 5)])
def test_bitnet_cpp_bytes_round_trip(shape: tuple[int, ...]) -> None:
    x = draw(np.random.default_rng(len(shape)), shape)
    t = bitnet_go.quantize_i2s(x)
    data = t.to_bitnet_cpp_bytes()
    n = int(np.prod(shape))
    assert len(data) == -(-n // 128) * 32 + 32
    assert data[: t.packed.size] == t.packed.tobytes()
    assert np.frombuffer(data[t.packed.size : t.packed.size + 4], "<f4")[0] == t.scales[0]
    assert data[t.packed.size + 4 :] == bytes(28)
    u = bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data, shape)
    assert u.shape == shape and u.method is None and u.block_size is None
    np.testing.assert_array_equal(u.values(), t.values())
    np.testing.assert_array_equal(u.dequantize(), t.dequantize())
    assert bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(bytearray(data), list(shape)).shape == shape
    assert bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(np.frombuffer(data, np.uint8), shape).shape == shape


def test_from_bitnet_cpp_bytes_bad_input() -> None:
    t = bitnet_go.quantize_i2s(np.ones(200, np.float32))
    data = t.to_bitnet_cpp_bytes()
    with pytest.raises(ValueError, match="must have 96 bytes"):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data[:-1], (200,))
    with pytest.raises(ValueError, match="overflows"):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data, (2**40, 2**40))
    with pytest.raises(ValueError, match="negative"):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data, (-200,))
    with pytest.raises(TypeError):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes("text", (200,))
    with pytest.raises(TypeError):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(data, (200.0,))
    bad = bytearray(data)
    bad[0] |= 0xC0  # code 3
    with pytest.raises(ValueError, match="code 3"):
        bitnet_go.TernaryTensor.from_bitnet_cpp_bytes(bytes(bad), (200,))
    blocked = bitnet_go.quantize_i2s(np.ones(256, np.float32), block_size=128)
    with pytest.raises(ValueError, match="per-tensor"):
        blocked.to_bitnet_cpp_bytes()


# ---- the TernaryTensor object ---------------------------------------------------


def test_ternary_tensor_api() -> None:
    x = draw(np.random.default_rng(5), (10, 30))
    t = bitnet_go.quantize_i2s(x, block_size=64)
    assert t.size == 300 and t.ndim == 2
    assert t.nbytes == t.packed.nbytes + t.scales.nbytes == 96 + 5 * 4
    assert t.bits_per_weight == pytest.approx(t.nbytes * 8 / 300)
    v = t.values()
    assert v.dtype == np.int8 and v.shape == (10, 30) and set(np.unique(v)) <= {-1, 0, 1}
    expect = v.reshape(-1).astype(np.float32) * np.repeat(t.scales, 64)[:300]
    np.testing.assert_array_equal(t.dequantize(), expect.reshape(10, 30))
    np.testing.assert_array_equal(bitnet_go.dequantize(t), t.dequantize())
    r = repr(t)
    assert "i2_s" in r and "(10, 30)" in r and "block_size=64" in r
    with pytest.raises(AttributeError):
        t.scales = None
    with pytest.raises(AttributeError):
        del t.shape
    with pytest.raises(ValueError):
        t.packed[0] = 0
    with pytest.raises(ValueError):
        t.scales[0] = 0
    with pytest.raises(TypeError):
        bitnet_go.TernaryTensor()
    with pytest.raises(TypeError):
        bitnet_go.dequantize(x)
    u = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(u.values(), v)
    assert u.block_size == 64 and u.method == "absmean"


@pytest.mark.needs("torch")
def test_input_kinds() -> None:
    rng = np.random.default_rng(9)
    x = draw(rng, (64, 48))
    base = bitnet_go.quantize_i2s(x, block_size=32)

    def same(other: object) -> None:
        t = bitnet_go.quantize_i2s(other, block_size=32)
        np.testing.assert_array_equal(t.packed, base.packed)
        np.testing.assert_array_equal(t.scales, base.scales)

    same(x.tolist())
    same(torch.from_numpy(x))
    same(torch.from_numpy(x).requires_grad_(True))
    same(x.astype(np.float64))
    same(np.asfortranarray(x))  # non-contiguous: copied once
    same(x.T.copy().T)
    strided = np.zeros((64, 96), np.float32)
    strided[:, ::2] = x
    same(strided[:, ::2])
    # integer, bool, float16, bfloat16 inputs are cast to float32
    ints = rng.integers(-3, 4, size=100)
    np.testing.assert_array_equal(
        bitnet_go.quantize_i2s(ints).packed, bitnet_go.quantize_i2s(ints.astype(np.float32)).packed
    )
    assert bitnet_go.quantize_i2s(np.array([True, False])).values().tolist() == [1, 0]
    h = torch.randn(300, dtype=torch.bfloat16)
    np.testing.assert_array_equal(bitnet_go.quantize_i2s(h).packed, bitnet_go.quantize_i2s(h.float().numpy()).packed)
    assert bitnet_go.quantize_i2s(np.float32(3.0)).shape == ()


# ---- bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"block_size": 0}, ValueError, "block_size must be >= 1"),
        ({"block_size": -3}, ValueError, "block_size must be >= 1"),
        ({"block_size": 2.0}, TypeError, "block_size must be an int"),
        ({"block_size": True}, TypeError, "block_size must be an int"),
        ({"block_size": "8"}, TypeError, "block_size must be an int"),
        ({"block_size": 2**70}, ValueError, "block_size must be <="),
        ({"method": "mean"}, ValueError, "method must be one of"),
        ({"method": None}, ValueError, "method must be one of"),
        ({"device": "tpu"}, ValueError, "device must be"),
        ({"device": 0}, TypeError, "device must be a str"),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        bitnet_go.quantize_i2s(np.ones(10, np.float32), **kwargs)


@pytest.mark.parametrize(
    ("x", "exc", "match"),
    [
        (np.zeros(0, np.float32), ValueError, "at least one element"),
        (np.zeros((3, 0)), ValueError, "at least one element"),
        ([], ValueError, "at least one element"),
        (np.ones(4, np.complex64), TypeError, "real numeric"),
        pytest.param(
            None if torch is None else torch.ones(4, dtype=torch.complex64),
            TypeError,
            "complex",
            id="x4-TypeError-complex",
            marks=pytest.mark.needs("torch"),
        ),
        (np.array([1, "a"], dtype=object), TypeError, "real numeric"),
        (["a", "b"], TypeError, "real numeric"),
        (np.broadcast_to(np.float32(1), (2**30, 2**30 + 1)), ValueError, "elements, more than"),
    ],
)
def test_bad_x(x: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        bitnet_go.quantize_i2s(x)


@pytest.mark.parametrize("block_size", [None, 3, 128])
@pytest.mark.parametrize("method", ["absmean", "absmax"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_named_by_index(bad: float, method: str, block_size: int | None) -> None:
    x = np.ones(1000, np.float32)
    x[417] = bad
    x[900] = np.nan
    with pytest.raises(ValueError, match="flat index 417"):
        bitnet_go.quantize_i2s(x, method=method, block_size=block_size)
    with pytest.raises(ValueError, match=r"flat index 417"):
        bitnet_go.quantize_i2s(x.reshape(10, 100), method=method, block_size=block_size)


@pytest.mark.parametrize("method", ["absmean", "absmax"])
def test_non_finite_unchecked_is_documented(method: str) -> None:
    """check_finite=False: NaN -> 0; a block with Inf gets scale Inf and all 0;
    absmean NaN block -> scale NaN, all 0; absmax leaves NaN out of the max."""
    x = np.array([1, -2, 3, 4, np.nan, 8, -4, 2, np.inf, 1, 2, 3], np.float32)
    t = bitnet_go.quantize_i2s(x, block_size=4, method=method, check_finite=False)
    v = t.values()
    assert v[:4].tolist() == ([0, -1, 1, 1] if method == "absmean" else [0, 0, 1, 1])
    assert v[4] == 0
    assert (v[8:] == 0).all() and np.isposinf(t.scales[2])
    if method == "absmean":
        assert np.isnan(t.scales[1]) and (v[4:8] == 0).all()
    else:
        assert t.scales[1] == 8 and v[4:8].tolist() == [0, 1, 0, 0]  # -4/8 is exactly -0.5: 0
    for bs in (None, 5):
        bitnet_go.quantize_i2s(x, block_size=bs, method=method, check_finite=False).dequantize()


def test_abi_validates_its_own_arguments() -> None:
    """The C ABI is public: bad pointers and lengths are errors, never crashes."""
    x = np.ones(300, np.float32)
    packed = np.empty(96, np.uint8)
    scales = np.empty(1, np.float32)

    def run(change: object = None) -> None:
        xt = descriptor.host(x, "float32")
        out = descriptor.host(packed, "i2_s", shape=(300,), scales=scales)
        p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, 0, 1)
        if change is not None:
            change(xt, out, p)  # type: ignore[operator]
        _lib.call("bng_quantize", ctypes.byref(xt), ctypes.byref(out), ctypes.byref(p))

    def shape(t: descriptor.Tensor, *dims: int) -> None:
        arr = (ctypes.c_int64 * len(dims))(*dims)
        t._keep.append(arr)
        t.shape, t.ndim = arr, len(dims)

    run()
    cases = [
        (lambda xt, out, p: setattr(xt, "data", None), "x is NULL"),
        (lambda xt, out, p: setattr(xt, "nbytes", -1), "non-negative"),
        (lambda xt, out, p: setattr(xt, "nbytes", 2**62 + 1), "overflows"),
        (lambda xt, out, p: (shape(xt, 0), shape(out, 0), setattr(xt, "nbytes", 0)), "at least one element"),
        (lambda xt, out, p: setattr(out, "block_size", -5), "block_size"),
        (lambda xt, out, p: setattr(p, "method", 9), "method"),
        (lambda xt, out, p: setattr(out, "data", None), "out is NULL"),
        (lambda xt, out, p: setattr(out, "nbytes", 95), "packed must have 96"),
        (lambda xt, out, p: setattr(out, "n_scales", 2), "scales must have 1"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            run(change)
    # status without an error buffer still comes back
    xt = descriptor.host(x, "float32")
    xt.data = None
    out = descriptor.host(packed, "i2_s", shape=(300,), scales=scales)
    p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, 0, 1)
    quantize = _lib.function("bng_quantize")  # untyped (pointers only): the capacity as a c_int64
    assert quantize(ctypes.byref(xt), ctypes.byref(out), ctypes.byref(p), None, ctypes.c_int64(0)) == 1
    with pytest.raises(ValueError, match="need"):
        _lib.call("bng_cpu_features", ctypes.create_string_buffer(4), 4)
    with pytest.raises(ValueError, match=r"n \(the number of threads\) must be in \[1, 1024\]"):
        _lib.call("bng_set_num_threads", 0)


# ---- threads, memory, runtime -----------------------------------------------------


def test_concurrent_python_threads_match_serial() -> None:
    rng = np.random.default_rng(42)
    inputs = [draw(rng, (int(rng.integers(1, 200_000)),)) for _ in range(8)]
    blocks = [None, 32, 96, 128, None, 100, 256, 64]
    serial = [bitnet_go.quantize_i2s(x, block_size=b) for x, b in zip(inputs, blocks)]
    results: list = [None] * 8
    errors: list = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                results[i] = bitnet_go.quantize_i2s(inputs[i], block_size=blocks[i])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for a, b in zip(serial, results):
        np.testing.assert_array_equal(a.packed, b.packed)
        np.testing.assert_array_equal(a.scales, b.scales)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc (Linux only)")
def test_many_calls_do_not_leak() -> None:
    x = draw(np.random.default_rng(0), (4096,))
    for _ in range(500):
        bitnet_go.quantize_i2s(x, block_size=128).values()
    before = _rss_bytes()
    for _ in range(10_000):
        bitnet_go.quantize_i2s(x, block_size=128)
    after = _rss_bytes()
    assert after - before < 10 * 2**20, f"RSS grew by {(after - before) / 2**20:.1f} MiB"


def test_threads_setting() -> None:
    bitnet_go.set_num_threads(3)
    assert bitnet_go.get_num_threads() == 3
    for bad, exc in [(0, ValueError), (-1, ValueError), (1.5, TypeError), (None, TypeError), (10**6, ValueError)]:
        with pytest.raises(exc):
            bitnet_go.set_num_threads(bad)
    assert bitnet_go.get_num_threads() == 3


def _run_python(code: str, **env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_env_threads_and_import_from_any_directory() -> None:
    assert _run_python("import bitnet_go; print(bitnet_go.get_num_threads())", BITNET_GO_NUM_THREADS="5") == "5"


def test_cpu_features_and_disable() -> None:
    f = bitnet_go.cpu_features()
    for key in ("avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avxvnni"):
        assert isinstance(f[key], bool)
    assert f["family"] in ("avx512vnni", "avx512", "avx2", "generic")
    assert f["kernels"]["quantize_i2s"] in ("avx512vnni", "avx512", "avx2", "generic")
    code = "import bitnet_go, json; print(json.dumps(bitnet_go.cpu_features()))"
    import json

    off = json.loads(_run_python(code, BITNET_GO_DISABLE="avx2,bogus"))
    assert off["disabled"] == ["avx2"] and off["disable_ignored"] == ["bogus"]
    assert off["family"] == "generic" and set(off["kernels"].values()) == {"generic"}


def test_version() -> None:
    assert isinstance(bitnet_go.__version__, str) and bitnet_go.__version__.count(".") >= 2


# A TernaryTensor (TL1, shape (2, 3), block_size 4, absmean) pickled (protocol 2) by the version before
# QuantizedTensor existed: pickles name bitnet_go._ternary._rebuild and its six fields.
OLD_PICKLE = (
    b"\x80\x02cbitnet_go._ternary\n_rebuild\nq\x00(X\x03\x00\x00\x00tl1q\x01K\x02K\x03\x86q\x02K\x04X\x07\x00\x00"
    b"\x00absmeanq\x03cnumpy._core.multiarray\n_reconstruct\nq\x04cnumpy\nndarray\nq\x05K\x00\x85q\x06c_codecs\n"
    b"encode\nq\x07X\x01\x00\x00\x00bq\x08X\x06\x00\x00\x00latin1q\t\x86q\nRq\x0b\x87q\x0cRq\r(K\x01K\x02\x85q\x0e"
    b"cnumpy\ndtype\nq\x0fX\x02\x00\x00\x00u1q\x10\x89\x88\x87q\x11Rq\x12(K\x03X\x01\x00\x00\x00|q\x13NNNJ\xff\xff"
    b"\xff\xffJ\xff\xff\xff\xffK\x00tq\x14b\x89h\x07X\x02\x00\x00\x00\x17\x17q\x15h\t\x86q\x16Rq\x17tq\x18bh\x04h"
    b"\x05K\x00\x85q\x19h\x0b\x87q\x1aRq\x1b(K\x01K\x02\x85q\x1ch\x0fX\x02\x00\x00\x00f4q\x1d\x89\x88\x87q\x1eRq"
    b"\x1f(K\x03X\x01\x00\x00\x00<q NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tq!b\x89h\x07X\n\x00\x00\x00ff\xc2"
    b"\x86?33\xc2\xb3>q\"h\t\x86q#Rq$tq%btq&Rq'."
)


def test_pickles_of_the_previous_format_load() -> None:
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip("the pickle was written with numpy 2 (numpy._core)")
    t = pickle.loads(OLD_PICKLE)
    assert type(t) is bitnet_go.TernaryTensor
    assert (t.qtype, t.shape, t.block_size, t.method) == ("tl1", (2, 3), 4, "absmean")
    assert t.values().tolist() == [[1, 0, -1], [1, 0, -1]]
    assert t.scales.tolist() == [np.float32(1.05), np.float32(0.35)]
    new = bitnet_go.quantize_i2s(np.array([[0.9, -0.1, -2.0], [1.2, 0.0, -0.7]], np.float32), block_size=4)
    assert pickle.dumps(new.to("tl1"), protocol=2) == OLD_PICKLE  # and the format is unchanged


def test_ternary_tensor_is_a_quantized_tensor() -> None:
    t = bitnet_go.quantize_i2s(np.linspace(-1, 1, 300, dtype=np.float32), block_size=128)
    assert isinstance(t, bitnet_go.QuantizedTensor) and isinstance(t, bitnet_go.TernaryTensor)
    assert t.zero_points is None and t.axis is None and t.device == "cpu"
    np.testing.assert_array_equal(bitnet_go.QuantizedTensor.dequantize(t), t.dequantize())
    with pytest.raises(TypeError, match="not constructed directly"):
        bitnet_go.QuantizedTensor()
    with pytest.raises(AttributeError, match="immutable"):
        t.axis = 0


def test_a_missing_export_fails_only_when_called() -> None:
    """A library without some export still loads; calling that export names it (and the ABI)."""
    code = (
        "import bitnet_go\n"
        "from bitnet_go._core import lib\n"
        "lib.declare({'bng_no_such_export': (lib.I32, [], True)})\n"
        "assert bitnet_go.get_num_threads() >= 1\n"
        "try:\n"
        "    lib.call('bng_no_such_export')\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "has no export bng_no_such_export (C ABI version" in out, out
