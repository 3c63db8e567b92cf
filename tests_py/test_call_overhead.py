"""What the per-call fast paths must keep: descriptors that point at the arrays they describe
(never a stale address after arrays are freed and their memory reused), the fields the C ABI
reads, and the messages users see. Timings are not tested here (see the report of the change).

Random data is fresh per case from the seed in the test id.
"""

from __future__ import annotations

import ctypes
import gc
import pickle
from typing import Any

import numpy as np
import pytest

import bitnet_go
from bitnet_go import functional as F
from bitnet_go._core import descriptor, lib, ops
from bitnet_go._quantized import PlainTensor
from bitnet_go.quantization import _api

SEEDS = range(4)


def _addr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


def _check_desc(q: PlainTensor) -> None:
    """q's kept descriptor describes q's own arrays, field by field."""
    d = q._descriptor()
    assert d.version == descriptor.TENSOR_V1 and d.dtype == descriptor.DTYPES[q.qtype]
    assert (d.device_type, d.device_id, d.stream) == (descriptor.CPU, 0, 0)
    assert d.data == _addr(q.packed) and d.nbytes == q.packed.nbytes
    assert d.scales == _addr(q.scales) and d.n_scales == q.scales.size
    if q.zero_points is None:
        assert (d.zero_points, d.n_zero_points) == (None, 0)
    else:
        assert d.zero_points == _addr(q.zero_points) and d.n_zero_points == q.zero_points.size
    shape = q.shape or (1,)
    assert d.ndim == len(shape) and [d.shape[i] for i in range(d.ndim)] == list(shape)
    assert d.axis == (-1 if q.axis is None else q.axis) and d.block_size == (q.block_size or 0)
    assert not d.strides


def _expected(q: PlainTensor) -> np.ndarray:
    """dequantize() by NumPy, for per-tensor int8/uint8 tensors."""
    codes = q.packed.view(np.int8 if q.qtype == "int8" else np.uint8).astype(np.float32)
    zp = 0 if q.zero_points is None else float(q.zero_points[0])
    return (q.scales[0] * (codes - np.float32(zp))).reshape(q.shape)


