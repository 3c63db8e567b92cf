"""conv2d_quantized / linear_quantized on CUDA (W1.58A8), against the CPU path bit for bit.

- Fake driver (always, with g++): a fake ``libcuda.so.1`` whose kernels run
  on the CPU emulator (cuda/testdata/emu) takes the driver's place; the C
  ABI ``bng_cuda_conv2d`` is called with device descriptors of fake device
  memory: results against the CPU path, the finiteness messages, device
  checks, and no device memory left behind after many calls.
- GPU tests: torch CUDA tensors end to end; they skip, saying why, when no
  CUDA GPU is found.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
import bitnet_go.cuda as cuda
from test_cuda import _python, fake_driver  # noqa: F401 (the fixture)

REASON = cuda.unavailable_reason()
gpu = pytest.mark.skipif(REASON is not None, reason=f"no CUDA GPU found, GPU test not run: {REASON}")

FAKE_SCRIPT = r"""
import ctypes
import numpy as np
import bitnet_go, bitnet_go.cuda as c
from bitnet_go import _gpu  # declares bng_cuda_conv2d
from bitnet_go._core import descriptor, lib, ops

fake = ctypes.CDLL("libcuda.so.1")
fake.fake_alloc.restype, fake.fake_alloc.argtypes = ctypes.c_uint64, [ctypes.c_size_t]
fake.fake_free.argtypes = [ctypes.c_uint64]
fake.fake_live.restype = ctypes.c_longlong
total = c.memory_info(0)[1]
rng = np.random.default_rng(7)

def put(a):
    p = fake.fake_alloc(max(a.nbytes, 1))
    ctypes.memmove(p, a.ctypes.data, a.nbytes)
    return p

def conv_gpu(x, w, bias, stride, pad, dil, groups, check=True, dev=(0, 0, 0, 0, 0), act_bits=8):
    n, ch, h, wd = x.shape
    o, _, kh, kw = w.shape
    ho = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    size = ctypes.c_int64()
    lib.call("bng_cuda_conv2d_workspace", n, ch, h, wd, ctypes.byref(size))
    ptrs = [put(x), put(w.packed), put(w.scales), fake.fake_alloc(4 * n * o * ho * wo), fake.fake_alloc(size.value)]
    if bias is not None:
        ptrs.append(put(bias))
    try:
        xt = descriptor.device(ptrs[0], x.nbytes, "float32", x.shape, dev[0])
        wt = descriptor.device(ptrs[1], w.packed.nbytes, "i2_s", w.shape, dev[1], scales=ptrs[2],
                               n_scales=w.scales.size, block_size=w.block_size)
        ot = descriptor.device(ptrs[3], 4 * n * o * ho * wo, "float32", (n, o, ho, wo), dev[2])
        kt = descriptor.device(ptrs[4], size.value, "uint8", (size.value,), dev[3])
        bt = None if bias is None else ctypes.byref(descriptor.device(ptrs[5], bias.nbytes, "float32", (o,), dev[4]))
        p = ops._conv_params(stride, pad, dil, groups, act_bits or 0, 0, int(check))
        info = descriptor.OpInfo(descriptor.OP_INFO_V1)
        lib.call("bng_cuda_conv2d", ctypes.byref(xt), ctypes.byref(wt), bt, ctypes.byref(ot), ctypes.byref(kt),
                 ctypes.byref(p), ctypes.byref(info))
        out = np.frombuffer(ctypes.string_at(ptrs[3], 4 * n * o * ho * wo), np.float32).reshape(n, o, ho, wo)
        return out, info.kernel.decode()
    finally:
        for q in ptrs:
            fake.fake_free(q)

def conv_cpu(x, w, bias, stride, pad, dil, groups, check=True, act_bits=8):
    return bitnet_go.conv2d_quantized(x, w, bias, stride=stride, padding=(pad[0], pad[1]), dilation=dil,
                                      groups=groups, act_bits=act_bits, check_finite=check)

def close(a, b, what):  # test_conv.py's tolerances for the CPU float kernels
    assert a.shape == b.shape, what
    err = np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b), 1e-30)
    assert err <= 1e-5, (what, err)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=str(what))

