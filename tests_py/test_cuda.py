"""bitnet_go.cuda: the CUDA path of quantize_i2s.

Two kinds of tests:

- always run (CI has no GPU): the library imports and answers without a
  driver or GPU; device="cuda" then raises RuntimeError saying what is
  missing; the embedded PTX has its entry points; the C ABI checks its
  arguments before touching the driver. The no-GPU behaviour is also checked
  on GPU machines, in a subprocess with CUDA_VISIBLE_DEVICES="".
- GPU tests (marked ``gpu``): bit-exact against the CPU path for numpy,
  torch-CUDA and CuPy input, stream ordering, non-finite input, device
  checks, leaks, threads, out-of-memory. They skip only when no CUDA GPU is
  found, and the skip message says why (CuPy tests also skip without CuPy).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
import bitnet_go.cuda as cuda
from bitnet_go import diagnostics
from bitnet_go._core import descriptor, ops
from bitnet_go._core import lib as _lib

REASON = cuda.unavailable_reason()
gpu = pytest.mark.skipif(REASON is not None, reason=f"no CUDA GPU found, GPU test not run: {REASON}")

ENTRIES = [
    "bng_i2s_fused_absmean",
    "bng_i2s_fused_absmax",
    "bng_i2s_partials_absmean",
    "bng_i2s_partials_absmax",
    "bng_i2s_finish_absmean",
    "bng_i2s_finish_absmax",
    "bng_i2s_encode",
    "bng_i2s_unpack",
    "bng_i2s_dequantize",
    "bng_i2s_warp_absmean",
    "bng_i2s_warp_absmax",
    "bng_conv_absmax",
    "bng_conv_quant",
    "bng_conv_igemm",
    "bng_linear_gemv",
    "bng_conv_fgemm",
    "bng_conv_check_codes",
    "bng_linear_gemv_any",
    "bng_conv_igemm_mma",
    "bng_linear_fgemv",
]


def _python(code: str, **env: str) -> str:
    e = dict(os.environ, **env)
    e["PYTHONPATH"] = os.pathsep.join([str(Path(bitnet_go.__file__).parent.parent), e.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---------------------------------------------------------------- always


def test_import_and_status_without_a_visible_gpu() -> None:
    # CUDA_VISIBLE_DEVICES="" hides every GPU: on a GPU machine the driver
    # loads and finds none, elsewhere the driver is missing. Either way
    # import works, nothing is available, and device="cuda" says why.
    out = _python(
        "import json, numpy as np, bitnet_go, bitnet_go.cuda as c\n"
        "r = [c.is_available(), c.device_count(), c.unavailable_reason()]\n"
        "try:\n"
        "    bitnet_go.quantize_i2s(np.ones(4, np.float32), device='cuda')\n"
        "    r.append('no error')\n"
        "except RuntimeError as e:\n"
        "    r.append(str(e))\n"
        "c.empty_cache()\n"
        "print(json.dumps(r))\n",
        CUDA_VISIBLE_DEVICES="",
    )
    available, count, reason, err = json.loads(out)
    assert (available, count) == (False, 0)
    assert reason.startswith("cuda: ") and ("no NVIDIA driver" in reason or "no CUDA GPU" in reason), reason
    assert err == reason


def test_status_is_consistent() -> None:
    assert cuda.is_available() == (cuda.device_count() > 0) == (REASON is None)
    info = cuda.ptx_info()
    assert set(ENTRIES) <= set(info["entries"])
    cuda.empty_cache()
    assert set(cuda._pool_stats()) >= {"idle_buffers", "in_use_buffers", "idle_streams"}


def test_without_gpu_every_call_says_why() -> None:
    if REASON is None:
        pytest.skip("a CUDA GPU is present: covered by test_import_and_status_without_a_visible_gpu")
    assert "libcuda.so.1" in REASON or "no CUDA GPU" in REASON
    x = np.ones(300, np.float32)
    for call in (
        lambda: bitnet_go.quantize_i2s(x, device="cuda"),
        lambda: bitnet_go.quantize_i2s(x, device="cuda:1", block_size=128),
        lambda: cuda.device_name(0),
        lambda: cuda.memory_info(),
    ):
        with pytest.raises(RuntimeError) as e:
            call()
        assert str(e.value) == REASON
    assert cuda.device_count() == 0
    cuda.empty_cache()  # no-op, no error


def test_embedded_ptx() -> None:
    info = cuda.ptx_info()
    assert info["entries"] == ENTRIES
    assert info["target"] == "sm_75"
    major, minor = (int(v) for v in info["version"].split("."))
    assert (major, minor) <= (8, 4), "PTX newer than ISA 8.4 fails on drivers before R550"
    assert "NVRTC 12.4" in info["compiler"] and "--fmad=false" in info["compiler"]
    src = Path(__file__).resolve().parents[1] / "cuda" / "i2s.cu"
    if src.is_file():
        import hashlib

        assert info["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest(), "stale PTX: run `make ptx`"


def test_library_does_not_link_libcuda() -> None:
    tool = shutil.which("readelf")
    if tool is None:
        pytest.skip("readelf not found")
    out = subprocess.run([tool, "-d", str(_lib.library_path())], capture_output=True, text=True, check=True).stdout
    needed = [ln for ln in out.splitlines() if "NEEDED" in ln]
    assert needed and not any("libcuda" in ln or "libcudart" in ln for ln in needed), needed


def test_device_argument_errors() -> None:
    x = np.ones(10, np.float32)
    with pytest.raises(ValueError, match="device must be"):
        bitnet_go.quantize_i2s(x, device="cuda:x")
    with pytest.raises(ValueError, match="device must be"):
        bitnet_go.quantize_i2s(x, device="gpu")
    with pytest.raises(TypeError, match="device must be a str"):
        bitnet_go.quantize_i2s(x, device=0)
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cuda:N'"):
        cuda.device_name("cpu")
    with pytest.raises(TypeError):
        cuda.memory_info(1.5)
    with pytest.raises(ValueError, match=">= 0"):
        cuda.device_name(-1)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        # dev, x, n, block_size, method, check, packed, packed_len, scales, n_scales, work, work_len, stream
        ((0, 0, 10, 0, 0, 1, 256, 32, 256, 1, 256, 256, 0), "x is NULL"),
        ((0, 256, 10, 0, 0, 1, 256, 31, 256, 1, 256, 256, 0), "packed must have 32 bytes"),
        ((0, 256, 10, 4, 0, 1, 256, 32, 256, 1, 256, 256, 0), "scales must have 3 entries"),
        ((0, 256, 10, 0, 9, 1, 256, 32, 256, 1, 256, 256, 0), "method"),
        ((0, 256, 10, 0, 0, 1, 256, 32, 256, 1, 256, 8, 0), "work must have at least 256"),
        ((0, 258, 10, 0, 0, 1, 256, 32, 256, 1, 256, 256, 0), "aligned"),
        ((0, 256, 0, 0, 0, 1, 256, 0, 256, 1, 256, 256, 0), "at least one element"),
    ],
)
def test_abi_checks_device_descriptors_before_the_driver(args: tuple[int, ...], match: str) -> None:
    """bng_quantize on CUDA descriptors, every field given as the old positional export took it."""
    dev, x, n, bs, method, check, packed, plen, scales, nb, work, ws, stream = args
    with pytest.raises(ValueError, match=match):
        p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, method, check)
        p.work, p.work_len = work or None, ws
        xt = descriptor.device(x, 4 * n, "float32", (n,), dev, stream=stream)
        out = descriptor.device(
            packed, plen, "i2_s", (n,), dev, scales=scales, n_scales=nb, block_size=bs, stream=stream
        )
        _lib.call("bng_quantize", ctypes.byref(xt), ctypes.byref(out), ctypes.byref(p))


def test_abi_checks_arguments_before_the_driver() -> None:
    with pytest.raises(ValueError, match="x is NULL"):
        xt = descriptor.host(np.empty(10, np.float32), "float32")
        xt.data = None
        out = descriptor.host(np.empty(32, np.uint8), "i2_s", shape=(10,), scales=np.empty(1, np.float32))
        p = descriptor.QuantizeParams(descriptor.QUANTIZE_V1, 0, 1, descriptor.CUDA, 0)
        _lib.call("bng_quantize", ctypes.byref(xt), ctypes.byref(out), ctypes.byref(p))
    with pytest.raises(ValueError, match="at least one element"):
        ops.cuda_workspace_size(0, None)


def test_plans() -> None:
    for bs in (32, 64, 96, 100, 128, 256, 1024, 4096):
        assert diagnostics.cuda_plan(1 << 24, bs)["passes"] == 1, bs
    assert diagnostics.cuda_plan(4096, None)["passes"] == 1
    assert diagnostics.cuda_plan(4097, None)["passes"] == 2
    assert diagnostics.cuda_plan(1 << 24, 1000)["passes"] == 2


def test_benchmark_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    if REASON is None:
        pytest.skip("a CUDA GPU is present: the benchmark is run by `bench quantize --device cuda`, not by tests")
    import argparse

    from bitnet_go.bench.quantize_cuda import run_cuda

    assert run_cuda(argparse.Namespace(repeat=3, method="absmean")) == []
    assert "no CUDA GPU available" in capsys.readouterr().out


# ---------------------------------------------------------------- fake driver

FAKE_SCRIPT = r"""
import ctypes, json, threading
import numpy as np
import bitnet_go, bitnet_go.cuda as c
from bitnet_go import diagnostics
from bitnet_go._core import lib as _lib
from bitnet_go._core import ops
from bitnet_go._core.ops import cuda_workspace_size, num_blocks
from bitnet_go._ternary import METHODS, packed_len