@pytest.mark.parametrize("seed", SEEDS)
def test_tensor_packs_every_field_where_ctypes_reads_it(seed: int) -> None:
    """descriptor.tensor writes all fields in one struct.pack_into: each reads back through ctypes."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 9, rng.integers(0, 6)))
    v = [int(x) for x in rng.integers(1, 2**40, 8)]
    t = descriptor.tensor(int(rng.integers(0, 24)), shape, v[0], v[1], int(rng.integers(-1, 4)), v[2], v[3], v[4],
                          v[5], v[6], descriptor.CUDA, int(rng.integers(0, 8)), v[7])  # fmt: skip
    got = (t.data, t.nbytes, t.block_size, t.scales, t.n_scales, t.zero_points, t.n_zero_points, t.stream)
    assert got == (v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
    assert (t.version, t.device_type, t.ndim) == (descriptor.TENSOR_V1, descriptor.CUDA, len(shape))
    assert [t.shape[i] for i in range(len(shape))] == list(shape) and not t.strides


def test_address_is_the_data_address_for_every_kind_of_array() -> None:
    """address() equals ndarray.ctypes.data for writable, read-only, empty, 0-d and strided arrays."""
    base = np.arange(24, dtype=np.float32)
    ro = np.frombuffer(base.tobytes(), np.float32)
    arrays = [base, base[3:], ro, ro[5:], np.empty(0, np.uint8), np.array(3.0, np.float32), base[::2],
              base.reshape(4, 6)[:, 1:]]  # fmt: skip
    for a in arrays:
        assert descriptor.address(a) == _addr(a), (a.shape, a.strides, a.flags.writeable)


@pytest.mark.parametrize("seed", SEEDS)
def test_kept_descriptors_never_point_at_freed_arrays(seed: int) -> None:
    """Tensors made by every fast path, most of them freed at once (their memory reused by the
    next ones): each live tensor's kept descriptor points at its own arrays, and the ops read
    them right (dequantize() against NumPy, add and relu of the chained results)."""
    rng = np.random.default_rng(seed)
    kept: list[PlainTensor] = []
    for i in range(150):
        n = int(rng.integers(1, 300))
        dt = "uint8" if rng.random() < 0.5 else "int8"
        zp = int(rng.integers(0, 100))
        x = rng.standard_normal(n).astype(np.float32)
        scale = float(rng.uniform(0.01, 0.1)) if i % 3 else 0.05  # some repeat: the kept qparams
        a = bitnet_go.quantize(x, dt, scale=scale, zero_point=zp)
        b = bitnet_go.quantize(x[::-1].copy(), dt, scale=scale * 2, zero_point=zp // 2)
        general = bitnet_go.quantize(x.reshape(1, n), dt, scale=np.float32([scale]), zero_point=np.int32([zp]))
        made = [a, b, F.add(a, b, scale=0.2, zero_point=zp), F.relu(a), F.add_relu(a, b, scale=scale, zero_point=0),
                F.requantize(a, 0.1, 3), pickle.loads(pickle.dumps(a)), general]  # fmt: skip
        for q in made:
            assert isinstance(q, PlainTensor)
            _check_desc(q)
        kept.append(made[int(rng.integers(0, len(made)))])
        del made, a, b
        if i % 16 == 0:
            gc.collect()
    gc.collect()
    for q in kept:
        _check_desc(q)
        np.testing.assert_array_equal(q.dequantize(), _expected(q))
        r = F.relu(q)
        np.testing.assert_array_equal(r.int_repr(), np.maximum(q.int_repr(), q.zero_points[0]))


def test_output_qparams_are_kept_read_only_and_survive_eviction() -> None:
    """Results quantized with the same Python float scale and int zero point share read-only
    arrays; filling the cache past its size starts it again without touching live tensors."""
    x = np.linspace(-1, 1, 50, dtype=np.float32)
    q1 = bitnet_go.quantize(x, "uint8", scale=0.01, zero_point=100)
    q2 = F.add(q1, q1, scale=0.01, zero_point=100)
    assert q1.scale is q2.scale and q1.zero_point is q2.zero_point
    for a in (q1.scale, q1.zero_point, q2.packed):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 1
    first = [bitnet_go.quantize(x, "int8", scale=0.001 * (k + 1), zero_point=0) for k in range(2 * _api._OUTPUTS_MAX)]
    assert len(_api._OUTPUTS) <= _api._OUTPUTS_MAX
    for k, q in enumerate(first):
        _check_desc(q)
        assert q.scales[0] == np.float32(0.001 * (k + 1))
        np.testing.assert_array_equal(q.dequantize(), _expected(q))


def test_the_fast_paths_give_what_the_general_ones_give() -> None:
    """A float scale and int zero point (kept arrays) give the bytes numpy scalars and arrays give."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 17)).astype(np.float32)
    for dt in ("int8", "uint8", "int4", "uint4"):
        fast = bitnet_go.quantize(x, dt, scale=0.07, zero_point=1)
        slow = bitnet_go.quantize(x, dt, scale=np.float64(0.07), zero_point=np.int64(1))
        assert fast.packed.tobytes() == slow.packed.tobytes() and fast.scales.tobytes() == slow.scales.tobytes()
        assert fast.zero_points.tobytes() == slow.zero_points.tobytes()
    qa, qb = (bitnet_go.quantize(v, "uint8", scale=0.02, zero_point=128) for v in (x, x.T.copy().T))
    f = F.add(qa, qb, scale=0.05, zero_point=7)
    s = F.add(qa, qb, scale=np.float32(0.05), zero_point=np.int8(7))
    assert f.packed.tobytes() == s.packed.tobytes() and f.shape == s.shape == (3, 17)


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        (dict(scale=True, zero_point=0), TypeError, "scale must be real numbers, got dtype bool"),
        (dict(scale="0.5", zero_point=0), TypeError, "scale must be real numbers, got dtype <U3"),
        (dict(scale=0.5, zero_point=1.5), TypeError, "zero_point must be integers, got dtype float64"),
        (dict(scale=0.5, zero_point=2**31), ValueError, "zero_point must fit in int32, got 2147483648..2147483648"),
        (dict(scale=[0.5, 0.5], zero_point=0), ValueError,
         "scale must be one value (per tensor), got 2"),
        (dict(scale=0.0, zero_point=0), ValueError, "scale must be finite and > 0, got 0"),
        (dict(scale=-0.0, zero_point=0), ValueError, "scale must be finite and > 0, got -0"),
        (dict(scale=float("nan"), zero_point=0), ValueError, "scale must be finite and > 0, got NaN"),
        (dict(scale=0.5, zero_point=300), ValueError, "zero_point must be in [quant_min, quant_max] = [0, 255]"),
        (dict(zero_point=3), ValueError, "zero_point is given without scale: give both, or neither"),
        (dict(scheme="nope"), ValueError, "scheme must be one of ['affine', 'symmetric'], got 'nope'"),
        (dict(scheme="symmetric", reduce_range=True), ValueError,
         "reduce_range is not supported with the symmetric scheme for uint8 (as in torch)"),
    ],
)  # fmt: skip
def test_quantize_messages_are_the_same(kwargs: dict[str, Any], exc: type[Exception], message: str) -> None:
    """The checks moved off the common path say what they said before, in the same order."""
    with pytest.raises(exc) as info:
        bitnet_go.quantize(np.float32([0.5, -1.0]), "uint8", **kwargs)
    assert message in str(info.value), str(info.value)