def same(a, b, what):
    assert a.shape == b.shape and a.view(np.uint32).tobytes() == b.view(np.uint32).tobytes(), what

base = (c.memory_info(0)[0], fake.fake_live(0))
cases = [  # (N, C, H, W), (O, kH, kW), stride, pad, dilation, groups, per_channel, bias
    ((2, 3, 9, 8), (5, 3, 3), (1, 1), 1, (1, 1), 1, True, True),
    ((1, 6, 7, 10), (4, 3, 2), (2, 1), 2, (1, 2), 2, False, False),
    ((3, 4, 6, 5), (4, 3, 3), (1, 2), 1, (1, 1), 4, True, True),
    ((2, 256, 1, 1), (9, 1, 1), (1, 1), 0, (1, 1), 1, True, True),  # a linear layer: the GEMV kernel
    ((5, 100, 1, 1), (3, 1, 1), (1, 1), 0, (1, 1), 1, True, False),  # K 100: the unaligned GEMV
    ((9, 37, 1, 1), (6, 1, 1), (1, 1), 0, (1, 1), 1, False, True),  # K odd, 2 launches
]
kernels = {256: "cuda_gemv/dp4a", 100: "cuda_gemv_unaligned/dp4a", 37: "cuda_gemv_unaligned/dp4a"}
for xs, (o, kh, kw), stride, p, dil, groups, per_channel, has_bias in cases:
    x = rng.standard_normal(xs, dtype=np.float32)
    w = bitnet_go.quantize_conv_weight(rng.standard_normal((o, xs[1] // groups, kh, kw), dtype=np.float32),
                                       per_channel=per_channel)
    b = rng.standard_normal(o, dtype=np.float32) if has_bias else None
    got, kernel = conv_gpu(x, w, b, stride, (p, p, p, p), dil, groups)
    assert kernel == kernels.get(xs[1], "cuda_implicit_gemm/dp4a"), kernel
    same(got, conv_cpu(x, w, b, stride, (p, p, p, p), dil, groups), (xs, o))
    # float32 activations: within float32 rounding of the CPU's float path and of the dequantized weight's conv
    got, kernel = conv_gpu(x, w, b, stride, (p, p, p, p), dil, groups, act_bits=None)
    linear = xs[2:] == (1, 1) and (kh, kw) == (1, 1)
    assert kernel == ("cuda_gemv/fp32" if linear and xs[0] <= 8 else "cuda_implicit_gemm/fp32"), kernel
    close(got, conv_cpu(x, w, b, stride, (p, p, p, p), dil, groups, act_bits=None), (xs, o, "float"))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w.dequantize()).double(),
                                         None if b is None else torch.from_numpy(b).double(), stride=stride,
                                         padding=p, dilation=dil, groups=groups).numpy()
        close(got, ref, (xs, o, "float vs F.conv2d"))

# non-finite x, bias, scales: the CPU path's messages; unchecked: the CPU path's bits
x = rng.standard_normal((2, 3, 5, 5), dtype=np.float32)
w = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 3, 3, 3), dtype=np.float32))
x[1, 2, 3, 1], x[1, 2, 4, 0] = np.nan, np.inf
args = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
msgs = []
for f in (conv_gpu, conv_cpu):
    try:
        f(x, w, None, *args)
    except ValueError as e:
        msgs.append(str(e))
assert len(msgs) == 2 and msgs[0] == msgs[1] and "(1, 2, 3, 1)" in msgs[0], msgs
same(conv_gpu(x, w, None, *args, check=False)[0], conv_cpu(x, w, None, *args, check=False), "unchecked")
msgs = []
for f in (conv_gpu, conv_cpu):
    try:
        f(x, w, None, *args, act_bits=None)
    except ValueError as e:
        msgs.append(str(e))
assert len(msgs) == 2 and msgs[0] == msgs[1] and "(1, 2, 3, 1)" in msgs[0], msgs
nan_gpu = np.isnan(conv_gpu(x, w, None, *args, check=False, act_bits=None)[0])
nan_cpu = np.isnan(conv_cpu(x, w, None, *args, check=False, act_bits=None))
assert (nan_gpu == nan_cpu).all() and nan_gpu.any(), "float: NaN/Inf spread as on the CPU"
x = np.nan_to_num(x)
bias = np.array([0, 1, np.inf, 2], np.float32)
msgs = []
for f in (conv_gpu, conv_cpu):
    try:
        f(x, w, bias, *args)
    except ValueError as e:
        msgs.append(str(e))