fake = ctypes.CDLL("libcuda.so.1")
fake.fake_alloc.restype, fake.fake_alloc.argtypes = ctypes.c_uint64, [ctypes.c_size_t]
fake.fake_free.argtypes = [ctypes.c_uint64]
fake.fake_live.restype = ctypes.c_longlong
assert c.is_available() and c.device_count() == 1 and c.unavailable_reason() is None
assert c.device_name(0) == "bitnet_go fake CUDA device (CPU emulator)" and c.driver_version() == 13000
total = c.memory_info(0)[1]
rng = np.random.default_rng(1)

def same(t, r, what):
    assert isinstance(t.packed, np.ndarray), what
    assert t.packed.tobytes() == r.packed.tobytes(), what
    assert t.scales.view(np.uint32).tobytes() == r.scales.view(np.uint32).tobytes(), what

# host input
for n, bs, m in [(1, None, "absmean"), (300, None, "absmax"), (5000, None, "absmean"), (20001, 128, "absmean"),
                 (20001, 96, "absmax"), (9000, 1000, "absmean"), (4000, 3, "absmax"), (12345, 33, "absmean")]:
    x = rng.standard_normal(n, dtype=np.float32)
    same(bitnet_go.quantize_i2s(x, block_size=bs, method=m, device="cuda"),
         bitnet_go.quantize_i2s(x, block_size=bs, method=m), (n, bs, m))
