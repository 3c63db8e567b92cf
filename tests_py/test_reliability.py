"""Reliability: fork, Ctrl-C, environment values, library loading, messages.

Anything that could hang runs in a child process with a time limit, so a
regression fails the test instead of stopping the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go._core import lib as _lib

PY = sys.executable
PKG_DIR = str(Path(bitnet_go.__file__).resolve().parent.parent)
"""Where the tested bitnet_go lives: children import the same one."""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("BITNET_GO_NUM_THREADS", None)
    env.pop("BITNET_GO_WEIGHT_CACHE_MB", None)
    env.update(extra)
    return env


def run_py(code: str, *, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (the tested package on its path)."""
    return subprocess.run(
        [PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=_env(**env)
    )


def _ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


# --- fork -------------------------------------------------------------------

# What every child does: multi-threaded convolutions and quantizations,
# checked against the naive algorithm and a numpy expression of absmean.
CHILD_WORK = """
import numpy as np, bitnet_go as bg
def work(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 32, 20, 20), dtype=np.float32)
    w = bg.quantize_conv_weight(rng.standard_normal((32, 32, 3, 3), dtype=np.float32))
    for ab in (None, 8):
        a = bg.conv2d_quantized(x, w, padding=1, act_bits=ab)
        b = bg.conv2d_quantized(x, w, padding=1, act_bits=ab, algorithm="naive")
        assert np.allclose(a, b, rtol=1e-4, atol=1e-4), "conv differs from naive"
    v = rng.standard_normal(300_000, dtype=np.float32)
    t = bg.quantize_i2s(v)
    s = np.float32(np.abs(v.astype(np.float64)).mean())
    ref = np.clip(np.round(v / max(s, np.float32(1e-5))), -1, 1)
    assert t.scales[0] == s and (t.values() == ref).all(), "quantize differs"
    return float(a.sum())
"""


def _wait(pid: int, limit: float) -> int | None:
    """Exit code of child pid, or None if it is still running after limit s (killed)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(st)
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_fork_after_use_raises_never_hangs():
    """200 children forked after the library was used: each first call raises
    RuntimeError naming spawn and forkserver at once; none hangs."""
    bitnet_go.quantize_i2s(np.ones(1 << 16, np.float32))  # loaded and used here
    x = np.ones((1, 4, 8, 8), np.float32)
    codes = _forked_calls(200, lambda: bitnet_go.quantize_i2s(x))
    assert codes == [0] * 200, f"children: {sorted(set(map(str, codes)))} (None = hung)"


def _forked_calls(n: int, call: Callable[[], object]) -> list[int | None]:
    """Fork n children one after the other, each making ``call``: their exit codes, 0 where the
    call raised the fork's RuntimeError (naming spawn and forkserver), None where it hung."""
    codes = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:  # child: exit 0 only for the right error
            code = 1
            try:
                call()
            except RuntimeError as e:
                code = 0 if ("spawn" in str(e) and "forkserver" in str(e)) else 2
            except BaseException:
                code = 3
            os._exit(code)
        codes.append(_wait(pid, 20))
    return codes


def test_fork_before_first_call_works_every_time():
    """import bitnet_go, no call, then 200 forks: every child loads its own
    Go runtime and computes right (before this change 40 of 40 hung)."""
    out = _ok(
        run_py(
            CHILD_WORK
            + """
import os, time, signal, sys
from bitnet_go._core import lib as _lib
assert _lib._state.handle is None, "import loaded the library"
bad = []
for i in range(200):
    pid = os.fork()
    if pid == 0:
        try:
            work(i)
            os._exit(0)
        except BaseException as e:
            print(repr(e), file=sys.stderr)
            os._exit(1)
    t0 = time.monotonic()
    while True:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got:
            if os.waitstatus_to_exitcode(st) != 0:
                bad.append((i, os.waitstatus_to_exitcode(st)))
            break
        if time.monotonic() - t0 > 30:
            os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0); bad.append((i, "hung")); break
        time.sleep(0.002)
work(1000)  # the parent can use it afterwards
print("bad", bad)
""",
            timeout=600,
        )
    )
    assert "bad []" in out, out


def test_fork_pool_and_spawn_pool():
    """multiprocessing: a 'fork' pool works when the parent has not called
    bitnet_go yet; after a call, a 'fork' pool's tasks raise RuntimeError
    (no hang) and a 'spawn' pool works."""
    out = _ok(
        run_py(
            CHILD_WORK
            + """
import multiprocessing as mp
if __name__ == "__main__":
    with mp.get_context("fork").Pool(3) as p:
        print("fork-before", len(p.map_async(work, range(12)).get(timeout=120)))
    work(0)  # the library is loaded here now
    with mp.get_context("fork").Pool(2) as p:
        try:
            p.map_async(work, range(4)).get(timeout=120)
            print("fork-after: no error")
        except RuntimeError as e:
            print("fork-after: RuntimeError", "spawn" in str(e))
""",
            timeout=300,
        )
    )
    assert "fork-before 12" in out and "fork-after: RuntimeError True" in out, out


def test_spawn_pool_after_use(tmp_path):
    """A 'spawn' pool works after the parent used the library (tensors pickle across)."""
    mod = tmp_path / "spawnwork.py"
    mod.write_text(CHILD_WORK + "\ndef values(t):\n    return t.values()\n")
    out = _ok(
        run_py(
            f"""
import sys, multiprocessing as mp, numpy as np
sys.path.insert(0, {str(tmp_path)!r})
import spawnwork, bitnet_go as bg
if __name__ == "__main__":
    spawnwork.work(0)
    t = bg.quantize_i2s(np.linspace(-1, 1, 1000, dtype=np.float32), block_size=100)
    with mp.get_context("spawn").Pool(2) as p:
        r = p.map_async(spawnwork.work, range(4)).get(timeout=240)
        v = p.apply_async(spawnwork.values, (t,)).get(timeout=240)
    print("spawn", len(r), bool((v == t.values()).all()))
""",
            timeout=300,
        )
    )
    assert "spawn 4 True" in out, out


def test_torch_dataloader_workers(tmp_path):
    """torch DataLoader workers (Linux default: fork) call bitnet_go: fine
    when the parent has not used it yet; after use a clear RuntimeError, and
    multiprocessing_context='spawn' works."""
    pytest.importorskip("torch")
    mod = tmp_path / "dsmod.py"
    mod.write_text(
        CHILD_WORK
        + textwrap.dedent(
            """
            import torch
            class DS(torch.utils.data.Dataset):
                def __len__(self):
                    return 8
                def __getitem__(self, i):
                    return torch.tensor(work(i))
            """
        )
    )
    out = _ok(
        run_py(
            f"""
import sys, torch
sys.path.insert(0, {str(tmp_path)!r})
import dsmod
if __name__ == "__main__":
    dl = torch.utils.data.DataLoader(dsmod.DS(), batch_size=2, num_workers=2)
    print("before", sum(len(b) for b in dl))
    dsmod.work(0)
    try:
        sum(len(b) for b in dl)
        print("after: no error")
    except RuntimeError as e:
        print("after: RuntimeError", "spawn" in str(e))
    dl = torch.utils.data.DataLoader(dsmod.DS(), batch_size=2, num_workers=2, multiprocessing_context="spawn")
    print("spawn", sum(len(b) for b in dl))
""",
            timeout=400,
        )
    )
    assert "before 8" in out and "after: RuntimeError True" in out and "spawn 8" in out, out


def test_import_loads_neither_library_nor_torch():
    out = _ok(
        run_py(
            """
import sys, bitnet_go
from bitnet_go._core import lib as _lib
print(_lib._state.handle is None, "torch" in sys.modules, "bitnet_go.bench" in sys.modules)
bitnet_go.get_num_threads()
print(_lib._state.handle is not None)
"""
        )
    )
    assert out.split() == ["True", "False", "False", "True"], out


# --- Ctrl-C -----------------------------------------------------------------

SIGINT_CHILD = """
import sys, time, numpy as np, bitnet_go as bg
rng = np.random.default_rng(0)
kind = sys.argv[1]
if kind == "quantize":
    bg.set_num_threads(1)
    x = rng.standard_normal(1 << 26, dtype=np.float32)
    def call():
        return bg.quantize_i2s(x, block_size=96)
    def check():
        v = rng.standard_normal(10_000, dtype=np.float32)
        t = bg.quantize_i2s(v, block_size=96)
        return t.dequantize().shape == v.shape and t.scales.size == 105
else:
    algo, ab = kind.split(":")
    ab = None if ab == "f32" else 8
    x = rng.standard_normal((8, 96, 40, 40), dtype=np.float32)
    w = bg.quantize_conv_weight(rng.standard_normal((96, 96 if algo != "depthwise" else 1, 3, 3), dtype=np.float32))
    g = 96 if algo == "depthwise" else 1
    a = "auto" if algo == "depthwise" else algo
    def call():
        return bg.conv2d_quantized(x, w, padding=1, groups=g, algorithm=a, act_bits=ab)
    def check():
        s = x[:1, :, :9, :9]
        r1 = bg.conv2d_quantized(s, w, padding=1, groups=g, algorithm=a, act_bits=ab)
        r2 = bg.conv2d_quantized(s, w, padding=1, groups=g, algorithm="naive", act_bits=ab)
        return np.allclose(r1, r2, rtol=1e-4, atol=1e-4) if ab is None else bool((r1 == r2).all())
t0 = time.perf_counter()
n = 0
while time.perf_counter() - t0 < 1.0 or n < 1:  # one call's time, measured
    call(); n += 1
per = (time.perf_counter() - t0) / n
reps = max(1, int(3.0 / per) + 1)  # one uninterruptible stretch of 3+ s
print(json.dumps({"per_call": per, "reps": reps}), flush=True)
try:
    t1 = time.perf_counter()
    print("go", flush=True)
    for _ in range(reps):
        call()
    print(json.dumps({"done": time.perf_counter() - t1}), flush=True)
except KeyboardInterrupt:
    print(json.dumps({"interrupted": time.perf_counter() - t1}), flush=True)
print(json.dumps({"check": bool(check())}), flush=True)
"""


CTRL_C_CASES = [
    "quantize",
    "im2col:f32",
    "im2col:i8",
    "direct:f32",
    "direct:i8",
    "naive:f32",
    "depthwise:f32",
    "lut:i8",
]


@pytest.mark.parametrize("kind", CTRL_C_CASES)
def test_ctrl_c_interrupts_long_call(kind, tmp_path):
    """SIGINT in the middle of a call: KeyboardInterrupt within about 100 ms
    (0.3 s allowed on a shared 2-vCPU box), then the library still works."""
    script = tmp_path / "child.py"
    script.write_text("import json\n" + SIGINT_CHILD)
    p = subprocess.Popen([PY, str(script), kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        first = json.loads(p.stdout.readline())
        assert p.stdout.readline().strip() == "go"
        # Inside a call: the stretch is 3+ s of calls; a single call is the
        # whole stretch when it takes that long (naive), else the signal
        # lands in one of the calls.
        time.sleep(min(1.0, first["per_call"] * first["reps"] / 3))
        sent = time.perf_counter()
        p.send_signal(signal.SIGINT)
        line = json.loads(p.stdout.readline())
        latency = time.perf_counter() - sent
        rest = json.loads(p.stdout.readline())
        assert p.wait(60) == 0, p.stderr.read()
    finally:
        p.kill()
    assert "interrupted" in line, f"the call ran to its end: {line}"
    assert latency < 0.3, f"KeyboardInterrupt {latency * 1e3:.0f} ms after SIGINT ({first})"
    assert rest == {"check": True}


def test_ctrl_c_handler_that_does_not_raise_lets_the_call_finish():
    """A SIGINT handler that does not raise: the call is run again and completes."""
    out = _ok(
        run_py(
            """
import os, signal, threading, time, numpy as np, bitnet_go as bg
seen = []
signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
x = np.random.default_rng(0).standard_normal((4, 64, 40, 40), dtype=np.float32)
w = bg.quantize_conv_weight(np.random.default_rng(1).standard_normal((64, 64, 3, 3), dtype=np.float32))
ref = bg.conv2d_quantized(x, w, padding=1, algorithm="naive")
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
got = bg.conv2d_quantized(x, w, padding=1, algorithm="naive")
print(len(seen), bool(np.array_equal(got, ref)))
"""
        )
    )
    assert out.split() == ["1", "True"], out


# --- environment values and the library path -------------------------------

ENV_CODE = """
import warnings, json
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    import bitnet_go
    n = bitnet_go.get_num_threads()
    bitnet_go.get_num_threads()
    s = {e["name"]: e for e in bitnet_go.cpu_features()["settings"]}
print(json.dumps({"warnings": [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)], "n": n, "s": s}))
"""


@pytest.mark.parametrize("value", ["0", "-1", "abc", "100000", "2.5"])
def test_bad_num_threads_warns_once(value):
    got = json.loads(_ok(run_py(ENV_CODE, BITNET_GO_NUM_THREADS=value)))
    assert len(got["warnings"]) == 1 and "BITNET_GO_NUM_THREADS" in got["warnings"][0], got
    assert repr(value).strip("'") in got["warnings"][0]
    s = got["s"]["BITNET_GO_NUM_THREADS"]
    assert s["value"] == value and s["problem"] and s["in_effect"] == got["n"] == os.cpu_count()


@pytest.mark.parametrize("value", ["-5", "abc", "1e3"])
def test_bad_weight_cache_warns_once(value):
    got = json.loads(_ok(run_py(ENV_CODE, BITNET_GO_WEIGHT_CACHE_MB=value)))
    assert len(got["warnings"]) == 1 and "BITNET_GO_WEIGHT_CACHE_MB" in got["warnings"][0], got
    s = got["s"]["BITNET_GO_WEIGHT_CACHE_MB"]
    assert s["value"] == value and s["problem"] and s["in_effect"] == 256


def test_good_env_values_do_not_warn():
    got = json.loads(_ok(run_py(ENV_CODE, BITNET_GO_NUM_THREADS="1", BITNET_GO_WEIGHT_CACHE_MB="0")))
    assert got["warnings"] == [] and got["n"] == 1, got
    assert got["s"]["BITNET_GO_WEIGHT_CACHE_MB"]["in_effect"] == 0
    assert "problem" not in got["s"]["BITNET_GO_NUM_THREADS"]


@pytest.mark.parametrize(
    ("env", "want"),
    [
        (dict(BITNET_GO_DISABLE="avx-512,avx2"), "BITNET_GO_DISABLE: 'avx-512' ignored (not a kernel family"),
        (dict(BITNET_GO_DISPATCH="bestfirst"), "BITNET_GO_DISPATCH: 'bestfirst' ignored (give measured or best-first)"),
    ],
)
def test_bad_family_settings_warn_once(env, want):
    """Names the Go side ignores in BITNET_GO_DISABLE / BITNET_GO_DISPATCH warn as the numeric
    settings do (they were visible only in cpu_features())."""
    got = json.loads(_ok(run_py(ENV_CODE, **env)))
    assert len(got["warnings"]) == 1 and want in got["warnings"][0], got


def test_setting_warning_points_at_the_callers_line(tmp_path):
    """The warning names the user's line that loaded the library, not a line of bitnet_go."""
    script = tmp_path / "user.py"
    script.write_text(
        "import warnings\nwarnings.simplefilter('always')\nimport bitnet_go\nbitnet_go.get_num_threads()\n"
    )
    r = subprocess.run([PY, str(script)], capture_output=True, text=True, timeout=120,
                       env=_env(BITNET_GO_NUM_THREADS="abc"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{script}:4: RuntimeWarning: bitnet_go: BITNET_GO_NUM_THREADS" in r.stderr, r.stderr


def test_relative_library_path_loads(tmp_path):
    """BITNET_GO_LIBRARY=./lib.so is the file in the current directory (ctypes searched the
    system paths for the bare name 'lib.so' and failed)."""
    import shutil

    import bitnet_go._core.lib as lib

    shutil.copy(lib.library_path(), tmp_path / "mylib.so")
    r = subprocess.run([PY, "-c", "import bitnet_go; print(bitnet_go.get_num_threads())"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, env=_env(BITNET_GO_LIBRARY="./mylib.so"))  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r.stderr


def _libm() -> str:
    import ctypes.util

    name = ctypes.util.find_library("m") or "libm.so.6"
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    pytest.skip("no libm file found to stand for a foreign library")


@pytest.mark.parametrize("what", ["missing", "directory", "text", "foreign"])
def test_bad_library_path_is_import_error(what, tmp_path):
    path = {
        "missing": str(tmp_path / "nope.so"),
        "directory": str(tmp_path),
        "text": str(tmp_path / "x.so"),
        "foreign": _libm() if what == "foreign" else "",
    }[what]
    if what == "text":
        Path(path).write_text("not a library\n")
    r = run_py(
        """
try:
    import bitnet_go
    bitnet_go.get_num_threads()
    print("no error")
except ImportError as e:
    print("ImportError:", e)
""",
        BITNET_GO_LIBRARY=path,
    )
    out = _ok(r)
    assert out.startswith("ImportError:") and "BITNET_GO_LIBRARY" in out, out


# --- messages -----------------------------------------------------------------


@pytest.mark.parametrize("n", [2**64, -(2**70), 0, -1, 1025, 10**6])
def test_set_num_threads_range_message(n):
    with pytest.raises(ValueError, match=r"^n \(the number of threads\) must be in \[1, 1024\], got " + str(n)):
        bitnet_go.set_num_threads(n)


@pytest.mark.parametrize("n", [2.0, "2", True, None])
def test_set_num_threads_type(n):
    with pytest.raises(TypeError, match="n must be an int"):
        bitnet_go.set_num_threads(n)


def test_masked_arrays_are_rejected():
    m = np.ma.masked_array([0.5, 1e30, -0.5], mask=[0, 1, 0], dtype=np.float32)
    with pytest.raises(TypeError, match="x is a masked array"):
        bitnet_go.quantize_i2s(m)
    w = bitnet_go.quantize_conv_weight(np.ones((2, 1, 1, 1), np.float32))
    with pytest.raises(TypeError, match="x is a masked array"):
        bitnet_go.conv2d_quantized(np.ma.masked_array(np.ones((1, 1, 2, 2))), w)
    with pytest.raises(TypeError, match="bias is a masked array"):
        bitnet_go.conv2d_quantized(np.ones((1, 1, 2, 2)), w, bias=np.ma.masked_array([1.0, 2.0]))
    with pytest.raises(TypeError, match="w is a masked array"):
        bitnet_go.quantize_conv_weight(np.ma.masked_array(np.ones((2, 1, 1, 1))))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_block_covering_the_weight_is_per_tensor(seed):
    """block_size >= the weight's size is one scale: conv accepts it as per-tensor."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    wf = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    x = rng.standard_normal((2, 3, 7, 6), dtype=np.float32)
    t = bitnet_go.quantize_i2s(wf, block_size=[1000, 108, 2**40][seed])
    assert t.scales.size == 1
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(t.dequantize())).numpy()
    for algo in ("auto", "naive", "im2col", "direct"):
        got = bitnet_go.conv2d_quantized(x, t, algorithm=algo)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        per_tensor = bitnet_go.quantize_i2s(wf, block_size=None)
        assert np.array_equal(got, bitnet_go.conv2d_quantized(x, per_tensor, algorithm=algo))
        i8 = bitnet_go.conv2d_quantized(x, t, algorithm=algo, act_bits=8)
        assert np.array_equal(i8, bitnet_go.conv2d_quantized(x, per_tensor, algorithm=algo, act_bits=8))


def test_kernels_listed_before_any_call():
    out = _ok(run_py("import json, bitnet_go; print(json.dumps(bitnet_go.cpu_features()['kernels']))"))
    assert set(json.loads(out)) >= {"quantize_i2s", "conv_gemm", "conv_lut"}, out


def test_library_errors_name_the_status():
    """Status 5 (interrupted) is known to the Python layer as the retry status."""
    assert _lib.STATUS_INTERRUPTED == 5 and _lib.handle().bng_abi_version() == _lib.ABI_VERSION


class _FakeCudaArray:
    """Stands for a CuPy/torch CUDA array: only the interface is looked at."""

    __cuda_array_interface__ = {"shape": (1, 1, 2, 2), "typestr": "<f4", "data": (0, False), "version": 3}


def test_gpu_array_to_cpu_conv_is_a_clear_error():
    w = bitnet_go.quantize_conv_weight(np.ones((2, 1, 1, 1), np.float32))
    # a GPU x runs on its GPU; where no CUDA GPU can be used, that is a clear error
    if bitnet_go.cuda.unavailable_reason() is not None:
        for act_bits in (None, 8):
            with pytest.raises(RuntimeError, match=r"conv2d_quantized: x is a GPU array but no CUDA GPU can be used"):
                bitnet_go.conv2d_quantized(_FakeCudaArray(), w, act_bits=act_bits)
    with pytest.raises(ValueError, match=r"bias is a GPU array"):
        bitnet_go.conv2d_quantized(np.ones((1, 1, 2, 2), np.float32), w, bias=_FakeCudaArray())
    with pytest.raises(ValueError, match=r"x is a GPU array but device='cpu'"):
        bitnet_go.quantize_i2s(_FakeCudaArray(), device="cpu")


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((2**70,), ValueError, r"^n must fit in int64, got 1180591620717411303424$"),
        ((10, 2**70), ValueError, r"^block_size must fit in int64"),
        ((1.5,), TypeError, r"^n must be an int, got float 1.5"),
        ((True,), TypeError, r"^n must be an int, got bool True"),
        ((10, "a"), TypeError, r"^block_size must be an int"),
        ((0,), ValueError, r"at least one element"),
    ],
)
def test_cuda_plan_arguments(args: tuple, exc: type, match: str) -> None:
    """diagnostics.cuda_plan names its arguments (a huge n was Go's 'cannot unmarshal number')."""
    from bitnet_go import diagnostics

    with pytest.raises(exc, match=match):
        diagnostics.cuda_plan(*args)
    assert diagnostics.cuda_plan(1 << 20, 128)["passes"] == 1


@pytest.mark.parametrize("act_bits", [None, 8])
def test_threads_calling_one_layer_keep_their_own_operands(act_bits):
    """Python threads running one layer at once, each on inputs of one shape (the descriptors
    of a call's input, output and bias are kept per thread and re-pointed each call): every
    result equals the same call made alone. Seeded per thread."""
    import threading

    rng = np.random.default_rng(1234)
    w = bitnet_go.quantize_i2s(rng.standard_normal((48, 40, 1, 1), dtype=np.float32))
    bias = rng.standard_normal(48, dtype=np.float32)
    xs = [np.random.default_rng(t).standard_normal((3, 40, 1, 1), dtype=np.float32) for t in range(4)]
    want = [bitnet_go.conv2d_quantized(x, w, bias, act_bits=act_bits) for x in xs]
    bad: list[str] = []

    def work(t: int) -> None:
        for i in range(300):
            got = bitnet_go.conv2d_quantized(xs[t], w, bias, act_bits=act_bits)
            if not np.array_equal(got, want[t]):
                bad.append(f"thread {t}, call {i}")
                return

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad, bad


def test_a_call_made_while_another_holds_the_kept_descriptors_leaves_them():
    """A conv2d call made on a thread whose kept set a call has taken (as a signal handler's call
    between that call's descriptors and the call itself) builds its own: the taken call's
    descriptors still point at the first call's arrays, and both results are right."""
    from bitnet_go._core import descriptor, ops

    rng = np.random.default_rng(77)
    w = bitnet_go.quantize_i2s(rng.standard_normal((24, 32, 1, 1), dtype=np.float32))
    x1, x2 = (rng.standard_normal((2, 32, 1, 1), dtype=np.float32) for _ in range(2))
    want2 = bitnet_go.conv2d_quantized(x2.copy(), w, act_bits=8)  # prepares the call for x's shape
    kept = descriptor.kept_take()
    try:
        calls = [c for key, c in kept.items() if key[0] == ops._CONV_CALL and key[2] == x1.shape]
        assert len(calls) == 1  # the one call above prepared
        c = calls[0]
        c.x.data = descriptor.address(x1)  # the taken call's input, about to be passed
        got = bitnet_go.conv2d_quantized(x2, w, act_bits=8)  # same plan and shape: that call's key
        assert c.x.data == descriptor.address(x1)
        assert np.array_equal(got, want2)
    finally:
        descriptor.kept_give(kept)
    assert descriptor.kept_take() is kept  # handed back whole
    descriptor.kept_give(kept)
    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x2, w, act_bits=8), want2)  # the kept call again
    assert descriptor.kept_take() is kept  # handed back whole
    descriptor.kept_give(kept)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_fork_after_conv2d_calls_raises_never_calls_the_kept_call():
    """A conv2d call prepared in the parent (kept per thread, ops.conv2d_run_kept) is not used in
    a forked child: the child's call raises the fork's RuntimeError, as every first call there."""
    rng = np.random.default_rng(5)
    w = bitnet_go.quantize_conv_weight(rng.standard_normal((8, 16, 1, 1), dtype=np.float32))
    x = rng.standard_normal((1, 16, 4, 4), dtype=np.float32)
    for _ in range(3):
        bitnet_go.conv2d_quantized(x, w, act_bits=8)  # the kept plan and call
    codes = _forked_calls(20, lambda: bitnet_go.conv2d_quantized(x, w, act_bits=8))
    assert codes == [0] * 20, f"children: {sorted(set(map(str, codes)))} (None = hung)"