assert len(msgs) == 2 and msgs[0] == msgs[1] and "bias contains NaN or Inf" in msgs[0], msgs

# weight codes 3 (never written by quantization): the CPU path's message, with the finite check
from bitnet_go._ternary import TernaryTensor
for xs, ws in (((2, 3, 5, 5), (4, 3, 3, 3)), ((3, 256, 1, 1), (5, 256, 1, 1))):
    xc = rng.standard_normal(xs, dtype=np.float32)
    wc = bitnet_go.quantize_conv_weight(rng.standard_normal(ws, dtype=np.float32))
    for pos in (int(rng.integers(1, wc.size)), wc.size - 1):
        packed = np.array(wc.packed)
        for p in (pos, pos + 130, wc.size + 1):  # the first value, a later one, one in the padding
            if p < (wc.size + 127) // 128 * 128:
                packed[(p >> 7) << 5 | p & 31] |= 3 << (6 - 2 * ((p >> 5) & 3))
        bad = TernaryTensor._make("i2_s", wc.shape, wc.block_size, wc.method, packed, wc.scales)
        for ab in (8, None):
            msgs = []
            for f in (conv_gpu, conv_cpu):
                try:
                    f(xc, bad, None, (1, 1), (0, 0, 0, 0), (1, 1), 1, act_bits=ab)
                except ValueError as e:
                    msgs.append(str(e))
            assert msgs == [f"weight: invalid I2_S code 3 at element {pos}"] * 2, (msgs, pos)

# operands on two devices, act_bits other than 8: ValueErrors before any work
for dev in [(0, 1, 0, 0, 0), (0, 0, 0, 1, 0)]:
    try:
        conv_gpu(x, w, None, *args, dev=dev)
        raise AssertionError("two devices accepted")
    except ValueError as e:
        assert "every operand must be on the same CUDA device" in str(e), e

# no device memory left behind by many calls (the op allocates nothing itself)
for i in range(200):
    ab = None if i % 3 == 0 else 8
    conv_gpu(x[:1, :, :3, :3], w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1, check=i % 2 == 0, act_bits=ab)
# the benchmark's timer (bench conv --device cuda): the kernels between two events, both activation kinds
from bitnet_go.diagnostics import request
xs = x[:1]
size = ctypes.c_int64()
lib.call("bng_cuda_conv2d_workspace", *xs.shape, ctypes.byref(size))
ptrs = [put(xs), put(w.packed), put(w.scales), fake.fake_alloc(4 * 4 * 25), fake.fake_alloc(size.value)]
targs = dict(dev=0, stream=0, x=ptrs[0], w=ptrs[1], scales=ptrs[2], bias=0, out=ptrs[3], work=ptrs[4],
             w_bytes=w.packed.nbytes, n_scales=w.scales.size, block_size=w.block_size or 0, work_len=size.value,
             x_shape=list(xs.shape), w_shape=list(w.shape), stride=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1],
             groups=1)
for ab in (8, 0):
    ms = request("cuda_time_conv2d", **targs, act_bits=ab, repeat=3)["ms"]
    assert ms >= 0, ms
    out = np.frombuffer(ctypes.string_at(ptrs[3], 4 * 4 * 25), np.float32).reshape(1, 4, 5, 5)
    ref = conv_cpu(xs, w, None, *args, act_bits=ab or None)
    if ab:
        same(out, ref, "timed A8 run")
    else:
        close(out, ref, "timed f32 run")
try:
    request("cuda_time_conv2d", **dict(targs, w_bytes=1), act_bits=8, repeat=1)
    raise AssertionError("a wrong weight size accepted")
except ValueError as e:
    assert "weight: packed must have" in str(e), e
for q in ptrs:
    fake.fake_free(q)