x = rng.standard_normal((30, 70)).T  # float64, non-contiguous: converted on the host
same(bitnet_go.quantize_i2s(x, device="cuda:0"), bitnet_go.quantize_i2s(x), "float64")

# non-finite: the CPU path's message; unchecked: the CPU path's result
x = rng.standard_normal(9000, dtype=np.float32)
x[7000], x[8000] = np.nan, np.inf
for bs in (None, 128):
    msgs = []
    for dev in ("cpu", "cuda"):
        try:
            bitnet_go.quantize_i2s(x, block_size=bs, device=dev)
        except ValueError as e:
            msgs.append(str(e))
    assert len(msgs) == 2 and msgs[0] == msgs[1] and "flat index 7000" in msgs[0], msgs
    same(bitnet_go.quantize_i2s(x, block_size=bs, check_finite=False, device="cuda"),
         bitnet_go.quantize_i2s(x, block_size=bs, check_finite=False), "unchecked")
try:
    bitnet_go.quantize_i2s(x, device="cuda:1")
    raise AssertionError("cuda:1 accepted")
except ValueError as e:
    assert "device index 1 is out of range" in str(e), e

# device pointers through the C ABI: quantize, values, dequantize, timers
for n, bs, m in [(5000, None, "absmean"), (20001, 128, "absmax"), (9000, 1000, "absmean")]:
    x = rng.standard_normal(n, dtype=np.float32)
    ref = bitnet_go.quantize_i2s(x, block_size=bs, method=m)
    plen, nb, ws = packed_len(n), num_blocks(n, bs), cuda_workspace_size(n, bs)
    xd, pd, sd, wd = fake.fake_alloc(4 * n), fake.fake_alloc(plen), fake.fake_alloc(4 * nb), fake.fake_alloc(ws)
    qd, fd = fake.fake_alloc(n), fake.fake_alloc(4 * n)
    ctypes.memmove(xd, x.ctypes.data, 4 * n)
    ops.cuda_quantize(0, xd, n, bs, m, True, pd, plen, sd, nb, wd, ws, 0)
    assert ctypes.string_at(pd, plen) == ref.packed.tobytes()
    assert ctypes.string_at(sd, 4 * nb) == ref.scales.tobytes()
    ops.cuda_unpack(0, pd, plen, qd, n, 0)
    assert ctypes.string_at(qd, n) == ref.values().tobytes()
    ops.cuda_dequantize(0, pd, plen, bs, sd, nb, fd, n, 0)
    assert ctypes.string_at(fd, 4 * n) == ref.dequantize().tobytes()
    ms = diagnostics.request("cuda_time_quantize", dev=0, x=xd, n=n, block_size=bs or 0, method=METHODS[m], packed=pd,
                             packed_len=plen, scales=sd, n_scales=nb, work=wd, work_len=ws, stream=0, repeat=2)["ms"]
    assert ms >= 0
    ms = diagnostics.request("cuda_time_copy", dev=0, dst=fd, src=xd, nbytes=4 * n, stream=0, repeat=2)["ms"]
    assert ms >= 0 and ctypes.string_at(fd, 4 * n) == x.tobytes()
    x[n // 2] = np.nan
    ctypes.memmove(xd, x.ctypes.data, 4 * n)
    try:
        ops.cuda_quantize(0, xd, n, bs, m, True, pd, plen, sd, nb, wd, ws, 0)
        raise AssertionError("NaN accepted")
    except ValueError as e:
        want = f"x contains a non-finite value (NaN) at flat index {n // 2}; pass check_finite=False to quantize anyway"
        assert str(e) == want, e
    host = np.zeros(n, np.float32)
    try:  # host memory passed as a device pointer: refused, not a fault
        ops.cuda_quantize(0, host.ctypes.data, n, bs, "absmean", True, pd, plen, sd, nb, wd, ws, 0)
        raise AssertionError("host pointer accepted")
    except ValueError as e:
        assert "is not CUDA device memory" in str(e), e
    for p in (xd, pd, sd, wd, qd, fd):
        fake.fake_free(p)

# threads
errors = []
def work(k):
    try:
        r = np.random.default_rng(100 + k)
        for _ in range(3):
            x = r.standard_normal(int(r.integers(1, 6000)), dtype=np.float32)
            same(bitnet_go.quantize_i2s(x, block_size=128, device="cuda"), bitnet_go.quantize_i2s(x, block_size=128), k)
    except BaseException as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not errors, errors

# out of device memory: MemoryError with the sizes, then everything still works
hog = fake.fake_alloc(total - (1 << 20))
try:
    bitnet_go.quantize_i2s(np.ones(1 << 19, np.float32), device="cuda")
    raise AssertionError("no MemoryError")
except MemoryError as e:
    assert "cuda: out of memory on cuda:0" in str(e) and "needs 2.2 MiB (2359296 bytes)" in str(e), e
    assert "1.0 MiB free of 1.0 GiB" in str(e), e
fake.fake_free(hog)

# the pool gives everything back
c.empty_cache()
st = c._pool_stats()
assert st["idle_buffers"] == st["in_use_buffers"] == st["idle_streams"] == st["in_use_streams"] == 0, st
assert c.memory_info(0) == (total, total), c.memory_info(0)
assert (fake.fake_live(0), fake.fake_live(1), fake.fake_live(2)) == (0, 0, 0)
print("fake driver: OK")
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = Path(__file__).resolve().parents[1] / "cuda"
    cc = src / "testdata" / "emu" / "fakecuda.cc"
    gxx = shutil.which("g++")
    if not cc.is_file() or gxx is None:
        pytest.skip("the fake CUDA driver needs a source checkout and g++")
    out = tmp_path_factory.mktemp("fakecuda")
    cmd = [gxx, "-shared", "-fPIC", "-std=c++20", "-O1", "-ffp-contract=off", "-fno-strict-aliasing", "-pthread"]
    cmd += ["-I", str(src), "-I", str(cc.parent), str(cc), "-o", str(out / "libcuda.so.1")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return out


def test_whole_stack_on_a_fake_driver(fake_driver: Path) -> None:
    # A fake libcuda.so.1 (host memory, kernels run by the CPU emulator on the
    # real i2s.cu) takes the place of the driver: dlopen, symbols, contexts,
    # module load, launches, pool, copies, errors and Python, end to end.
    path = os.pathsep.join([str(fake_driver), os.environ.get("LD_LIBRARY_PATH", "")])
    out = _python(FAKE_SCRIPT, LD_LIBRARY_PATH=path, CUDA_VISIBLE_DEVICES="0")
    assert "fake driver: OK" in out


# ---------------------------------------------------------------- GPU

SIZES = [1, 2, 31, 32, 33, 127, 128, 129, 1000, 4095, 4096, 4097, 12345, 65539, 1 << 20, (1 << 22) + 5]
BLOCKS = [None, 32, 64, 128, 256, 96, 100, 1000, 33, 1, 3, 5000, 200_000]
METHODS = ["absmean", "absmax"]


def draw(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal(n, dtype=np.float32) * np.float32(rng.uniform(0.01, 10))
    if n > 8:  # a few exact zeros and repeated magnitudes
        x[rng.integers(0, n, size=max(1, n // 50))] = 0
        x[: n // 8] = np.round(x[: n // 8], 1)
    return x


def assert_same(t: bitnet_go.TernaryTensor, ref: bitnet_go.TernaryTensor, what: str = "") -> None:
    h = t.cpu()
    assert isinstance(h.packed, np.ndarray) and h.packed.dtype == np.uint8
    assert (h.qtype, h.shape, h.block_size, h.method) == (ref.qtype, ref.shape, ref.block_size, ref.method), what
    assert h.scales.view(np.uint32).tobytes() == ref.scales.view(np.uint32).tobytes(), f"scales differ {what}"
    if h.packed.tobytes() != ref.packed.tobytes():
        i = int(np.flatnonzero(h.packed != ref.packed)[0])
        pytest.fail(f"packed byte {i} = {h.packed[i]:#04x}, CPU {ref.packed[i]:#04x} {what}")


def cpu(x: np.ndarray, bs: int | None, method: str, check: bool = True) -> bitnet_go.TernaryTensor:
    return bitnet_go.quantize_i2s(x, block_size=bs, method=method, check_finite=check, device="cpu")


@pytest.fixture
def torch_cuda():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.fail(f"bitnet_go sees {cuda.device_count()} CUDA GPU(s) but this torch build sees none")
    return torch


@gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bs", BLOCKS)
def test_numpy_bit_exact(bs: int | None, method: str) -> None:
    seed = 1000 + BLOCKS.index(bs) * 2 + METHODS.index(method)
    rng = np.random.default_rng(seed)
    for n in SIZES:
        x = draw(rng, n)
        t = bitnet_go.quantize_i2s(x, block_size=bs, method=method, device="cuda")
        assert isinstance(t.packed, np.ndarray) and t.device == "cpu"
        assert_same(t, cpu(x, bs, method), f"(n={n}, bs={bs}, {method}, seed={seed})")


@gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bs", [None, 128, 96, 256, 1000])
def test_large_sizes_bit_exact(bs: int | None, method: str) -> None:
    rng = np.random.default_rng(7)
    for n in ((1 << 24) + 3, 64 << 20):
        x = rng.standard_normal(n, dtype=np.float32)
        assert_same(bitnet_go.quantize_i2s(x, block_size=bs, method=method, device="cuda:0"), cpu(x, bs, method))


@gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bs", [None, 32, 64, 96, 128, 256, 1000, 33])
def test_torch_bit_exact(torch_cuda, bs: int | None, method: str) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(2000 + (bs or 0))
    for n in (1, 129, 4097, 65539, (1 << 20) + 7):
        x = draw(rng, n)
        xt = torch.from_numpy(x).cuda()
        t = bitnet_go.quantize_i2s(xt, block_size=bs, method=method)
        assert isinstance(t.packed, torch.Tensor) and t.packed.is_cuda and t.packed.dtype == torch.uint8
        assert t.scales.dtype == torch.float32 and t.device == f"cuda:{xt.device.index}" and t.on_device
        ref = cpu(x, bs, method)
        assert_same(t, ref, f"(n={n}, bs={bs}, {method})")
        v, d = t.values(), t.dequantize()
        assert v.is_cuda and v.dtype == torch.int8 and tuple(v.shape) == ref.shape
        assert np.array_equal(v.cpu().numpy(), ref.values())
        assert d.is_cuda and d.dtype == torch.float32
        assert d.cpu().numpy().view(np.uint32).tobytes() == ref.dequantize().view(np.uint32).tobytes()


@gpu
def test_torch_shapes_dtypes_views(torch_cuda) -> None:
    torch = torch_cuda
    g = torch.Generator(device="cuda").manual_seed(3)
    base = torch.randn(64, 300, device="cuda", generator=g, dtype=torch.float64) * 3
    cases = {
        "float64": base,
        "float16": base.half(),
        "bfloat16": base.bfloat16(),
        "int32": (base * 10).int(),
        "bool": base > 0,
        "transposed": base.float().t(),
        "sliced": base.float()[:, 1::3],
        "requires_grad": base.float().requires_grad_(),
        "4d": base.float().reshape(4, 16, 3, 100),
    }
    for name, x in cases.items():
        t = bitnet_go.quantize_i2s(x, block_size=128)
        ref = cpu(x.detach().float().cpu().numpy(), 128, "absmean")
        assert t.shape == tuple(x.shape)
        assert_same(t, ref, name)


@gpu
def test_torch_errors(torch_cuda) -> None:
    torch = torch_cuda
    with pytest.raises(ValueError, match="at least one element"):
        bitnet_go.quantize_i2s(torch.empty(0, 3, device="cuda"))
    with pytest.raises(TypeError, match="complex"):
        bitnet_go.quantize_i2s(torch.ones(4, dtype=torch.complex64, device="cuda"))
    x = torch.ones(4, device="cuda:0")
    with pytest.raises(ValueError, match="x is on cuda:0 but device='cuda:1'"):
        bitnet_go.quantize_i2s(x, device="cuda:1")
    with pytest.raises(ValueError, match="GPU array but device='cpu'"):
        bitnet_go.quantize_i2s(x, device="cpu")
    n = cuda.device_count()
    with pytest.raises(ValueError, match=f"device index {n} is out of range"):
        bitnet_go.quantize_i2s(np.ones(4, np.float32), device=f"cuda:{n}")


@gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bs", [None, 128, 1000])
def test_non_finite(torch_cuda, bs: int | None, method: str) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(5)
    odd_nan = np.array([0xFFC00123], np.uint32).view(np.float32)[0]  # negative, with a payload
    for bad, at in ((np.nan, 70_000), (odd_nan, 12_345), (np.inf, 5), (-np.inf, 99_999)):
        x = rng.standard_normal(100_000, dtype=np.float32)
        x[at] = bad
        x[at + 1 :: 7000] = np.nan  # later bad values must not win
        with pytest.raises(ValueError) as want:
            cpu(x, bs, method)
        assert f"flat index {at}" in str(want.value)
        for inp in (x, torch.from_numpy(x).cuda()):
            with pytest.raises(ValueError) as got:
                bitnet_go.quantize_i2s(inp, block_size=bs, method=method, device="cuda")
            assert str(got.value) == str(want.value)
            # unchecked: defined, and the same as the CPU path
            t = bitnet_go.quantize_i2s(inp, block_size=bs, method=method, check_finite=False, device="cuda")
            assert_same(t, cpu(x, bs, method, check=False), f"unchecked {bad}")


@gpu
def test_stream_ordering_with_torch(torch_cuda) -> None:
    torch = torch_cuda
    n = 1 << 22
    src = torch.randn(n, device="cuda")
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        # The side stream is busy, then writes x; the quantization, enqueued on
        # the current (side) stream right away, must see the written x.
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(200_000_000)
        else:
            y = torch.randn(4096, 4096, device="cuda")
            for _ in range(20):
                y = y @ y / 64
        x.copy_(src * 3 + 1)
        t = bitnet_go.quantize_i2s(x, block_size=128, check_finite=False)
        v = t.values()
    side.synchronize()
    ref = cpu((src * 3 + 1).cpu().numpy(), 128, "absmean")
    assert_same(t, ref)
    assert np.array_equal(v.cpu().numpy(), ref.values())
    # On the default stream: a tensor made by a torch kernel just before.
    y = torch.randn(n, device="cuda") * 5 - 2
    t = bitnet_go.quantize_i2s(y, method="absmax")
    assert_same(t, cpu(y.cpu().numpy(), None, "absmax"))


@gpu
def test_cuda_array_interface_object(torch_cuda) -> None:
    torch = torch_cuda

    class Wrapped:  # a foreign GPU array: only __cuda_array_interface__ v3
        def __init__(self, t: object) -> None:
            self.t = t
            self.__cuda_array_interface__ = dict(t.__cuda_array_interface__, stream=None)

    x = torch.randn(3000, device="cuda")
    t = bitnet_go.quantize_i2s(Wrapped(x), block_size=100)
    assert isinstance(t.packed, torch.Tensor)
    assert_same(t, cpu(x.cpu().numpy(), 100, "absmean"))


@gpu
def test_cupy_bit_exact() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    rng = np.random.default_rng(9)
    for n, bs in ((1, None), (4097, None), (65539, 128), (100_000, 96), (12345, 1000)):
        x = draw(rng, n)
        xc = cupy.asarray(x)
        t = bitnet_go.quantize_i2s(xc, block_size=bs, method="absmax")
        assert isinstance(t.packed, cupy.ndarray) and t.device == f"cuda:{xc.device.id}"
        ref = cpu(x, bs, "absmax")
        assert_same(t, ref)
        assert np.array_equal(cupy.asnumpy(t.values()), ref.values())
    xd = cupy.asarray(rng.standard_normal((30, 70))).T  # float64, non-contiguous
    assert_same(bitnet_go.quantize_i2s(xd), cpu(cupy.asnumpy(xd), None, "absmean"))


@gpu
def test_tensor_on_another_device(torch_cuda) -> None:
    torch = torch_cuda
    if cuda.device_count() < 2 or torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs, found {cuda.device_count()}")
    with torch.cuda.device(0):
        x = torch.randn(100_000, device="cuda:1")
        t = bitnet_go.quantize_i2s(x, block_size=128)
        assert t.device == "cuda:1" and t.packed.device.index == 1
        assert_same(t, cpu(x.cpu().numpy(), 128, "absmean"))
        assert np.array_equal(t.values().cpu().numpy(), t.cpu().values())
    h = np.random.default_rng(1).standard_normal(5000, dtype=np.float32)
    assert_same(bitnet_go.quantize_i2s(h, device="cuda:1"), cpu(h, None, "absmean"))


@gpu
def test_device_facts() -> None:
    assert cuda.device_count() >= 1
    assert cuda.device_name(0) and cuda.device_name("cuda:0") == cuda.device_name(0)
    free, total = cuda.memory_info(0)
    assert 0 < free <= total
    assert cuda.driver_version() >= 12040
    with pytest.raises(ValueError, match="out of range"):
        cuda.device_name(cuda.device_count())


@gpu
def test_no_leak_over_1000_calls(torch_cuda) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(11)
    pool = rng.standard_normal(1 << 20, dtype=np.float32)
    blocks = [None, 32, 96, 128, 1000]

    def one(i: int) -> None:
        n = int(rng.integers(1, 300_000))
        off = int(rng.integers(0, pool.size - n + 1))
        x = pool[off : off + n]
        bs, m = blocks[i % len(blocks)], METHODS[i % 2]
        if i % 4 == 3:
            t = bitnet_go.quantize_i2s(torch.from_numpy(x).cuda(), block_size=bs, method=m)
            t.values(), t.dequantize()
        else:
            bitnet_go.quantize_i2s(x, block_size=bs, method=m, device="cuda")

    for i in range(20):  # warm up every plan and the module
        one(i)

    def settle() -> int:
        torch.cuda.synchronize()
        cuda.empty_cache()
        torch.cuda.empty_cache()
        return cuda.memory_info(0)[0]

    free0 = settle()
    for i in range(1000):
        one(i)
    free1 = settle()
    st = cuda._pool_stats()
    assert st["idle_buffers"] == st["in_use_buffers"] == st["idle_streams"] == st["in_use_streams"] == 0, st
    assert free1 >= free0 - (2 << 20), f"free device memory {free0} before, {free1} after 1000 calls"


@gpu
def test_concurrent_calls_from_threads(torch_cuda) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(13)
    work = []
    for i in range(48):
        n = int(rng.integers(1, 500_000))
        bs = [None, 64, 96, 1000][i % 4]
        x = rng.standard_normal(n, dtype=np.float32)
        work.append((x, bs, METHODS[i % 2], cpu(x, bs, METHODS[i % 2])))
    errors: list[str] = []

    def worker(k: int) -> None:
        try:
            for j in range(k, len(work), 8):
                x, bs, m, ref = work[j]
                inp = torch.from_numpy(x).cuda() if j % 2 else x
                for _ in range(3):
                    assert_same(bitnet_go.quantize_i2s(inp, block_size=bs, method=m, device="cuda"), ref, f"job {j}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@gpu
def test_out_of_memory_is_memory_error(torch_cuda) -> None:
    torch = torch_cuda
    cuda.empty_cache()
    torch.cuda.empty_cache()
    free, _ = cuda.memory_info(0)
    hog = None
    for leave in (256 << 20, 512 << 20, 1 << 30):
        try:
            hog = torch.empty(free - leave, dtype=torch.uint8, device="cuda:0")
            break
        except torch.cuda.OutOfMemoryError:
            continue
    if hog is None:
        pytest.fail("could not fill the GPU's memory to test the out-of-memory error")
    try:
        x = np.ones((leave + (256 << 20)) // 4, np.float32)
        with pytest.raises(MemoryError, match=r"cuda: out of memory on cuda:0 .* needs .* free of"):
            bitnet_go.quantize_i2s(x, device="cuda")
    finally:
        del hog
        torch.cuda.empty_cache()
    x = np.ones(1000, np.float32)  # and the GPU still works
    assert_same(bitnet_go.quantize_i2s(x, device="cuda"), cpu(x, None, "absmean"))
