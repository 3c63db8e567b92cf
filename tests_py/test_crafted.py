"""Crafted TernaryTensors: every way of making one (quantize, pickle, the
bitnet.cpp bytes, the C ABI) checks what it is given, so that a hostile or
corrupted tensor gives a clean ValueError/TypeError, or results consistent
with its fields: never a hang, a crash or a read out of bounds.

Anything that could hang or crash runs in a child Python with a timeout
(``_isolated``): a regression fails the test instead of stopping the run.
The child runs the ``_case_*`` functions of this module.
"""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bitnet_go
from bitnet_go._core import descriptor
from bitnet_go._core import lib as _lib
from bitnet_go._core.ops import num_blocks
from bitnet_go._quantized import rows_of
from bitnet_go._ternary import QTYPES, TQ_PAYLOAD, TernaryTensor, _rebuild, packed_len

FIELDS = ("qtype", "shape", "block_size", "method", "packed", "scales")
HUGE = 2**62


def _isolated(case: str, *args: Any, timeout: float = 240) -> str:
    """Run ``case(*args)`` of this module in a child Python; fail on a hang or crash."""
    paths = [str(Path(bitnet_go.__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")])}
    code = f"import test_crafted as t; t.{case}(*{args!r})"
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, cwd="/"
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}{args} did not finish in {timeout} s (a hang)")
    assert r.returncode == 0, f"{case}{args} exited with {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


class _Crafted:
    """Pickles as ``_rebuild(*args)`` whatever args are, as a crafted pickle would."""

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, self.args)


def _loads_crafted(*args: Any) -> Any:
    return pickle.loads(pickle.dumps(_Crafted(*args)))


# ---- reference decoders, written from the documented layouts ------------------


def _nibbles(rows: np.ndarray, count: int) -> np.ndarray:
    """Nibble i of each row (low nibble of byte i//2 for even i, high for odd)."""
    i = np.arange(count)
    return (rows[:, i // 2] >> (4 * (i % 2))) & 15


def _pairs(idx: np.ndarray, k: int) -> np.ndarray | None:
    """TL1 indices (rows, ceil(k/2)) to values (rows, k); None for an invalid index or padding."""
    if (idx > 8).any():
        return None
    w = np.stack([idx // 3 - 1, idx % 3 - 1], axis=2).reshape(idx.shape[0], -1).astype(np.int8)
    if k % 2 and (w[:, k] != 0).any():
        return None
    return w[:, :k]


def reference_values(qtype: str, shape: tuple[int, ...], packed: np.ndarray, *, lenient: bool = False) -> Any:
    """The flattened values of the packed bytes, or None when the Go side must refuse them.

    ``lenient``: ignore the I2_S padding (a kernel that never reads it may accept it).
    """
    n, rows = math.prod(shape), rows_of(shape)
    k = n // rows
    if qtype == "i2_s":
        p = np.arange(len(packed) // 32 * 128)
        codes = (packed[(p >> 7) * 32 + (p & 31)] >> (6 - 2 * ((p >> 5) & 3))) & 3
        if (codes[:n] == 3).any() or (not lenient and (codes[n:] != 1).any()):
            return None
        return codes[:n].astype(np.int8) - 1
    r = packed.reshape(rows, -1)
    if qtype == "tl1":
        w = _pairs(_nibbles(r, -(-k // 2)), k)
        return None if w is None else w.reshape(-1)
    t = k // 3
    mag = _nibbles(r, t).astype(np.int64)
    if (mag > 13).any():
        return None
    sign = (r[:, -(-t // 2) :][:, np.arange(t) // 8] >> (np.arange(t) % 8)) & 1
    v = np.where(sign == 1, -mag, mag)
    digits = []
    for _ in range(3):
        d = ((v % 3) + 3) % 3
        d = np.where(d == 2, -1, d)
        digits.append(d)
        v = (v - d) // 3
    w = np.stack(digits[::-1], axis=2).reshape(rows, 3 * t).astype(np.int8)
    if k % 3:
        rem = _pairs(r[:, -1:] & 15, k % 3)
        if rem is None:
            return None
        w = np.concatenate([w, rem], axis=1)
    return w.reshape(-1)


def _conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Valid, stride-1, float64 convolution of x (C, H, W) with w (O, C, kH, kW)."""
    win = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), w.shape[2:], axis=(1, 2))
    return np.einsum("cijab,ocab->oij", win, w.astype(np.float64))


# ---- the check of a tensor that was accepted ------------------------------------


def check_accepted(u: TernaryTensor, base: TernaryTensor | None = None) -> None:
    """u's fields are what _make promises, and every result agrees with them (twice)."""
    assert type(u) is TernaryTensor
    assert type(u.qtype) is str and u.qtype in QTYPES
    assert type(u.shape) is tuple and all(type(d) is int and d >= 1 for d in u.shape)
    n = math.prod(u.shape)
    assert u.block_size is None or (type(u.block_size) is int and u.block_size >= 1)
    assert u.method in (None, "absmean", "absmax")
    for a, dt, size in (
        (u.packed, np.uint8, packed_len(n, u.qtype, rows_of(u.shape))),
        (u.scales, np.float32, num_blocks(n, u.block_size)),
    ):
        assert type(a) is np.ndarray and a.dtype == dt and a.ndim == 1 and a.size == size
        assert a.flags.c_contiguous and a.flags.aligned and not a.flags.writeable
    assert u._addrs == (u.packed.ctypes.data, u.scales.ctypes.data)

    ref = reference_values(u.qtype, u.shape, u.packed)
    bs = n if num_blocks(n, u.block_size) == 1 else u.block_size
    per_value = u.scales[np.arange(n) // bs]
    for _ in range(2):  # a read out of bounds shows as results that change
        if ref is None:
            with pytest.raises(ValueError):
                u.values()
            with pytest.raises(ValueError):
                u.dequantize()
        else:
            np.testing.assert_array_equal(u.values().reshape(-1), ref)
            assert u.values().shape == u.shape
            np.testing.assert_array_equal(u.dequantize().reshape(-1), ref.astype(np.float32) * per_value)
        for q in QTYPES:
            if q == u.qtype:
                assert u.to(q) is u
            elif ref is None:
                with pytest.raises(ValueError):
                    u.to(q)
            elif q in TQ_PAYLOAD and u.qtype not in TQ_PAYLOAD:  # rows of 256k values, float16 block scales
                if (n // rows_of(u.shape)) % 256:
                    with pytest.raises(ValueError, match="multiple of 256"):
                        u.to(q)
                    continue
                try:
                    v = u.to(q)
                except ValueError as e:  # scales that change inside a block, or past float16
                    assert "block_size" in str(e) or "float16" in str(e), e
                    continue
                np.testing.assert_array_equal(v.values().reshape(-1), ref)
                np.testing.assert_array_equal(v.to(u.qtype).values().reshape(-1), ref)
                assert v.block_size == 256 and v.shape == u.shape
            else:
                v = u.to(q)
                np.testing.assert_array_equal(v.values().reshape(-1), ref)
                np.testing.assert_array_equal(v.to(u.qtype).values().reshape(-1), ref)
                assert v.scales is u.scales and v.shape == u.shape
    if base is not None and ref is not None and (u.qtype, u.shape) == (base.qtype, base.shape):
        if u.packed.tobytes() == base.packed.tobytes():
            np.testing.assert_array_equal(u.values(), base.values())
    if u.ndim == 4:
        _check_conv(u, ref)


_ALGOS_F32 = ("auto", "naive", "im2col", "direct")
_ALGOS_I8 = ("auto", "naive", "im2col", "direct", "lut")


def _check_conv(u: TernaryTensor, ref: np.ndarray | None) -> None:
    o, wc, kh, kw = u.shape
    x = np.random.default_rng(7).standard_normal((wc, kh + 1, kw + 2)).astype(np.float32)
    k = wc * kh * kw
    # a block size conv takes: none, a divisor of K, or one block covering the weight (one scale)
    blocks_ok = u.block_size is None or k % u.block_size == 0 or u.block_size >= u.size
    must_work = ref is not None and blocks_ok and bool(np.isfinite(u.scales).all())
    lenient = reference_values(u.qtype, u.shape, u.packed, lenient=True)
    for act_bits, algos in ((None, _ALGOS_F32), (8, _ALGOS_I8)):
        outs = []
        for algo in algos:
            try:
                out = bitnet_go.conv2d_quantized(x, u, act_bits=act_bits, algorithm=algo)
            except ValueError:
                assert not must_work, f"conv2d_quantized(algorithm={algo!r}, act_bits={act_bits}) refused {u!r}"
                continue
            # accepted: the weight's fields describe it (the padding aside, which no kernel reads)
            assert lenient is not None and blocks_ok
            again = bitnet_go.conv2d_quantized(x, u, act_bits=act_bits, algorithm=algo)
            np.testing.assert_array_equal(out, again)
            outs.append(out)
            big = float(np.abs(u.scales).max()) if np.isfinite(u.scales).all() else math.inf
            if act_bits is None and big < 1e30:
                bs = u.size if num_blocks(u.size, u.block_size) == 1 else u.block_size
                w = lenient.astype(np.float64) * u.scales[np.arange(u.size) // bs]
                want = _conv_ref(x, w.reshape(u.shape))
                np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * max(1.0, big) * k)
        if act_bits == 8:  # every algorithm gives the same bits
            for out in outs[1:]:
                np.testing.assert_array_equal(out, outs[0])


# ---- the tensors crafted pickles start from -----------------------------------


def _base_tensors() -> list[TernaryTensor]:
    rng = np.random.default_rng(1234)

    def q(shape: tuple[int, ...], **kw: Any) -> TernaryTensor:
        return bitnet_go.quantize_i2s(rng.standard_normal(shape).astype(np.float32), **kw)

    return [
        q((200,)),  # i2_s, per tensor, short last group
        q((3, 43), block_size=7, method="absmax"),  # n = 129: a second group of one value
        q((6, 3, 3, 3), block_size=27),  # conv weight, a scale per channel
        q((5, 2, 3, 3), block_size=18).to("tl1"),  # conv, TL1 (K = 18)
        q((4, 1, 2, 2)).to("tl2"),  # conv, TL2 (K = 4: one triple and a remainder)
        q((3, 5), block_size=4).to("tl1"),  # odd K: TL1 padding
        q((7,), block_size=3).to("tl2"),  # rank 1, K % 3 = 1
        q((2, 2, 1, 3), block_size=2).to("tl2"),  # K = 6, blocks across channels
    ]


def _hostile(field: str, v: Any, t: TernaryTensor, rng: np.random.Generator) -> list[Any]:
    """Values to put in place of field v of tensor t: wrong types, sizes, layouts."""
    n = t.size
    if field == "qtype":
        return [None, 0, 1, b"i2_s", "I2_S", "tl3", "", ["i2_s"], *QTYPES]
    if field == "shape":
        alt = [
            None, 5, "ab", [n], (n,), (-n,), (0,), (n, 0), (HUGE, 0), (0, HUGE), (2**40, 2**40), (HUGE,),
            (2**64,), (2**63, 1), (n + 1,), (True, n), (float(n),), (np.int64(n),), (n, -1), (-1, -n),
            (1,) * 100, (1,) * 63 + (n,), (1, n), (n, 1), tuple(reversed(v)), (1,) + v, v + (1,), (),
        ]  # fmt: skip
        if n > 1:
            alt += [(n - 1,), (2, n // 2) if n % 2 == 0 else (n, 1), (n // 2, 2) if n % 2 == 0 else (1, n)]
        return alt
    if field == "block_size":
        return [None, 0, -1, 1, 2, 3, n - 1, n, n + 1, 2**61, 2**70, True, False, 1.0, "4", np.int64(3), np.uint8(2)]
    if field == "method":
        return [None, "absmean", "absmax", "ABSMEAN", "", 0, b"absmean", ["absmean"]]
    a: np.ndarray = v
    raw = a.view(np.uint8)
    unaligned = np.frombuffer(b"\0" + raw.tobytes(), np.uint8, offset=1).view(a.dtype) if field == "scales" else None
    alt = [
        None, a.tolist(), a.tobytes(), a[:-1], np.concatenate([a, a[:1]]), a[:0], np.concatenate([a, a]),
        a[::-1].copy(), a[::-1], np.repeat(a, 2)[::2], a.reshape(1, -1), a.reshape(-1, 1), np.asarray(a[0]),
        a.astype(np.int8 if field == "packed" else np.float64), a.astype(np.uint16), a.astype(np.float16),
        a.astype(a.dtype.newbyteorder()), np.zeros_like(a), np.full_like(a, 255 if field == "packed" else np.nan),
        np.asfortranarray(np.repeat(a[None], 2, axis=0))[0], unaligned,
    ]  # fmt: skip
    if field == "packed":
        alt += [rng.integers(0, 256, a.size, dtype=np.uint8) for _ in range(4)]
        flipped = a.copy()
        flipped[-1] ^= 0xFF
        alt.append(flipped)
    else:
        alt += [
            np.full_like(a, np.inf), np.full_like(a, -np.inf), np.full_like(a, -0.0), np.full_like(a, 3e38),
            (rng.standard_normal(a.size) * 10).astype(np.float32), a.view(np.int32),
        ]  # fmt: skip
    try:
        import torch

        alt.append(torch.from_numpy(a.copy()))
    except ImportError:
        pass
    return alt


def _clean(e: BaseException) -> None:
    """A refusal: ValueError or TypeError naming one of the fields."""
    assert type(e) in (ValueError, TypeError), f"{type(e).__name__}: {e}"
    assert any(f in str(e) for f in FIELDS), f"message names no field: {e}"


def _case_fuzz_fields(seed: int) -> None:
    rng = np.random.default_rng(seed)
    accepted = refused = 0
    for t in _base_tensors():
        args = pickle.loads(pickle.dumps(t)).__reduce__()[1]
        check_accepted(_rebuild(*args), t)
        for i, field in enumerate(FIELDS):
            for bad in _hostile(field, args[i], t, rng):
                new = list(args)
                # fresh copies: _make makes the arrays it keeps read-only
                new[4], new[5] = np.array(args[4]), np.array(args[5])
                new[i] = bad
                # directly (the arrays as they are: strides, alignment) and
                # through a pickle (which stores arrays contiguous)
                for make in (_rebuild, _loads_crafted):
                    try:
                        u = make(*new)
                    except Exception as e:  # noqa: BLE001 - judged by _clean
                        _clean(e)
                        refused += 1
                        continue
                    check_accepted(u, t)
                    accepted += 1
    assert accepted > 50 and refused > 300, (accepted, refused)
    print(accepted, refused)


def _numpy_dtype_bytes(data: bytes) -> list[int]:
    """Positions of the bytes that make the arrays' dtypes in a pickle: from the
    dtype string to the BUILD that sets the dtype's state.

    They are left alone: numpy's dtype pickles are not safe against changes
    (a copy flag turned false lets BUILD rewrite numpy's own uint8 dtype for
    the whole process), which is numpy's business, not this package's.
    """
    import pickletools

    out: list[int] = []
    start = None
    for op, arg, pos in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE") and arg in ("u1", "f4"):
            start = pos
        elif op.name == "BUILD" and start is not None:
            out += range(start, pos + 1)
            start = None
    assert len(out) >= 2 * 20, "no dtype found in the pickle"
    return out


def _numpy_dtypes() -> list[Any]:
    return [
        (d.str, d.byteorder, d.itemsize, d.alignment, d.flags, d.kind) for d in map(np.dtype, ("u1", "i1", "f4", "i8"))
    ]


def _case_fuzz_pickle_bytes(seed: int, per_tensor: int) -> None:
    import bitnet_go._ternary as tern

    real = tern._rebuild
    odd: list[str] = []

    def spy(*args: Any) -> TernaryTensor:  # _rebuild itself may refuse only cleanly
        try:
            return real(*args)
        except Exception as e:
            if type(e) not in (ValueError, TypeError):
                odd.append(f"{type(e).__name__}: {e}")
            raise

    tensors = _base_tensors()
    pickles = [(t, pickle.dumps(t, protocol=protocol)) for t in tensors for protocol in (2, 4, 5)]
    tern._rebuild = spy  # what the pickles name: bitnet_go._ternary._rebuild
    rng = np.random.default_rng(seed)
    fingerprint = _numpy_dtypes()
    loaded = 0
    for t, data in pickles:
        free = np.setdiff1d(np.arange(len(data)), _numpy_dtype_bytes(data))
        for _ in range(per_tensor):
            b = bytearray(data)
            for _ in range(int(rng.integers(1, 4))):
                b[int(rng.choice(free))] = int(rng.integers(256))
            if rng.random() < 0.1:
                b = b[: int(rng.integers(len(b)))]
            try:
                u = pickle.loads(bytes(b))
            except Exception:  # noqa: BLE001 - pickle's own errors (UnpicklingError, EOFError, ...)
                continue
            finally:
                assert _numpy_dtypes() == fingerprint, f"this pickle changed numpy's own dtypes: {bytes(b)!r}"
            if isinstance(u, TernaryTensor):
                check_accepted(u, t)
                loaded += 1
    assert not odd, odd
    assert loaded > 0
    print(loaded)


def test_fuzz_pickle_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    _isolated("_case_fuzz_fields", 20240611)
    # the checker the fuzz relies on fails a tensor whose values() lie
    t = _base_tensors()[3]  # a TL1 conv weight: values, dequantize, to() and conv all checked
    check_accepted(t)
    real = TernaryTensor.values
    monkeypatch.setattr(TernaryTensor, "values", lambda self: -real(self))
    with pytest.raises(AssertionError):
        check_accepted(t)


def test_fuzz_pickle_bytes() -> None:
    _isolated("_case_fuzz_pickle_bytes", 7, 120)


# ---- the reproducers of the issue --------------------------------------------


def _case_zero_dim_huge_rows() -> None:
    for qtype in QTYPES:
        for shape in ((HUGE, 0), (0, HUGE), (HUGE, 0, 3)):
            with pytest.raises(ValueError, match="shape"):
                _loads_crafted(qtype, shape, None, None, np.zeros(0, np.uint8), np.ones(1, np.float32))


def test_pickle_zero_dim_huge_rows() -> None:
    _isolated("_case_zero_dim_huge_rows", timeout=60)


def _abi(name: str, *args: Any) -> None:
    _lib.call(name, *args)


def _case_abi_counts() -> None:
    buf = np.zeros(1024, np.uint8)  # room for the TQ formats' 512 values below
    vals = np.zeros(1024, np.int8)
    out = np.zeros(1024, np.float32)
    one = np.ones(1, np.float32)

    def ops3(q: str, shape: tuple[int, ...], plen: int) -> list[tuple[str, object, object]]:
        n = math.prod(shape) if all(v >= 0 for v in shape) else 0
        packed = descriptor.host(buf, q, shape=shape, scales=one)
        packed.nbytes = plen
        v = descriptor.host(vals, "int8", shape=shape)
        o = descriptor.host(out, "float32", shape=shape)
        v.nbytes, o.nbytes = min(max(n, 0), 1024), 4 * min(max(n, 0), 1024)
        return [("bng_unpack", packed, v), ("bng_pack", v, packed), ("bng_dequantize", packed, o)]

    def call(name: str, a: object, b: object) -> None:
        _abi(name, ctypes.byref(a), ctypes.byref(b))  # type: ignore[arg-type]

    for q in QTYPES:
        # counts that make no tensor: zero values, negative or overflowing dimensions
        for shape in ((0,), (HUGE, 0), (0, 6), (-1, 6), (HUGE, 2), (2**31, 2**31)):
            for name, a, b in ops3(q, shape, 2):
                with pytest.raises(ValueError, match="n .the number of values.|dimension|more than"):
                    call(name, a, b)
            nbytes, nscales = ctypes.c_int64(-1), ctypes.c_int64(-1)
            with pytest.raises(ValueError, match="n .the number of values.|dimension|more than"):
                lt = descriptor.layout(q, shape)
                _abi("bng_layout", ctypes.byref(lt), ctypes.byref(nbytes), ctypes.byref(nscales))
        # a packed length other than the exact one, in every direction
        shape = (2, 256) if q in TQ_PAYLOAD else (2, 3)  # TQ rows hold 256k values
        want = packed_len(math.prod(shape), q, 2)
        for plen in (want - 1, want + 1, 0, 64):
            for name, a, b in ops3(q, shape, plen):
                with pytest.raises(ValueError, match="packed must have"):
                    call(name, a, b)


def test_abi_counts_checked_before_any_loop() -> None:
    _isolated("_case_abi_counts", timeout=60)


def test_packed_len_arguments() -> None:
    assert packed_len(6, "tl2", 2) == 2 * 2
    with pytest.raises(ValueError, match="n .the number of values."):
        packed_len(0)
    with pytest.raises(ValueError, match="rows must be"):
        packed_len(6, "tl1", 12)
    with pytest.raises(ValueError, match="rows must be"):
        packed_len(6, "i2_s", 4)
    with pytest.raises(ValueError, match="qtype must be one of"):
        packed_len(6, "tl3")
    with pytest.raises(TypeError, match="qtype must be a str"):
        packed_len(6, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="n must be an int"):
        packed_len(True)
    with pytest.raises(ValueError, match="n must fit in int64"):
        packed_len(2**70)


def _case_i2s_bad_packed() -> None:
    t = bitnet_go.quantize_i2s(np.linspace(-1, 1, 200, dtype=np.float32))
    p, s = t.packed, np.array(t.scales)
    for bad, exc in (
        (p[:10].copy(), ValueError),
        (p[:-1].copy(), ValueError),
        (p.view(np.int8).copy(), TypeError),
        (p.astype(np.uint16), TypeError),
        (np.repeat(p, 2)[::-2], ValueError),  # negative stride, the right length
        (p[::-1], ValueError),
        (p.reshape(2, -1).copy(), ValueError),
    ):
        with pytest.raises(exc, match="packed must be"):
            _rebuild("i2_s", (200,), None, None, bad, s)
        if bad.flags.c_contiguous:  # a pickle stores arrays contiguous
            with pytest.raises(exc, match="packed must be"):
                _loads_crafted("i2_s", (200,), None, None, bad, s)


def test_pickle_i2s_bad_packed() -> None:
    _isolated("_case_i2s_bad_packed", timeout=60)


def _case_conv_weight_bad_packed() -> None:
    w = bitnet_go.quantize_conv_weight(np.random.default_rng(3).standard_normal((8, 4, 3, 3)).astype(np.float32))
    x = np.ones((1, 4, 6, 6), np.float32)
    want = bitnet_go.conv2d_quantized(x, w)
    args = list(w.__reduce__()[1])
    bad_packed = (args[4][:5].copy(), np.concatenate([args[4], args[4]])[::2], args[4].astype(np.int16))
    bad_scales = (args[5][:3].copy(), args[5].astype(np.float64), np.concatenate([args[5], args[5]])[::-2])
    for make in (_rebuild, _loads_crafted):
        for bad in bad_packed:
            if make is _rebuild or bad.flags.c_contiguous:  # a pickle stores arrays contiguous
                with pytest.raises((ValueError, TypeError), match="packed must be"):
                    make(*args[:4], bad, args[5])
        for bad in bad_scales:
            if make is _rebuild or bad.flags.c_contiguous:
                with pytest.raises((ValueError, TypeError), match="scales must be"):
                    make(*args[:5], bad)
    u = _loads_crafted(*args)
    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x, u), want)


def test_pickle_conv_weight_bad_packed() -> None:
    _isolated("_case_conv_weight_bad_packed", timeout=60)


def test_make_checks_every_field() -> None:
    t = bitnet_go.quantize_i2s(np.ones((4, 8), np.float32), block_size=8)
    ok = ("i2_s", (4, 8), 8, "absmean", np.array(t.packed), np.array(t.scales))
    cases: list[tuple[int, Any, type[Exception], str]] = [
        (0, "q4", ValueError, "qtype must be one of"),
        (0, 2, TypeError, "qtype must be a str"),
        (1, [4, 8], TypeError, "shape must be a tuple"),
        (1, (4, -8), ValueError, "shape must not have negative"),
        (1, (4, 0), ValueError, "has no elements"),
        (1, (2**31, 2**31, 2**31), ValueError, "overflows"),
        (1, (4, True), TypeError, "shape must be a tuple of ints"),
        (1, (1,) * 65, ValueError, "shape must have at most"),
        (2, 0, ValueError, "block_size must be >= 1"),
        (2, True, TypeError, "block_size must be an int"),
        (2, 8.0, TypeError, "block_size must be an int"),
        (3, "absmin", ValueError, "method must be one of"),
        (3, 1, TypeError, "method must be None or a str"),
        (4, np.zeros(9, np.uint8), ValueError, "packed must be .* 32 bytes"),
        (4, np.zeros(8, np.float32), TypeError, "packed must be .*got dtype float32"),
        (4, bytes(32), TypeError, "packed must be a numpy.ndarray"),
        (5, np.ones(3, np.float32), ValueError, "scales must be .* 4 entries"),
        (5, np.ones(4, np.float64), TypeError, "scales must be .*float64"),
        (5, np.ones((2, 2), np.float32), ValueError, "scales must be"),
        (5, np.frombuffer(bytes(17), np.float32, 4, 1), ValueError, "scales must be .*unaligned"),
        (5, [1.0] * 4, TypeError, "scales must be a numpy.ndarray"),
    ]
    for i, bad, exc, msg in cases:
        args = list(ok)
        args[i] = bad
        with pytest.raises(exc, match=msg):
            TernaryTensor._make(*args)
    u = TernaryTensor._make(*ok)
    np.testing.assert_array_equal(u.values(), t.values())
    assert not u.packed.flags.writeable and u._addrs == (u.packed.ctypes.data, u.scales.ctypes.data)
    # NaN and Inf scales are data
    nan = TernaryTensor._make(
        "i2_s", (4, 8), 8, None, np.array(t.packed), np.array([np.nan, np.inf, 0, -1], np.float32)
    )
    assert np.isnan(nan.dequantize()[0]).all() and (nan.dequantize()[3] == -1).all()


class _FakeCuda:
    """Looks like a CuPy array to _make (no GPU needed): shape, dtype, flags."""

    def __init__(self, a: np.ndarray) -> None:
        self.shape, self.dtype, self.flags, self.size = a.shape, a.dtype, a.flags, a.size
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "data": (0, False), "version": 3}


def test_make_device_arrays_checked_without_a_gpu() -> None:
    t = bitnet_go.quantize_i2s(np.ones(300, np.float32), block_size=100)
    p, s = _FakeCuda(t.packed), _FakeCuda(t.scales)
    u = TernaryTensor._make("i2_s", (300,), 100, "absmean", p, s)
    assert u.packed is p and u.on_device and u._addrs is None
    with pytest.raises(ValueError, match="packed must be .* 96 bytes"):
        TernaryTensor._make("i2_s", (300,), 100, "absmean", _FakeCuda(t.packed[:-1]), s)
    with pytest.raises(ValueError, match="scales must be .* 3 entries"):
        TernaryTensor._make("i2_s", (300,), 100, "absmean", p, _FakeCuda(t.scales[:2]))
    with pytest.raises(ValueError, match="scales must be .*float32"):
        TernaryTensor._make("i2_s", (300,), 100, "absmean", p, _FakeCuda(t.scales.astype(np.float64)))
    with pytest.raises(ValueError, match="GPU tensors are I2_S"):
        TernaryTensor._make("tl1", (300,), 100, "absmean", p, s)
    with pytest.raises(TypeError, match="scales must be a GPU array like packed"):
        TernaryTensor._make("i2_s", (300,), 100, "absmean", p, np.array(t.scales))
    with pytest.raises(TypeError, match="scales must be a numpy.ndarray like packed"):
        TernaryTensor._make("i2_s", (300,), 100, "absmean", np.array(t.packed), s)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="packed must be a numpy.ndarray"):  # a CPU torch tensor is neither
        TernaryTensor._make("i2_s", (300,), 100, "absmean", torch.from_numpy(np.array(t.packed)), s)


# ---- bitnet.cpp bytes -----------------------------------------------------------


def _cpp(n: int) -> tuple[TernaryTensor, bytes]:
    t = bitnet_go.quantize_i2s(np.random.default_rng(n).standard_normal(n).astype(np.float32))
    return t, t.to_bitnet_cpp_bytes()


@pytest.mark.parametrize("n", [1, 100, 127, 129, 200])
def test_bitnet_cpp_padding_must_be_code_1(n: int) -> None:
    t, data = _cpp(n)
    end = len(data) - 32
    for q in ("tl1", "tl2"):  # Pack writes the padding as quantize does
        assert t.to(q).to("i2_s").packed.tobytes() == t.packed.tobytes()
    for bs in (1, 3):
        blocked = bitnet_go.quantize_i2s(np.linspace(-1, 1, n, dtype=np.float32), block_size=bs)
        p = np.arange(n, -(-n // 128) * 128)
        assert ((blocked.packed[(p >> 7) * 32 + (p & 31)] >> (6 - 2 * ((p >> 5) & 3))) & 3 == 1).all()
    for p in range(n, -(-n // 128) * 128):
        b, sh = (p >> 7) * 32 + (p & 31), 6 - 2 * ((p >> 5) & 3)
        assert (data[b] >> sh) & 3 == 1  # what quantize wrote
        for code in (0, 2, 3):
            bad = bytearray(data)
            bad[b] = bad[b] & ~(3 << sh) & 0xFF | code << sh
            with pytest.raises(ValueError, match=f"padding: code {code} at position {p}"):
                TernaryTensor.from_bitnet_cpp_bytes(bytes(bad), (n,))
            # a tensor made another way with that padding: values() and dequantize() refuse it too
            u = _rebuild("i2_s", (n,), None, None, np.frombuffer(bytes(bad[:end]), np.uint8).copy(), np.array(t.scales))
            with pytest.raises(ValueError, match="padding"):
                u.values()
            with pytest.raises(ValueError, match="padding"):
                u.dequantize()
            with pytest.raises(ValueError, match="padding"):
                u.to("tl1")


@pytest.mark.parametrize("n", [1, 129, 200, 256])
def test_bitnet_cpp_reserved_tail_bytes(n: int) -> None:
    t, data = _cpp(n)
    end = len(data) - 32
    for k in (4, 5, 17, 31):
        bad = bytearray(data)
        bad[end + k] = 0x80
        with pytest.raises(ValueError, match=f"reserved bytes .* tail byte {k}"):
            TernaryTensor.from_bitnet_cpp_bytes(bytes(bad), (n,))
    for k in range(4):  # the scale's bytes are the scale's
        ok = bytearray(data)
        ok[end + k] ^= 0x01
        assert TernaryTensor.from_bitnet_cpp_bytes(bytes(ok), (n,)).scales[0] != t.scales[0]


def test_bitnet_cpp_any_contiguous_buffer() -> None:
    t, data = _cpp(200)  # 64 + 32 bytes
    arr = np.frombuffer(data, np.uint8)
    good = [
        data, bytearray(data), memoryview(data), arr, arr.copy().view(np.float32), arr.view(np.float32).reshape(4, 6),
        arr.view(np.int16).reshape(2, 3, 8), arr.view(">u4"), arr.view(np.complex64), memoryview(arr.reshape(8, 12)),
        arr.reshape(96, 1, 1), arr.view(np.float64).reshape(3, 4).copy(order="C"), arr.view("M8[s]"),
    ]  # fmt: skip
    for d in good:
        u = TernaryTensor.from_bitnet_cpp_bytes(d, (200,))
        np.testing.assert_array_equal(u.values(), t.values())
        assert u.scales[0] == t.scales[0]
    wide = np.frombuffer(data * 2, np.uint8).reshape(2, 96)
    bad = [
        arr.reshape(8, 12)[:, ::2], np.repeat(arr, 2)[::2], arr[::-1], wide.T, memoryview(wide.T),
        np.asfortranarray(arr.reshape(8, 12)), memoryview(np.asfortranarray(arr.reshape(8, 12))),
    ]  # fmt: skip
    for d in bad:
        with pytest.raises(TypeError, match="must be contiguous"):
            TernaryTensor.from_bitnet_cpp_bytes(d, (200,))
    with pytest.raises(TypeError, match="bytes-like"):
        TernaryTensor.from_bitnet_cpp_bytes("text", (200,))
    with pytest.raises(TypeError, match="Python objects"):
        TernaryTensor.from_bitnet_cpp_bytes(np.zeros(12, object), (200,))