def test_qelem_output_messages_are_the_same() -> None:
    """The element-wise ops check the output's scale and zero point as the other functional ops do."""
    q = bitnet_go.quantize(np.float32([0.5, -1.0]), "int8", scale=0.1, zero_point=0)
    for kwargs, exc, message in (
        (dict(scale=0.1, zero_point=200), ValueError, "zero_point must be in int8's range [-128, 127], got 200"),
        (dict(scale=float("inf"), zero_point=0), ValueError, "scale must be finite and > 0, got inf"),
        (dict(scale=0.1, zero_point=0.5), TypeError, "zero_point must be an int, got float 0.5"),
        (dict(scale=None, zero_point=0), TypeError, "scale and zero_point (the output's quantization) are required"),
        (dict(scale=[0.1], zero_point=0), TypeError, "scale must be a number, got list [0.1]"),
    ):
        with pytest.raises(exc) as info:
            F.add(q, q, **kwargs)
        assert message in str(info.value), str(info.value)


class _FakeCudaTensor:
    """Looks like a torch tensor on a GPU to bitnet_go's checks (no torch needed)."""

    __module__ = "torch"

    class device:  # noqa: N801 - torch's attribute
        type = "cuda"

        def __str__(self) -> str:
            return "cuda:0"

    device = device()  # type: ignore[assignment,misc]
    is_cpu = False
    requires_grad = False

    def detach(self) -> _FakeCudaTensor:
        return self

    def cpu(self) -> object:
        raise AssertionError("a GPU scale must not be copied to the host")


def test_a_gpu_scale_is_refused_not_copied() -> None:
    """_as_params reads torch tensors through as_host, which refuses device memory (it used to
    copy a CUDA scale to the host with .cpu())."""
    with pytest.raises(ValueError, match=r"scale is a torch tensor on cuda:0; this function takes host memory"):
        bitnet_go.quantize(np.float32([1.0]), "uint8", scale=_FakeCudaTensor(), zero_point=0)
    with pytest.raises(ValueError, match=r"zero_point is a torch tensor on cuda:0"):
        bitnet_go.quantize(np.float32([1.0]), "uint8", scale=0.5, zero_point=_FakeCudaTensor())


@pytest.mark.needs("torch")
def test_torch_scales_of_every_float_type() -> None:
    """CPU torch scales and zero points: float32/float64/bfloat16 scales (bfloat16 through float32,
    numpy has no bfloat16), integer zero points; a float zero point is refused as before."""
    import torch

    x = np.linspace(-2, 2, 33, dtype=np.float32)
    want = bitnet_go.quantize(x, "int8", scale=0.125, zero_point=-3)
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        q = bitnet_go.quantize(x, "int8", scale=torch.tensor(0.125, dtype=dt), zero_point=torch.tensor(-3))
        assert q.packed.tobytes() == want.packed.tobytes(), dt
    with pytest.raises(TypeError, match="zero_point must be integers, got dtype float32"):
        bitnet_go.quantize(x, "int8", scale=0.125, zero_point=torch.tensor(1.0))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("scales", 0, "packed.scales is NULL but its length is 1"),
        ("zero_points", 0, "packed.zero_points is NULL but its length is 1"),
        ("n_scales", -1, "packed: nbytes, n_scales and n_zero_points must be non-negative, got 4, -1, 1"),
        ("shape", 0, "packed.shape is NULL but its length is 1"),
    ],
)
def test_decode_names_the_field_in_its_messages(field: str, value: int, message: str) -> None:
    """Go joins an operand's name and field (``packed.scales``) only for an error: the messages
    are those of the names it used to build on every call."""
    q = bitnet_go.quantize(np.float32([1, 2, 3, 4]), "uint8", scale=0.5, zero_point=1)
    src = descriptor.Tensor.from_buffer_copy(q._descriptor())
    src._keep = q._descriptor()._keep
    setattr(src, field, value or None)
    args = (ctypes.byref(src), ctypes.byref(ops._f32(np.empty(4, np.float32))))
    with pytest.raises(ValueError) as info:
        lib.call("bng_dequantize", *args)
    assert str(info.value) == message


def test_an_export_looked_up_once_still_reports_a_missing_one() -> None:
    """lib.call keeps the exports it has looked up; one the library lacks is still a RuntimeError
    naming it, every time."""
    if "bng_not_in_this_library" not in lib._SIGNATURES:
        lib.declare({"bng_not_in_this_library": (lib.I32, [], True)})
    for _ in range(2):
        with pytest.raises(RuntimeError, match="has no export bng_not_in_this_library"):
            lib.call("bng_not_in_this_library")
    assert "bng_not_in_this_library" not in lib._bound


