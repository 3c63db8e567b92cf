"""Bad arguments to bitnet_go.nn: a TypeError or ValueError that names the argument, raised before
any work (never a raw torch/numpy error, a silent broadcast or a half-converted model); and the
valid forms next to them still work."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import bitnet_go  # noqa: E402
from bitnet_go import nn as bnn  # noqa: E402

nn = torch.nn
W44 = torch.arange(16, dtype=torch.float32).reshape(4, 4) - 7.5
ZERO_INIT = "ignore:Initializing zero-element tensors:UserWarning"  # torch's warning for nn.Linear(0, n)


# ------------------------------------------------------------- absmean_scale / ternary_fake_quant


@pytest.mark.parametrize("fn", [bnn.absmean_scale, bnn.ternary_fake_quant], ids=["absmean_scale", "ternary_fq"])
@pytest.mark.parametrize(
    ("w", "block_size", "exc", "match"),
    [
        ([[1.0, 2.0]], None, TypeError, "w must be a torch.Tensor, got list"),
        (np.ones((4, 4), np.float32), None, TypeError, "w must be a torch.Tensor, got ndarray"),
        (W44, 0, ValueError, r"block_size must be None or a positive int that divides w.numel\(\) = 16, got 0"),
        (W44, 3, ValueError, r"divides w.numel\(\) = 16, got 3"),
        (W44, -4, ValueError, r"divides w.numel\(\) = 16, got -4"),
        (W44, 32, ValueError, r"divides w.numel\(\) = 16, got 32"),
        (W44, True, TypeError, "block_size must be an int or None, got bool"),
        (W44, 2.0, TypeError, "block_size must be an int or None, got float"),
        (W44, "4", TypeError, "block_size must be an int or None, got str"),
        (torch.ones(0, 4), None, ValueError, r"w must have at least one element .*got shape \(0, 4\)"),
        (torch.ones(0, 4), 4, ValueError, r"w must have at least one element .*got shape \(0, 4\)"),
        (torch.ones(0), None, ValueError, r"w must have at least one element .*got shape \(0,\)"),
    ],
)
def test_absmean_scale_and_ternary_fake_quant_refuse(
    fn: object, w: object, block_size: object, exc: type, match: str
) -> None:
    with pytest.raises(exc, match=match):
        fn(w, block_size)  # type: ignore[operator]


@pytest.mark.parametrize("block_size", [None, 1, 2, 4, 8, 16, np.int64(4)])
def test_absmean_scale_valid_block_sizes_match_quantize_i2s(block_size: object) -> None:
    want = bitnet_go.quantize_i2s(W44.numpy(), block_size=block_size, method="absmean").scales
    got = bnn.absmean_scale(W44, block_size)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got.numpy(), want)
    assert bnn.ternary_fake_quant(W44, block_size).shape == W44.shape  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ int8_fake_quant


@pytest.mark.parametrize(
    ("x", "start_dim", "exc", "match"),
    [
        (torch.ones(2, 3), 5, ValueError, r"start_dim must be in \[-2, 2\] for x with ndim=2, got 5"),
        (torch.ones(2, 3), 3, ValueError, r"start_dim must be in \[-2, 2\] for x with ndim=2, got 3"),
        (torch.ones(2, 3), -3, ValueError, r"start_dim must be in \[-2, 2\] for x with ndim=2, got -3"),
        (torch.tensor(3.0), 1, ValueError, r"start_dim must be in \[0, 0\] for x with ndim=0, got 1"),
        (torch.tensor(3.0), -1, ValueError, r"start_dim must be in \[0, 0\] for x with ndim=0, got -1"),
        (torch.ones(2, 3), 1.5, TypeError, "start_dim must be an int, got float 1.5"),
        (torch.ones(2, 3), True, TypeError, "start_dim must be an int, got bool"),
        (torch.ones(2, 3), None, TypeError, "start_dim must be an int, got NoneType"),
        ([[1.0, 2.0]], 1, TypeError, "x must be a torch.Tensor, got list"),
        (np.ones((2, 3), np.float32), 1, TypeError, "x must be a torch.Tensor, got ndarray"),
    ],
)
def test_int8_fake_quant_refuses(x: object, start_dim: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        bnn.int8_fake_quant(x, start_dim)  # type: ignore[arg-type]


def test_int8_fake_quant_start_dims() -> None:
    """Negative start_dim counts from the end (as torch.flatten); x.ndim: each element its own sample."""
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 5.0, 0.01, 3.0])
    for d in range(x.ndim + 1):
        dims = tuple(range(d, x.ndim))
        m = x.abs().amax(dim=dims, keepdim=True) if dims else x.abs()
        a = 127.0 / m.clamp_min(1e-5)
        want = torch.clamp(torch.round(x * a), -128, 127) / a
        assert torch.equal(bnn.int8_fake_quant(x, d), want)
        if d < x.ndim:
            assert torch.equal(bnn.int8_fake_quant(x, d - x.ndim), want)
    assert torch.equal(bnn.int8_fake_quant(x, np.int64(1)), bnn.int8_fake_quant(x, 1))  # type: ignore[arg-type]
    assert torch.equal(bnn.int8_fake_quant(x, 3), bnn.int8_fake_quant(x, x.ndim))


def test_bitlinear_0d_input_still_gets_torchs_error() -> None:
    with pytest.raises(RuntimeError, match="at least 1D"):
        bnn.BitLinear(4, 3)(torch.tensor(1.0))


# ------------------------------------------------------------------------- layer sizes


@pytest.mark.filterwarnings(ZERO_INIT)
@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: bnn.BitLinear(0, 3), ValueError, "in_features must be >= 1 .*got 0"),
        (lambda: bnn.BitLinear(3, 0), ValueError, "out_features must be >= 1 .*got 0"),
        (lambda: bnn.BitLinear(0, 0), ValueError, "in_features must be >= 1"),
        (lambda: bnn.BitLinear(-1, 3), ValueError, "in_features must be >= 1 .*got -1"),
        (lambda: bnn.BitLinear(2.0, 3), TypeError, "in_features must be an int, got float"),
        (lambda: bnn.BitLinear(True, 3), TypeError, "in_features must be an int, got bool"),
        (lambda: bnn.BitLinear(3, "4"), TypeError, "out_features must be an int, got str"),
        (lambda: bnn.BitLinear.from_float(nn.Linear(0, 3)), ValueError, "in_features must be >= 1"),
        (lambda: bnn.BitLinear.from_float(nn.Linear(3, 0)), ValueError, "out_features must be >= 1"),
        (lambda: bnn.BitConv2d(0, 3, 3), ValueError, "in_channels must be >= 1 .*got 0"),
        (lambda: bnn.BitConv2d(3, 0, 3), ValueError, "out_channels must be >= 1 .*got 0"),
        (lambda: bnn.BitConv2d(2.0, 3, 3), TypeError, "in_channels must be an int, got float"),
        (lambda: bnn.BitConv2d(3, 3, 0), ValueError, "kernel_size must be >= 1 .*got 0"),
        (lambda: bnn.BitConv2d(3, 3, (3, 0)), ValueError, r"kernel_size must be >= 1 .*got \(3, 0\)"),
        (lambda: bnn.BitConv2d.from_float(nn.Conv2d(0, 3, 3)), ValueError, "in_channels must be >= 1"),
        (lambda: bnn.BitConv2d.from_float(nn.Conv2d(3, 0, 3)), ValueError, "out_channels must be >= 1"),
        (lambda: bnn.BitLinear(8, 8, device="meta").freeze(), ValueError, "meta device .*load the weights"),
    ],
)
def test_layers_refuse_sizes_without_weights(make: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        make()  # type: ignore[operator]


def test_layers_accept_numpy_int_sizes() -> None:
    layer = bnn.BitLinear(np.int64(4), np.int32(2))
    assert layer.freeze()(torch.ones(1, 4)).shape == (1, 2)
    conv = bnn.BitConv2d(np.int64(2), 3, 1)
    assert conv.freeze()(torch.ones(1, 2, 4, 4)).shape == (1, 3, 4, 4)


# ------------------------------------------------------------------------------------- convert


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(include=3), "include must be None, a glob pattern \\(str\\), an iterable of them or a callable"),
        (dict(exclude=3), "exclude must be None, a glob pattern"),
        (dict(include=2.5), "include must be .*got float 2.5"),
        (dict(include=b"0"), "include must be .*got bytes"),
        (dict(include=[1]), "include must be .*; it holds int 1"),
        (dict(exclude=["0", None]), "exclude must be .*; it holds NoneType None"),
    ],
)
def test_convert_refuses_bad_selectors(kwargs: dict, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        bnn.convert(nn.Sequential(nn.Linear(4, 4)), progress=False, **kwargs)


@pytest.mark.parametrize(
    "include", ["0", ["0"], ("0",), {"0"}, (p for p in ["0"]), lambda n, m: n == "0"], ids=lambda s: type(s).__name__
)
def test_convert_selector_forms(include: object) -> None:
    _, rep = bnn.convert(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), include=include, progress=False)
    assert [r.name for r in rep] == ["0"]


@pytest.mark.filterwarnings(ZERO_INIT)
@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: nn.Sequential(nn.Linear(8, 8, device="meta")), "layer '0' has parameters on the meta device"),
        (
            lambda: nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.ReLU(), nn.Conv2d(3, 4, 3, device="meta"))),
            "layer '1.1' has parameters on the meta device.*load the weights first",
        ),
        (lambda: nn.Linear(8, 8, device="meta"), r"the model \(a bare Linear\) has parameters on the meta device"),
        (lambda: nn.Sequential(nn.Linear(8, 8), bnn.BitLinear(8, 8, device="meta")), "layer '1' .*meta device"),
        (lambda: nn.Sequential(nn.Linear(8, 8), nn.Linear(0, 8)), r"layer '1' has an empty weight, shape \(8, 0\)"),
    ],
)
def test_convert_refuses_unloaded_layers_before_converting_any(
    make: object, match: str, inplace: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    model = make()  # type: ignore[operator]
    before = [type(m) for m in model.modules()]
    with pytest.raises(ValueError, match=match):
        bnn.convert(model, inplace=inplace, progress=True)
    assert [type(m) for m in model.modules()] == before  # nothing converted, not even layer 0
    assert capsys.readouterr().err == ""  # refused before the progress bar started


def test_convert_skips_meta_layers_that_are_not_selected() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8, device="meta"))
    q, rep = bnn.convert(model, exclude="1", progress=False)
    assert [r.name for r in rep] == ["0"] and q[1].weight.is_meta


# ------------------------------------------------------------------------------ HF packing

PACKED = torch.full((2, 16), 0b01_01_01_01, dtype=torch.uint8)  # out_features=8, all zeros
SCALE = torch.tensor([1.0])
TERNARY = bitnet_go.quantize_i2s(np.ones((8, 16), np.float32))

HF_CALLS = {
    "to_hf_packed": lambda mode: bnn.to_hf_packed(TERNARY, scale_mode=mode),
    "from_hf_packed": lambda mode: bnn.from_hf_packed(PACKED, SCALE, 8, scale_mode=mode),
    "bitlinear_from_hf": lambda mode: bnn.bitlinear_from_hf(PACKED, SCALE, 8, scale_mode=mode),
}


@pytest.mark.parametrize("call", HF_CALLS.values(), ids=HF_CALLS.keys())
@pytest.mark.parametrize(
    ("mode", "exc", "match"),
    [
        ([1], TypeError, "scale_mode must be a str, 'divide' or 'multiply', got list"),
        (None, TypeError, "scale_mode must be a str.*got NoneType"),
        (1, TypeError, "scale_mode must be a str.*got int"),
        (b"divide", TypeError, "scale_mode must be a str.*got bytes"),
        (np.array(["divide", "multiply"]), TypeError, "scale_mode must be a str.*got ndarray"),
        ("Divide", ValueError, "scale_mode must be 'divide' or 'multiply', got 'Divide'"),
        ("times", ValueError, "scale_mode must be 'divide' or 'multiply', got 'times'"),
    ],
)
def test_hf_scale_mode_refused(call: object, mode: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call(mode)  # type: ignore[operator]


@pytest.mark.parametrize("call", HF_CALLS.values(), ids=HF_CALLS.keys())
@pytest.mark.parametrize("mode", ["divide", "multiply", np.str_("multiply")])
def test_hf_scale_mode_accepted(call: object, mode: str) -> None:
    call(mode)  # type: ignore[operator]


@pytest.mark.parametrize("fn", [bnn.from_hf_packed, bnn.bitlinear_from_hf])
@pytest.mark.parametrize(
    ("out_features", "exc", "match"),
    [
        (8.9, TypeError, "out_features must be an int, got float 8.9"),  # was silently int(8.9) = 8
        ("8", TypeError, "out_features must be an int, got str"),
        (True, TypeError, "out_features must be an int, got bool"),
        (0, ValueError, "out_features must be >= 1, got 0"),
        (-1, ValueError, "out_features must be >= 1, got -1"),
    ],
)
def test_hf_out_features_refused(fn: object, out_features: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        fn(PACKED, SCALE, out_features)  # type: ignore[operator]


BIAS8 = np.linspace(-1, 1, 8)


@pytest.mark.parametrize(
    "bias",
    [
        torch.tensor(BIAS8, dtype=torch.float32),
        torch.tensor(BIAS8),  # float64
        torch.tensor(BIAS8, dtype=torch.bfloat16),
        BIAS8,  # a numpy array (was an AttributeError: no .detach)
        BIAS8.astype(np.float32),
        BIAS8.tolist(),
        torch.arange(8),  # integers
        torch.tensor(BIAS8, dtype=torch.float32, requires_grad=True),
    ],
    ids=["f32", "f64", "bf16", "np64", "np32", "list", "int64", "grad"],
)
def test_bitlinear_from_hf_bias_accepted(bias: object) -> None:
    layer = bnn.bitlinear_from_hf(PACKED, SCALE, 8, bias=bias)
    want = torch.as_tensor(bias).detach().to(torch.float32)
    assert layer.bias.dtype == torch.float32 and torch.equal(layer.bias.detach(), want)
    torch.testing.assert_close(layer(torch.ones(3, 16)), want.expand(3, 8))  # the weight is all zeros


@pytest.mark.parametrize(
    ("bias", "exc", "match"),
    [
        (torch.zeros(1), ValueError, r"bias must have shape \(out_features,\) = \(8,\), got \(1,\)"),  # was broadcast
        (torch.zeros(9), ValueError, r"bias must have shape \(out_features,\) = \(8,\), got \(9,\)"),
        (torch.zeros(1, 8), ValueError, r"got \(1, 8\)"),
        (np.zeros((8, 1)), ValueError, r"got \(8, 1\)"),
        (torch.tensor(0.5), ValueError, r"got \(\)"),
        (0.5, ValueError, r"bias must have shape \(out_features,\) = \(8,\), got \(\)"),
        (torch.tensor([0.0, 1, 2, float("nan"), 4, 5, 6, 7]), ValueError, "bias must be finite, .* at index 3"),
        (np.full(8, np.inf), ValueError, "bias must be finite, .* at index 0"),
        (torch.zeros(8, dtype=torch.complex64), TypeError, "bias must be real numbers, .*complex64"),
        (torch.zeros(8, dtype=torch.bool), TypeError, "bias must be real numbers, .*bool"),
        (True, TypeError, r"bias must be None or the bias values, shape \(8,\), not the bool True"),
        ("abc", TypeError, r"bias must be a tensor of shape \(out_features,\) = \(8,\) .*got str"),
        (np.array(["a"] * 8), TypeError, r"bias must be a tensor of shape .*got ndarray"),
        ([None] * 8, TypeError, r"bias must be a tensor of shape .*got list"),
    ],
)
def test_bitlinear_from_hf_bias_refused(bias: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        bnn.bitlinear_from_hf(PACKED, SCALE, 8, bias=bias)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scale", "mode", "match"),
    [
        (0.0, "divide", r"^weight_scale must be finite and > 0, got 0.0$"),
        (-2.0, "multiply", r"^weight_scale must be finite and > 0, got -2.0$"),
        (float("nan"), "multiply", r"^weight_scale must be finite and > 0, got nan$"),
        (float("inf"), "divide", r"^weight_scale must be finite and > 0, got inf$"),
        (1e-45, "divide", r"too small for scale_mode='divide': its reciprocal overflows float32"),
    ],
)
@pytest.mark.filterwarnings("error")  # no numpy divide/overflow warning on the way
def test_hf_weight_scale_checked(scale: float, mode: str, match: str) -> None:
    """A weight_scale of 0, below 0, NaN or Inf (or one whose reciprocal overflows) is refused
    by name; 0 used to reach 'scales contain NaN or Inf' after a numpy warning, -2 was taken."""
    from bitnet_go.nn import from_hf_packed

    w = torch.full((2, 16), 0b01_01_01_01, dtype=torch.uint8)
    with pytest.raises(ValueError, match=match):
        from_hf_packed(w, torch.tensor([scale]), 8, scale_mode=mode)
    assert from_hf_packed(w, torch.tensor([2.0]), 8, scale_mode=mode).scales.tolist() == [
        2.0 if mode == "multiply" else 0.5
    ]
