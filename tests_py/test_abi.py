"""The C ABI over descriptors (bindings/bng_abi.h): the ctypes mirror has the
C layout, and every export checks the descriptors it is given, whoever the
caller, with a clear ValueError/TypeError and never a crash."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go._core import descriptor as d
from bitnet_go._core import lib as _lib

ROOT = Path(__file__).resolve().parents[1]
STRUCTS = {"bng_tensor": d.Tensor, "bng_quantize_params": d.QuantizeParams,
           "bng_conv2d_params": d.Conv2dParams, "bng_op_info": d.OpInfo,
           "bng_histogram_params": d.HistogramParams, "bng_qparams_params": d.QParamsParams,
           "bng_calibrate_params": d.CalibrateParams, "bng_qelem_params": d.QElemParams}  # fmt: skip


def test_ctypes_mirror_matches_the_c_header(tmp_path: Path) -> None:
    """Every field's offset and every struct's size, as a C compiler lays out bng_abi.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build the library (cgo), and for this test"
    lines = []
    for name, cls in STRUCTS.items():
        lines.append(f'printf("{name} size %zu\\n", sizeof({name}));')
        for field, *_ in cls._fields_:
            lines.append(f'printf("{name} {field} %zu\\n", offsetof({name}, {field}));')
    src = tmp_path / "layout.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "bng_abi.h"\nint main(void) {\n'
                   + "\n".join(lines) + "\nreturn 0;\n}\n")  # fmt: skip
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", str(ROOT / "bindings"), str(src), "-o", str(exe)], check=True)
    got = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        name, field, value = line.split()
        got[(name, field)] = int(value)
    for name, cls in STRUCTS.items():
        assert got[(name, "size")] == ctypes.sizeof(cls), name
        for field, *_ in cls._fields_:
            assert got[(name, field)] == getattr(cls, field).offset, (name, field)


def _call(name: str, *args: object) -> None:
    _lib.call(name, *[ctypes.byref(a) if isinstance(a, ctypes.Structure) else a for a in args])


def _layout(qtype: str, shape: tuple[int, ...], block_size: int | None = None) -> tuple[int, int]:
    nbytes, nscales = ctypes.c_int64(-1), ctypes.c_int64(-1)
    _call("bng_layout", d.layout(qtype, shape, block_size), ctypes.byref(nbytes), ctypes.byref(nscales))
    return nbytes.value, nscales.value