def test_derived_values_never_outlive_or_leak_to_another_array() -> None:
    """A weight's derived values (functional's codes and row sums, GPU copies) die with its
    array, and a new array at a freed array's address never gets them."""
    from bitnet_go._core.arrays import Derived

    d = Derived()
    seen: set[int] = set()
    for i in range(200):  # freed arrays' addresses get reused by the next ones
        a = np.full(64, i, np.int64)
        assert d.get(a, "sum", lambda a=a: int(a.sum())) == 64 * i
        assert d.get(a, "sum", lambda: -1) == 64 * i  # kept while a lives
        seen.add(id(a))
        del a
        assert len(d) == 0  # nothing kept past the array
    assert len(seen) < 200  # the reuse the check above is about did happen
    keep = [np.zeros(1) for _ in range(3)]
    for j, a in enumerate(keep):
        d.get(a, "k", lambda j=j: j)
    assert [d.get(a, "k", lambda: -1) for a in keep] == [0, 1, 2] and len(d) == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_the_kept_conv2d_call_gives_what_a_first_call_gives(seed: int) -> None:
    """conv2d_quantized's later calls (a kept plan and a call prepared on this thread for x's shape,
    ops.conv2d_run_kept) give the bits a first call gives: new input and output arrays each call
    (the earlier ones freed, their memory reused), inputs of several shapes and with a bias (the
    general path) in between, a new weight of the same geometry, float32 and int8 activations."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 12, 5, 7), (2, 12, 5, 7), (1, 12, 9, 4)]
    weights = [bitnet_go.quantize_conv_weight(rng.standard_normal((6, 12, 3, 3), dtype=np.float32)) for _ in range(2)]
    bias = rng.standard_normal(6).astype(np.float32)
    for i in range(60):
        w = weights[int(rng.integers(0, 2))]
        x = rng.standard_normal(shapes[int(rng.integers(0, len(shapes)))], dtype=np.float32)
        ab = None if i % 2 else 8
        b = bias if i % 7 == 0 else None
        got = bitnet_go.conv2d_quantized(x, w, b, padding=1, act_bits=ab)
        # the same call made afresh: a new tensor of the same bytes has no kept plan
        fresh = pickle.loads(pickle.dumps(w))
        assert fresh.packed.tobytes() == w.packed.tobytes() and fresh._plans is None
        want = bitnet_go.conv2d_quantized(x.copy(), fresh, b, padding=1, act_bits=ab)
        np.testing.assert_array_equal(got, want, err_msg=f"call {i}")
        if i % 10 == 0:
            gc.collect()


def test_the_kept_conv2d_call_reports_what_go_finds() -> None:
    """On the kept call's path Go still checks the values: a NaN in x is the ValueError a first
    call gives, and a later valid call is right."""
    rng = np.random.default_rng(3)
    w = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 8, 1, 1), dtype=np.float32))
    x = rng.standard_normal((2, 8, 3, 3), dtype=np.float32)
    want = bitnet_go.conv2d_quantized(x, w, act_bits=8)  # prepares the call for this shape
    bad = x.copy()
    bad[1, 2, 0, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        bitnet_go.conv2d_quantized(bad, w, act_bits=8)
    np.testing.assert_array_equal(bitnet_go.conv2d_quantized(x.copy(), w, act_bits=8), want)


def test_is_torch_tensor_answers_by_type_as_the_full_test() -> None:
    """arrays.is_torch_tensor keeps its answer per type: the same answers, asked twice, as the test
    it keeps (a type of a ``torch`` module with ``detach`` and ``device``)."""
    from bitnet_go._core.arrays import is_torch_tensor

    torch = pytest.importorskip("torch")

    def fake(module: str, *attrs: str) -> object:
        body = {a: property(lambda self: None) for a in attrs}
        cls = type("Fake", (), {"__module__": module, **body})
        return cls()

    cases = [
        (torch.zeros(2), True),
        (torch.nn.Parameter(torch.zeros(2)), True),
        (torch.zeros(2, requires_grad=True), True),
        (torch.Size([2]), False),
        (torch.float32, False),
        (np.zeros(2), False),
        ([1.0], False),
        (fake("torch.fake", "detach", "device"), True),
        (fake("torch.fake", "detach"), False),
        (fake("torchvision.x", "detach", "device"), False),
        (fake("mylib", "detach", "device"), False),
    ]
    for _ in range(2):  # the second time from the kept answers
        for x, want in cases:
            assert is_torch_tensor(x) is want, (type(x), type(x).__module__)
