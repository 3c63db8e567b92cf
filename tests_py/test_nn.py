"""bitnet_go.nn: BitLinear / BitConv2d training (STE) against a pure-torch reference, freeze, convert,
state_dict and torch.save round trips."""

from __future__ import annotations

import copy
import io
import pickle
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import bitnet_go  # noqa: E402
from bitnet_go import nn as bnn  # noqa: E402

nn = torch.nn
F = torch.nn.functional


# ----------------------------------------------------- a pure-torch reference


def ref_weight_quant(w: torch.Tensor, block_size: int | None) -> torch.Tensor:
    """BitNet b1.58's absmean ternary weight, written out: s = max(mean|w|, 1e-5) per block."""
    flat = w.reshape(-1, w.numel() if block_size is None else block_size)
    s = flat.detach().abs().double().mean(dim=1, keepdim=True).float().clamp(min=1e-5)
    q = (flat / s).round().clamp(-1, 1) * s
    return q.reshape(w.shape)


def ref_act_quant(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    """int8 absmax per sample: a = 127 / max(max|x|, 1e-5), round half even, clamp, / a."""
    m = x.abs().amax(dim=dims, keepdim=True) if dims else x.abs()
    a = 127.0 / m.clamp(min=1e-5)
    return (x * a).round().clamp(-128, 127) / a


class RefBitLinear(nn.Linear):
    def __init__(self, *args: object, block_size: int | None = None, act_bits: int | None = 8) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.block_size, self.act_bits = block_size, act_bits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = ref_weight_quant(self.weight.detach(), self.block_size) + (self.weight - self.weight.detach())
        if self.act_bits == 8:
            x = ref_act_quant(x.detach(), (x.ndim - 1,)) + (x - x.detach())
        return F.linear(x, w, self.bias)


class RefBitConv2d(nn.Conv2d):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = ref_weight_quant(self.weight.detach(), None) + (self.weight - self.weight.detach())
        x = ref_act_quant(x.detach(), (1, 2, 3)) + (x - x.detach())
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _copy_params(dst: nn.Module, src: nn.Module) -> None:
    dst.load_state_dict(src.state_dict())


# ------------------------------------------------------------ training (STE)


@pytest.mark.parametrize(("block_size", "act_bits"), [(None, 8), (16, 8), (64, None)])
def test_bitlinear_matches_reference_forward_and_gradients(block_size: int | None, act_bits: int | None) -> None:
    torch.manual_seed(0)
    layer = bnn.BitLinear(64, 24, block_size=block_size, act_bits=act_bits)
    ref = RefBitLinear(64, 24, block_size=block_size, act_bits=act_bits)
    _copy_params(ref, layer)
    x = torch.randn(3, 5, 64, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    target = torch.randn(3, 5, 24)
    y, yr = layer(x), ref(xr)
    assert torch.equal(y, yr)
    F.mse_loss(y, target).backward()
    F.mse_loss(yr, target).backward()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    assert torch.equal(layer.weight.grad, ref.weight.grad)
    assert torch.equal(layer.bias.grad, ref.bias.grad)
    assert torch.equal(x.grad, xr.grad)


@pytest.mark.parametrize(("stride", "padding", "groups"), [(1, 1, 1), (2, 0, 1), (1, "same", 4)])
def test_bitconv2d_matches_reference_forward_and_gradients(stride: int, padding: object, groups: int) -> None:
    torch.manual_seed(1)
    conv = bnn.BitConv2d(8, 12, 3, stride=stride, padding=padding, groups=groups)
    ref = RefBitConv2d(8, 12, 3, stride=stride, padding=padding, groups=groups)
    _copy_params(ref, conv)
    x = torch.randn(2, 8, 9, 9, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    y, yr = conv(x), ref(xr)
    assert torch.equal(y, yr)
    (y * y).sum().backward()
    (yr * yr).sum().backward()
    assert torch.equal(conv.weight.grad, ref.weight.grad)
    assert torch.equal(conv.bias.grad, ref.bias.grad)
    assert torch.equal(x.grad, xr.grad)


def test_a_few_optimizer_steps_train() -> None:
    torch.manual_seed(2)
    model = nn.Sequential(bnn.BitLinear(16, 32), nn.ReLU(), bnn.BitLinear(32, 1))
    x = torch.randn(256, 16)
    y = x[:, :1] * 2 - x[:, 1:2]
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.5 * first


# ----------------------------------------------------------------- freeze


@pytest.mark.parametrize(("block_size", "act_bits"), [(None, 8), (32, 8), (None, None), (128, None)])
def test_bitlinear_frozen_equals_training_forward(block_size: int | None, act_bits: int | None) -> None:
    torch.manual_seed(3)
    layer = bnn.BitLinear(128, 40, block_size=block_size, act_bits=act_bits)
    x = torch.randn(4, 6, 128) * 2
    with torch.no_grad():
        y = layer(x)
    fake = bnn.ternary_fake_quant(layer.weight.detach(), block_size)
    layer.freeze()
    assert layer.frozen and "weight" not in dict(layer.named_parameters())
    t = layer.ternary_weight()
    # the packed weight is the training forward's weight, exactly
    assert torch.equal(torch.from_numpy(t.dequantize()), fake)
    assert t.block_size == block_size and t.method == "absmean"
    with torch.no_grad():
        yf = layer(x)
    assert yf.shape == y.shape and not yf.requires_grad
    torch.testing.assert_close(yf, y, rtol=1e-5, atol=1e-5)
    assert layer.freeze() is layer  # twice: no-op


@pytest.mark.parametrize(
    ("kw", "shape"),
    [
        (dict(kernel_size=3, padding=1), (2, 8, 10, 10)),
        (dict(kernel_size=1), (3, 8, 5, 5)),
        (dict(kernel_size=(3, 5), stride=2, dilation=(1, 2), padding=(1, 2)), (2, 8, 11, 13)),
        (dict(kernel_size=3, groups=8, padding="same"), (2, 8, 7, 7)),
        (dict(kernel_size=3, padding=1, bias=False, act_bits=None), (8, 9, 9)),
    ],
)
def test_bitconv2d_frozen_equals_training_forward(kw: dict, shape: tuple[int, ...]) -> None:
    torch.manual_seed(4)
    conv = bnn.BitConv2d(8, 16, **kw)
    x = torch.randn(*shape)
    with torch.no_grad():
        y = conv(x)
    frozen = copy.deepcopy(conv).freeze()
    torch.testing.assert_close(frozen(x), y, rtol=1e-5, atol=1e-5)


def test_from_float_and_dtype_kept() -> None:
    torch.manual_seed(5)
    lin = nn.Linear(32, 8)
    q = bnn.BitLinear.from_float(lin)
    assert q.frozen and q.in_features == 32 and q.out_features == 8
    train = bnn.BitLinear.from_float(lin, freeze=False)
    assert torch.equal(train.weight, lin.weight) and not train.frozen
    x = torch.randn(5, 32, dtype=torch.float64)
    assert q(x).dtype == torch.float64
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
    qc = bnn.BitConv2d.from_float(conv)
    assert qc.frozen and qc.bias is None and qc.stride == (2, 2)
    with pytest.raises(ValueError, match="padding_mode"):
        bnn.BitConv2d.from_float(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"))
    with pytest.raises(TypeError):
        bnn.BitLinear.from_float(conv)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block_size"):
        bnn.BitLinear(30, 4, block_size=7)
    with pytest.raises(ValueError, match="act_bits"):
        bnn.BitLinear(30, 4, act_bits=4)


# ------------------------------------------------------------ serialisation


def test_state_dict_round_trip_into_a_training_layer() -> None:
    torch.manual_seed(6)
    layer = bnn.BitLinear(64, 10, block_size=64).freeze()
    sd = layer.state_dict()
    assert set(sd) == {"weight_packed", "weight_scale", "bias"}
    assert sd["weight_packed"].dtype == torch.uint8 and sd["weight_scale"].shape == (10,)
    fresh = bnn.BitLinear(64, 10, block_size=64)  # training mode: becomes frozen on load
    fresh.load_state_dict(sd)
    assert fresh.frozen
    x = torch.randn(3, 64)
    assert torch.equal(fresh(x), layer(x))
    conv = bnn.BitConv2d(4, 6, 3).freeze()
    conv2 = bnn.BitConv2d(4, 6, 3)
    conv2.load_state_dict(conv.state_dict())
    xc = torch.randn(1, 4, 6, 6)
    assert torch.equal(conv2(xc), conv(xc))


def test_torch_save_load_and_pickle() -> None:
    torch.manual_seed(7)
    model = nn.Sequential(bnn.BitConv2d(3, 4, 3), nn.Flatten(), bnn.BitLinear(4 * 4 * 4, 5))
    model, _ = bnn.convert(model, progress=False)
    x = torch.randn(2, 3, 6, 6)
    y = model(x)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert torch.equal(loaded(x), y)
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)  # plain tensors only: the safe loader takes it
    other = nn.Sequential(bnn.BitConv2d(3, 4, 3), nn.Flatten(), bnn.BitLinear(4 * 4 * 4, 5))
    other.load_state_dict(sd)
    assert torch.equal(other(x), y)
    assert torch.equal(pickle.loads(pickle.dumps(model))(x), y)


# -------------------------------------------------------------------- convert


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock, small."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + idt)


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.avgpool(self.layer1(x))
        return self.fc(torch.flatten(x, 1))


CONV_NAMES = [
    "conv1",
    "layer1.0.conv1",
    "layer1.0.conv2",
    "layer1.1.conv1",
    "layer1.1.conv2",
    "layer1.1.downsample.0",
]


def _fake_quant_twin(model: nn.Module) -> nn.Module:
    """The model with every Linear/Conv2d as a training-mode Bit layer (same weights)."""
    twin = copy.deepcopy(model)
    for name, m in list(twin.named_modules()):
        if type(m) in (nn.Linear, nn.Conv2d):
            new = (bnn.BitLinear if type(m) is nn.Linear else bnn.BitConv2d).from_float(m, freeze=False)
            parent, _, attr = name.rpartition(".")
            setattr(twin.get_submodule(parent), attr, new)
    return twin


def test_convert_tiny_resnet() -> None:
    torch.manual_seed(8)
    model = TinyResNet().eval()
    x = torch.randn(2, 3, 12, 12)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q, report = bnn.convert(model, progress=False)
    # the original is untouched (inplace=False)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [r.name for r in report] == [*CONV_NAMES, "fc"]
    assert report[0] == bnn.Converted("conv1", "Conv2d", (8, 3, 3, 3), 8 * 27 * 4, 64 + 4)
    assert report[-1].kind == "Linear" and report[-1].bytes_after == 64 + 4 + 40
    assert all(r.bytes_after < r.bytes_before for r in report)
    assert isinstance(q.fc, bnn.BitLinear) and isinstance(q.layer1[1].downsample[0], bnn.BitConv2d)
    with torch.no_grad():
        want = _fake_quant_twin(model).eval()(x)
    torch.testing.assert_close(q(x), want, rtol=1e-4, atol=1e-4)
    listed = bnn.layers(q)
    assert [n for n, *_ in listed] == [*CONV_NAMES, "fc"] and {f for *_, f, _ in listed} == {"i2_s"}


def test_convert_include_exclude_inplace_and_bit_layers() -> None:
    torch.manual_seed(9)
    model = TinyResNet()
    _, rep = bnn.convert(model, include="layer1.*", exclude=["*downsample*"], progress=False)
    assert [r.name for r in rep] == CONV_NAMES[1:5]
    _, rep = bnn.convert(model, include=lambda n, m: isinstance(m, nn.Linear), progress=False)
    assert [r.name for r in rep] == ["fc"]
    same, rep = bnn.convert(model, exclude="conv1", inplace=True, progress=False)
    assert same is model and isinstance(model.fc, bnn.BitLinear) and type(model.conv1) is nn.Conv2d
    _, rep = bnn.convert(model, progress=False)  # converted layers are not converted again
    assert [r.name for r in rep] == ["conv1"]
    # training-mode Bit layers are frozen with their own settings
    bit = nn.Sequential(bnn.BitLinear(64, 4, block_size=32, act_bits=None))
    q, rep = bnn.convert(bit, progress=False)
    assert rep[0].kind == "BitLinear" and q[0].frozen and q[0].act_bits is None and q[0].block_size == 32
    assert not bit[0].frozen
    # a bare layer
    q, rep = bnn.convert(nn.Linear(8, 2), progress=False)
    assert isinstance(q, bnn.BitLinear) and rep[0].name == ""
    with pytest.raises(TypeError):
        bnn.convert(model, include=[1], progress=False)  # type: ignore[list-item]


def test_convert_keyboard_interrupt_leaves_converted_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(10)
    model = TinyResNet()
    real = bnn.BitConv2d.from_float
    calls = []

    def interrupted(m: nn.Conv2d, **kw: object) -> bnn.BitConv2d:
        calls.append(m)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(m, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(bnn.BitConv2d, "from_float", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bnn.convert(model, inplace=True, progress=False)
    kinds = [type(model.get_submodule(n)).__name__ for n in CONV_NAMES]
    assert kinds == ["BitConv2d", "BitConv2d", "Conv2d", "Conv2d", "Conv2d", "Conv2d"]
    assert type(model.fc) is nn.Linear
    monkeypatch.setattr(bnn.BitConv2d, "from_float", real)
    _, rep = bnn.convert(model, inplace=True, progress=False)  # finishes the rest
    assert [r.name for r in rep] == [*CONV_NAMES[2:], "fc"]


def test_convert_progress(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
    pytest.importorskip("tqdm")
    bnn.convert(model)  # the bar (on stderr)
    assert "bitnet_go.nn.convert" in capsys.readouterr().err
    for mod in ("tqdm.auto", "tqdm.std"):  # as if tqdm were not installed
        monkeypatch.setitem(sys.modules, mod, None)
    bnn.convert(model)
    assert capsys.readouterr().err == ""
    bnn.convert(model, progress=True)
    assert capsys.readouterr().err.splitlines() == ["[1/2] 0", "[2/2] 1"]
    bnn.convert(model, progress=False)
    assert capsys.readouterr().err == ""


def test_import_bitnet_go_alone_has_no_nn_attribute_loaded_eagerly() -> None:
    assert "linear_quantized" in bitnet_go.__all__
    assert isinstance(bnn.BitLinear(4, 2).ternary_weight(), bitnet_go.TernaryTensor)
    assert np.all(np.isin(bnn.BitLinear(4, 2).ternary_weight().values(), [-1, 0, 1]))


@pytest.mark.parametrize("rows", [5, 300])  # GEMV, and the GEMM whose layouts Go keeps by number
def test_frozen_weight_numbered_and_renumbered_on_torch_writes(rows: int) -> None:
    """A frozen layer's weight goes to Go with a number (no comparison of its codes per call); a
    write through torch (copy_, load_state_dict) gives the next call a new tensor and number, and
    the outputs follow the new weights exactly."""
    from bitnet_go._core.arrays import weight_id

    torch.manual_seed(9)
    a, b = bnn.BitLinear(256, 7).freeze(), bnn.BitLinear(256, 7).freeze()
    x = torch.randn(rows, 256)
    ta = a.ternary_weight()
    ida = weight_id(ta.packed)
    assert ida > 0 and a.ternary_weight() is ta
    ya = a(x)
    assert torch.equal(ya, a(x))
    with torch.no_grad():
        a.weight_packed.copy_(b.weight_packed)  # in place: same address, a new version
        a.weight_scale.copy_(b.weight_scale)
        a.bias.copy_(b.bias)
    tb = a.ternary_weight()
    assert tb is not ta and weight_id(tb.packed) not in (0, ida)
    assert torch.equal(a(x), b(x))
    a.load_state_dict(bnn.BitLinear(256, 7).freeze().state_dict())  # copy_ again, through torch
    assert a.ternary_weight() is not tb
    want = bitnet_go.linear_quantized(x.numpy(), a.ternary_weight(), a.bias.detach().numpy(), act_bits=a.act_bits)
    np.testing.assert_array_equal(a(x).detach().numpy(), want)


def test_frozen_bias_follows_torch_writes_in_any_dtype() -> None:
    """The bias goes to the kernels as float32 numpy, kept per state of the parameter: a float64
    bias is a converted copy, so an in-place write through torch must make a new one."""
    torch.manual_seed(10)
    layer = bnn.BitLinear(64, 3, dtype=torch.float64).freeze()
    x = torch.randn(2, 64, dtype=torch.float64)
    y0 = layer(x)
    with torch.no_grad():
        layer.bias.add_(1.0)
    torch.testing.assert_close(layer(x), y0 + 1.0)


@pytest.mark.parametrize("cast", ["half", "bfloat16", "double", "to_float64", "half_then_float"])
def test_frozen_layers_survive_dtype_casts(cast: str) -> None:
    """model.half() / .double() / .to(dtype) cast the float parameters; the frozen weight_scale
    keeps its float32 values (the kernels take float32 scales; a trip through float16 would
    round them), and the forward runs in the input's dtype."""
    torch.manual_seed(7)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 6))
    x = torch.randn(2, 3, 5, 5)
    q, _ = bnn.convert(m, progress=False)
    want = q(x)
    scales = [b.clone() for n, b in q.named_buffers() if n.endswith("weight_scale")]
    dt = {"half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64, "to_float64": torch.float64}
    if cast == "half_then_float":
        q2, xin, tol = q.half().float(), x, 2e-2  # the float16 trip rounds the biases, not the scales
    elif cast == "to_float64":
        q2, xin, tol = q.to(torch.float64), x.double(), 1e-6
    else:
        q2 = getattr(q, cast)()
        # float16/bfloat16 inputs move some int8 activation codes by one: loose bounds
        xin, tol = x.to(dt[cast]), {"half": 2e-2, "bfloat16": 8e-2, "double": 1e-6}[cast]
    got = q2(xin)
    assert got.dtype == xin.dtype
    after = [b for n, b in q2.named_buffers() if n.endswith("weight_scale")]
    assert all(a.dtype == torch.float32 and torch.equal(a, s) for a, s in zip(after, scales, strict=True))
    assert ((got.float() - want).abs().max() / want.abs().max()).item() < tol


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("act_bits", [8, None])
@pytest.mark.parametrize("kind", ["linear", "conv", "conv_same_unbatched"])
def test_frozen_layers_pass_gradients(seed: int, act_bits: int | None, kind: str) -> None:
    """A frozen layer's gradients to its input and bias are the training-mode layer's
    (straight-through), so a model with frozen layers trains the layers around them (the
    gradients were silently cut); the packed weight gets none."""
    torch.manual_seed(seed)
    if kind == "linear":
        layer, x = bnn.BitLinear(64, 24, act_bits=act_bits), torch.randn(3, 5, 64)
    elif kind == "conv":
        layer, x = bnn.BitConv2d(6, 8, 3, stride=2, padding=1, act_bits=act_bits), torch.randn(2, 6, 9, 9)
    else:
        layer, x = bnn.BitConv2d(6, 8, (2, 3), padding="same", dilation=2, act_bits=act_bits), torch.randn(6, 7, 8)
    gy = torch.randn_like(layer(x))
    xt = x.clone().requires_grad_(True)
    layer(xt).backward(gy)
    want_x, want_b = xt.grad, layer.bias.grad.clone()
    layer.bias.grad = None
    layer.freeze()
    xf = x.clone().requires_grad_(True)
    y = layer(xf)
    assert y.grad_fn is not None
    y.backward(gy)
    torch.testing.assert_close(xf.grad, want_x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer.bias.grad, want_b, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert not layer(xf).requires_grad


def test_frozen_layers_refuse_tracing() -> None:
    """torch.jit.trace of a frozen layer recorded its output as a constant (a later input gave the
    first input's output): now an error; torch.fx tracing too. The training mode traces with fx."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(bnn.BitLinear(16, 8, act_bits=None), torch.nn.ReLU(), bnn.BitLinear(8, 4))
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(3, 16)
    torch.testing.assert_close(gm(x), model(x))
    frozen, _ = bnn.convert(model, progress=False)
    with pytest.raises(RuntimeError, match="torch.jit.trace would record its output as a constant"):
        torch.jit.trace(frozen, x)
    with pytest.raises(TypeError, match="cannot be symbolically traced"):
        torch.fx.symbolic_trace(frozen)


def test_inference_mode_and_shared_layers() -> None:
    """Layers frozen under torch.inference_mode run (they raised about version counters); a module
    used twice is converted at both places into one frozen module."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32))
    x = torch.randn(4, 32)
    with torch.inference_mode():
        q, _ = bnn.convert(model, progress=False)
        y = q(x)
    torch.testing.assert_close(q(x), y)
    shared = torch.nn.Linear(8, 8)
    q, report = bnn.convert(torch.nn.Sequential(shared, torch.nn.ReLU(), shared), progress=False)
    assert type(q[0]).__name__ == "BitLinear" and q[0] is q[2] and [r.name for r in report] == ["0"]


def test_failed_frozen_load_keeps_the_float_weight() -> None:
    """A frozen state dict lacking weight_scale fails a strict load and leaves a training-mode
    layer as it was (it was frozen with a zero weight and its float weight dropped)."""
    torch.manual_seed(0)
    layer = bnn.BitLinear(32, 8)
    w = layer.weight.detach().clone()
    sd = copy.deepcopy(layer).freeze().state_dict()
    del sd["weight_scale"]
    with pytest.raises(RuntimeError, match="weight"):
        layer.load_state_dict(sd)
    assert not layer.frozen and torch.equal(layer.weight, w)


def test_bfloat16_training_matches_frozen_codes() -> None:
    """In bfloat16 the training forward's ternary codes are the packed ones (w / s was taken in
    bfloat16 and flipped about 20 of 16384 codes)."""
    torch.manual_seed(0)
    layer = bnn.BitLinear(256, 64).bfloat16()
    fake = bnn.ternary_fake_quant(layer.weight.detach())
    t = layer.ternary_weight()
    assert torch.equal(fake.float(), torch.from_numpy(t.dequantize()).to(torch.bfloat16).float())


def test_bitconv2d_padding_mode_and_nan_message() -> None:
    with pytest.raises(ValueError, match="padding_mode must be 'zeros'"):
        bnn.BitConv2d(3, 4, 3, padding_mode="reflect")
    assert bnn.BitConv2d(3, 4, 3, padding_mode="zeros").padding_mode == "zeros"
    layer = bnn.BitLinear(16, 4).freeze()
    x = torch.zeros(2, 16)
    x[1, 3] = float("nan")
    with pytest.raises(ValueError, match="a frozen BitLinear quantizes only finite inputs") as info:
        layer(x)
    assert "check_finite" not in str(info.value)


@pytest.mark.parametrize("strict", [True, False])
def test_frozen_layer_hints(strict: bool) -> None:
    """A frozen layer's missing .weight says where the weight is; a float state dict loaded into a
    frozen model is an error naming the way (with strict=False it kept the old packed weight)."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnn.BitLinear(16, 8))
    sd = m.state_dict()
    f, _ = bnn.convert(m, progress=False)
    with pytest.raises(AttributeError, match="a frozen BitLinear has no float weight: it is packed I2_S"):
        f[0].weight  # noqa: B018
    assert not hasattr(f[0], "weight") and hasattr(f[0], "weight_packed")
    before = f[0].weight_packed.clone()
    with pytest.raises(RuntimeError, match=r"0\.weight: a float \(training-mode\) weight for a frozen BitLinear"):
        f.load_state_dict(sd, strict=strict)
    assert torch.equal(f[0].weight_packed, before)


def test_frozen_meta_shapes_and_channels_last() -> None:
    """A frozen model on the meta device gives meta outputs of the right shape (it raised about
    numpy); a frozen BitConv2d keeps channels_last input's layout, as nn.Conv2d does."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnn.BitConv2d(3, 8, 3, padding=1), torch.nn.Flatten(), bnn.BitLinear(8 * 6 * 6, 4))
    f, _ = bnn.convert(m, progress=False)
    y = copy.deepcopy(f).to("meta")(torch.empty(2, 3, 6, 6, device="meta"))
    assert y.is_meta and y.shape == (2, 4)
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        y = f[0](x)
        assert y.is_contiguous(memory_format=torch.channels_last) and torch.equal(y, f[0](x.contiguous()))


def test_freeze_bakes_a_parametrized_weight() -> None:
    """freeze()/convert() of a layer whose weight is under torch.nn.utils.parametrize packs the
    weight the parametrization gives (it raised an AttributeError about weight_packed)."""
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w: torch.Tensor) -> torch.Tensor:
            return w * 2.0

    torch.manual_seed(0)
    layer = bnn.BitLinear(16, 4)
    parametrize.register_parametrization(layer, "weight", Double())
    x = torch.randn(3, 16)
    with torch.no_grad():
        want = layer(x)
        m, _ = bnn.convert(torch.nn.Sequential(layer), progress=False)
        assert parametrize.is_parametrized(layer)  # convert works on a copy
        torch.testing.assert_close(m[0](x), want, rtol=1e-5, atol=1e-5)
        layer.freeze()
        assert layer.frozen and not parametrize.is_parametrized(layer)
        torch.testing.assert_close(layer(x), want, rtol=1e-5, atol=1e-5)