assert (c.memory_info(0)[0], fake.fake_live(0)) == base, (c.memory_info(0), fake.fake_live(0), base)
assert c.memory_info(0)[0] == total
print("fake conv: OK")
"""


def test_conv_on_a_fake_driver(fake_driver: Path) -> None:  # noqa: F811 (the fixture)
    path = os.pathsep.join([str(fake_driver), os.environ.get("LD_LIBRARY_PATH", "")])
    out = _python(FAKE_SCRIPT, LD_LIBRARY_PATH=path, CUDA_VISIBLE_DEVICES="0")
    assert "fake conv: OK" in out


def test_ternary_to_device_arguments() -> None:
    rng = np.random.default_rng(11)
    t = bitnet_go.quantize_i2s(rng.standard_normal((6, 10), dtype=np.float32), block_size=10)
    assert t.to("cpu") is t and t.device == "cpu"
    for bad in ("gpu", "cuda:x", "cuda:-1", 3):
        with pytest.raises(ValueError, match="qtype must be one of|device must be"):
            t.to(bad)  # type: ignore[arg-type]
    if REASON is not None:  # no GPU here: moving is refused with the reason
        with pytest.raises(RuntimeError, match="cannot move a tensor to cuda:0"):
            t.to("cuda")


# ---------------------------------------------------------------- GPU


@pytest.fixture
def torch_cuda():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.fail(f"bitnet_go sees {cuda.device_count()} CUDA GPU(s) but this torch build sees none")
    return torch


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, np.float32).view(np.uint32).tobytes()


CONV_SHAPES = [  # (N, C, H, W), (O, kH, kW), stride, padding, dilation, groups, per_channel, bias
    ((1, 3, 17, 15), (8, 3, 3), 1, 1, 1, 1, True, True),
    ((4, 16, 13, 11), (70, 3, 3), 2, 1, 1, 1, True, False),
    ((2, 12, 9, 10), (12, 3, 3), 1, 2, 2, 3, False, True),
    ((3, 8, 8, 8), (8, 3, 3), 1, 1, 1, 8, True, True),
    ((32, 64, 14, 14), (128, 1, 1), 1, 0, 1, 1, True, True),
    ((2, 5, 31, 29), (7, 5, 3), (2, 3), (2, 1), 1, 1, True, False),
]


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(len(CONV_SHAPES)))
def test_conv_bit_exact(torch_cuda, case: int) -> None:
    torch = torch_cuda
    xs, (o, kh, kw), stride, pad, dil, groups, per_channel, has_bias = CONV_SHAPES[case]
    rng = np.random.default_rng(100 + case)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = bitnet_go.quantize_conv_weight(
        rng.standard_normal((o, xs[1] // groups, kh, kw), dtype=np.float32), per_channel=per_channel
    )
    b = rng.standard_normal(o, dtype=np.float32) if has_bias else None
    kw_ = dict(stride=stride, padding=pad, dilation=dil, groups=groups, act_bits=8)
    ref = bitnet_go.conv2d_quantized(x, w, b, **kw_)
    xd = torch.from_numpy(x).cuda()
    bd = None if b is None else torch.from_numpy(b).cuda()
    for weight in (w, w):  # a host weight (moved once), twice
        got = bitnet_go.conv2d_quantized(xd, weight, bd, **kw_)
        assert got.is_cuda and got.dtype == torch.float32
        assert _bits(got.cpu().numpy()) == _bits(ref), f"case {case}"
    got = bitnet_go.conv2d_quantized(xd[0], w, b, **kw_)  # unbatched, host bias
    assert _bits(got.cpu().numpy()) == _bits(ref[0])


def _close(got: np.ndarray, ref: np.ndarray) -> None:
    """test_conv.py's tolerances for the CPU float kernels (``ref`` in float64)."""
    err = np.linalg.norm(got.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= 1e-5, err
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("case", range(len(CONV_SHAPES)))
def test_conv_float_activations(torch_cuda, case: int) -> None:
    torch = torch_cuda
    xs, (o, kh, kw), stride, pad, dil, groups, per_channel, has_bias = CONV_SHAPES[case]
    rng = np.random.default_rng(200 + case)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = bitnet_go.quantize_conv_weight(
        rng.standard_normal((o, xs[1] // groups, kh, kw), dtype=np.float32), per_channel=per_channel
    )
    b = rng.standard_normal(o, dtype=np.float32) if has_bias else None
    kw_ = dict(stride=stride, padding=pad, dilation=dil, groups=groups)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w.dequantize()).double(),
                                     None if b is None else torch.from_numpy(b).double(), **kw_).numpy()  # fmt: skip
    got = bitnet_go.conv2d_quantized(torch.from_numpy(x).cuda(), w.to("cuda"), b, **kw_)
    assert got.is_cuda and got.dtype == torch.float32
    _close(got.cpu().numpy(), ref)


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("shape", [(64, 256), (100, 384), (33, 100)])
def test_linear_bit_exact(torch_cuda, rows: int, shape: tuple[int, int]) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(rows * 1000 + shape[1])
    o, k = shape
    w_host = rng.standard_normal((o, k), dtype=np.float32)
    w = bitnet_go.quantize_i2s(w_host, block_size=k)
    wd = bitnet_go.quantize_i2s(torch.from_numpy(w_host).cuda(), block_size=k)  # on the GPU, 2 bits a weight
    x = rng.standard_normal((rows, k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    ref = bitnet_go.linear_quantized(x, w, b, act_bits=8)
    ref_f = x.astype(np.float64) @ w.dequantize().T.astype(np.float64) + b
    for weight in (w, wd, w.to("cuda")):
        got = bitnet_go.linear_quantized(torch.from_numpy(x).cuda(), weight, torch.from_numpy(b).cuda(), act_bits=8)
        assert _bits(got.cpu().numpy()) == _bits(ref)
        got = bitnet_go.linear_quantized(torch.from_numpy(x).cuda(), weight, torch.from_numpy(b).cuda())
        _close(got.cpu().numpy(), ref_f)


@gpu
@pytest.mark.needs("torch")
def test_errors_and_no_leak(torch_cuda) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(5)
    w = bitnet_go.quantize_conv_weight(rng.standard_normal((4, 3, 3, 3), dtype=np.float32))
    x = torch.from_numpy(rng.standard_normal((2, 3, 8, 8), dtype=np.float32)).cuda()
    x[1, 2, 3, 4] = float("nan")
    ref = bitnet_go.conv2d_quantized(x.cpu().numpy(), w, act_bits=8, check_finite=False)
    with pytest.raises(ValueError, match=r"first at index \(1, 2, 3, 4\)"):
        bitnet_go.conv2d_quantized(x, w, act_bits=8)
    with pytest.raises(ValueError, match=r"first at index \(1, 2, 3, 4\)"):
        bitnet_go.conv2d_quantized(x, w)
    got = bitnet_go.conv2d_quantized(x, w, act_bits=8, check_finite=False)
    assert _bits(got.cpu().numpy()) == _bits(ref)
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="two different GPUs"):
            bitnet_go.conv2d_quantized(x, w, torch.zeros(4, device="cuda:1"), act_bits=8, check_finite=False)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    free0 = cuda.memory_info(0)[0]
    for i in range(1000):
        bitnet_go.conv2d_quantized(x, w, act_bits=(8, None)[i % 2], check_finite=False)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
    assert cuda.memory_info(0)[0] >= free0 - (64 << 20)  # torch's cache may grow a little, not per call
    with pytest.raises(MemoryError):
        big = torch.zeros((1, 1, 1, 1), device="cuda").expand(1 << 16, 1 << 10, 1 << 8, 3)
        bitnet_go.conv2d_quantized(big, bitnet_go.quantize_conv_weight(np.ones((1, 1 << 10, 1, 1), np.float32)),
                                   act_bits=8, check_finite=False)  # fmt: skip


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("qtype", ["i2_s", "tl1"])
def test_ternary_to_cuda(torch_cuda, qtype: str) -> None:
    torch = torch_cuda
    rng = np.random.default_rng(21)
    w = bitnet_go.quantize_conv_weight(rng.standard_normal((9, 6, 3, 3), dtype=np.float32), per_channel=True)
    host = w if qtype == "i2_s" else w.to(qtype)
    g = host.to("cuda")
    assert g.device == "cuda:0" and g.qtype == "i2_s" and g.packed.is_cuda
    assert g.packed.numel() == w.packed.size  # 2 bits a weight on the device
    assert g.to("cuda:0") is g and g.to("cuda") is g
    back = g.to("cpu")
    assert back.packed.tobytes() == w.packed.tobytes() and back.scales.tobytes() == w.scales.tobytes()
    x = rng.standard_normal((2, 6, 11, 10), dtype=np.float32)
    ref = bitnet_go.conv2d_quantized(x, w, padding=1, act_bits=8)
    got = bitnet_go.conv2d_quantized(torch.from_numpy(x).cuda(), g, padding=1, act_bits=8)
    assert _bits(got.cpu().numpy()) == _bits(ref)
    if torch.cuda.device_count() > 1:
        g1 = g.to("cuda:1")
        assert g1.device == "cuda:1"
        with pytest.raises(ValueError, match="two different GPUs"):
            bitnet_go.conv2d_quantized(torch.from_numpy(x).cuda(), g1, padding=1, act_bits=8)


@gpu
@pytest.mark.needs("torch")
def test_read_only_host_arrays_move_without_a_warning(torch_cuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.from_numpy warns about read-only arrays (a weight's codes are), though nothing writes them;
    # it warns once a process, so the arrays it is given are checked as well
    from bitnet_go._gpu import to_device, to_gpu

    torch = torch_cuda
    real, given = torch.from_numpy, []
    monkeypatch.setattr(torch, "from_numpy", lambda arr: (given.append(arr.flags.writeable), real(arr))[1])
    a = np.random.default_rng(5).standard_normal(37).astype(np.float32)
    a.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = to_gpu(a, 0)
        h = to_device(g, a)
    assert given == [True, True]
    assert g.is_cuda and h.is_cuda
    assert g.cpu().numpy().tobytes() == a.tobytes() == h.cpu().numpy().tobytes()


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("act_bits", [8, None])
def test_nn_layers_on_cuda(torch_cuda, act_bits: int | None) -> None:
    torch = torch_cuda
    from bitnet_go.nn import BitConv2d, BitLinear

    torch.manual_seed(3)
    lin = BitLinear(256, 40, act_bits=act_bits, block_size=128).freeze()
    conv = BitConv2d(6, 10, 3, padding=1, groups=2, act_bits=act_bits).freeze()
    xl, xc = torch.randn(3, 5, 256), torch.randn(2, 6, 9, 11)
    with torch.no_grad():  # the bias is a parameter: outside no_grad the outputs require grad
        ref_l, ref_c = lin(xl), conv(xc)  # the CPU kernels
    lin_g, conv_g = lin.to("cuda"), conv.to("cuda")  # nn.Module.to moves the packed buffers
    assert lin_g.weight_packed.is_cuda and conv_g.weight_scale.is_cuda
    assert lin_g.ternary_weight().device == "cuda:0"
    with torch.no_grad():
        got_l, got_c = lin_g(xl.cuda()), conv_g(xc.cuda())
    assert got_l.is_cuda and got_c.is_cuda
    for got, ref in ((got_l, ref_l), (got_c, ref_c)):
        if act_bits == 8:
            assert _bits(got.cpu().numpy()) == _bits(ref.numpy())
        else:
            _close(got.cpu().numpy(), ref.numpy().astype(np.float64))
    with pytest.raises(ValueError, match="cuda:0"):
        lin_g(xl)  # a CUDA layer with CPU input
    # freeze() of a training-mode layer on the GPU keeps its buffers there
    t = BitLinear(128, 8, act_bits=act_bits).cuda().freeze()
    assert t.weight_packed.is_cuda and t(torch.randn(2, 128, device="cuda")).is_cuda
    # a frozen state dict loads into a CUDA layer
    u = BitLinear(256, 40, act_bits=act_bits, block_size=128).cuda()
    u.load_state_dict(lin.state_dict())
    assert u.frozen and u.weight_packed.is_cuda
    with torch.no_grad():
        assert _bits(u(xl.cuda()).cpu().numpy()) == _bits(got_l.cpu().numpy())