def _want_bytes(qtype: str, shape: tuple[int, ...]) -> int:
    """The formats' byte counts, written out independently of the library."""
    n = int(np.prod(shape))
    rows = shape[0] if len(shape) >= 2 else 1
    k = n // rows
    if qtype == "i2_s":
        return -(-n // 128) * 32
    if qtype == "tl1":
        pairs = (k + 1) // 2
        return rows * ((pairs + 1) // 2)
    t = k // 3
    return rows * (-(-t // 2) + -(-t // 8) + (1 if k % 3 else 0))


@pytest.mark.parametrize("seed", range(6))
def test_layout_matches_the_formats(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        rank = int(rng.integers(0, 5))
        shape = tuple(int(v) for v in rng.integers(1, 9, size=rank))
        n = int(np.prod(shape))
        bs = None if rng.random() < 0.3 else int(rng.integers(1, n + 3))
        for qtype in ("i2_s", "tl1", "tl2"):
            assert _layout(qtype, shape, bs) == (_want_bytes(qtype, shape), 1 if not bs or bs >= n else -(-n // bs))


def test_layout_rejects_unknown_formats_and_bad_shapes() -> None:
    known = r"0 \(i2_s\), 1 \(tl1\), 2 \(tl2\), 3 \(tq2_0\), 4 \(tq1_0\), 17 \(int8\)"
    with pytest.raises(ValueError, match=rf"qtype must be {known}.* got 16"):
        _layout("float32", (4,))
    with pytest.raises(ValueError, match="the number of values"):
        _layout("i2_s", (0, 3))
    with pytest.raises(ValueError, match="more than"):
        _layout("i2_s", (2**31, 2**31))


def _quantize_case() -> tuple[dict[str, object], Callable[[dict[str, object]], None]]:
    x = np.random.default_rng(1).standard_normal((4, 40), dtype=np.float32)
    packed = np.zeros(64, np.uint8)
    scales = np.zeros(1, np.float32)
    ops: dict[str, object] = {
        "x": d.host(x, "float32"),
        "out": d.host(packed, "i2_s", shape=x.shape, scales=scales),
        "p": d.QuantizeParams(version=d.QUANTIZE_V1),
    }

    def run(o: dict[str, object]) -> None:
        _call("bng_quantize", o["x"], o["out"], o["p"])

    ops["_keep"] = (x, packed, scales)
    return ops, run


def _conv_case() -> tuple[dict[str, object], Callable[[dict[str, object]], None]]:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 5), dtype=np.float32)
    w = bitnet_go.quantize_i2s(rng.standard_normal((3, 2, 3, 3), dtype=np.float32))
    out = np.zeros((1, 3, 3, 3), np.float32)
    p = d.Conv2dParams(version=d.CONV2D_V1, groups=1)
    p.stride[:], p.dilation[:] = [1, 1], [1, 1]
    ops: dict[str, object] = {
        "x": d.host(x, "float32"),
        "w": d.host(w.packed, "i2_s", shape=w.shape, scales=w.scales),
        "out": d.host(out, "float32"),
        "p": p,
        "info": d.OpInfo(version=d.OP_INFO_V1),
    }

    def run(o: dict[str, object]) -> None:
        _call("bng_conv2d", o["x"], o["w"], None, o["out"], o["p"], o["info"])

    ops["_keep"] = (x, w, out)
    return ops, run


def _set(**fields: object) -> Callable[[ctypes.Structure], None]:
    def f(t: ctypes.Structure) -> None:
        for k, v in fields.items():
            setattr(t, k, v)

    return f


def _shape(*dims: int) -> Callable[[ctypes.Structure], None]:
    def f(t: ctypes.Structure) -> None:
        arr = (ctypes.c_int64 * len(dims))(*dims)
        t._keep.append(arr)
        t.shape, t.ndim = arr, len(dims)

    return f


def _strides(*st: int) -> Callable[[ctypes.Structure], None]:
    def f(t: ctypes.Structure) -> None:
        arr = (ctypes.c_int64 * len(st))(*st)
        t._keep.append(arr)
        t.strides = arr

    return f


BAD = [
    # (operand, change, exception, message)
    ("x", _set(version=2), ValueError, "x: bng_tensor version 2 is not supported"),
    ("x", _set(ndim=17), ValueError, "ndim must be between 0 and 16"),
    ("x", _set(ndim=-1), ValueError, "ndim must be between"),
    ("x", _set(shape=None), ValueError, r"x.shape is NULL"),
    ("x", _shape(-4, 40), ValueError, "dimension 0 must be between"),
    ("x", _shape(2**40, 2**40), ValueError, "more than"),
    ("x", _set(device_type=7), ValueError, "device_type must be 1 .cpu. or 2 .cuda., got 7"),
    ("x", _set(device_id=1), ValueError, "the CPU's device_id must be 0"),
    ("x", _set(data=None), ValueError, "x is NULL"),
    ("x", _set(nbytes=-1), ValueError, "must be non-negative"),
    ("x", _set(nbytes=2**62 + 1), ValueError, "overflows"),
    ("x", _set(axis=9), ValueError, "axis must be -1 or a dimension"),
    ("x", _set(dtype=17), TypeError, "x: dtype must be float32, got int8"),
    ("x", _strides(1, 4), ValueError, "not C-contiguous"),
    ("x", _set(scales=None, n_scales=3), ValueError, "x.scales is NULL"),
    ("out", _set(block_size=-1), ValueError, "block_size must be positive"),
]


@pytest.mark.parametrize("op", ["quantize", "conv2d"])
@pytest.mark.parametrize(("operand", "change", "exc", "match"), BAD)
def test_descriptors_are_checked(op: str, operand: str, change: Callable[[ctypes.Structure], None],
                                 exc: type[Exception], match: str) -> None:  # fmt: skip
    ops, run = _quantize_case() if op == "quantize" else _conv_case()
    run(ops)  # the unchanged case runs
    change(ops[operand])
    with pytest.raises(exc, match=match):
        run(ops)


@pytest.mark.parametrize(
    ("op", "operand", "change", "match"),
    [
        ("quantize", "out", _set(dtype=d.DTYPES["tl1"]), "quantize writes i2_s"),
        ("quantize", "out", _set(device_type=d.CUDA), "operands must be on one device"),
        ("quantize", "p", _set(version=7), "bng_quantize_params is NULL or of a version other than 1"),
        ("quantize", "out", _shape(40, 4), "does not match x's shape"),
        ("conv2d", "info", _set(version=9), "bng_op_info version 9"),
        ("conv2d", "x", _set(device_type=d.CUDA), "host .CPU. tensors only"),
        ("conv2d", "out", _shape(1, 3, 4, 4), "does not match the convolution's output shape"),
    ],
)
def test_op_specific_checks(op: str, operand: str, change: Callable[[ctypes.Structure], None], match: str) -> None:
    ops, run = _quantize_case() if op == "quantize" else _conv_case()
    change(ops[operand])
    with pytest.raises(ValueError, match=match):
        run(ops)


def test_op_info_reports_what_ran() -> None:
    ops, run = _conv_case()
    for alg, name in enumerate(("naive", "im2col", "direct"), start=1):
        ops["p"].algorithm = alg
        run(ops)
        assert ops["info"].algorithm == alg, name
        assert ops["info"].kernel.decode().startswith(name), ops["info"].kernel
