"""BitLinear and BitConv2d: trainable ternary layers with a frozen (packed I2_S) inference mode."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (torch's own spelling)
from torch import nn
from torch.nn.utils import parametrize

from .._conv import conv2d_quantized
from .._core.arrays import as_float32, check_int, vouched_weight_id
from .._linear import linear_quantized
from .._ternary import TernaryTensor, quantize_i2s

EPS_WEIGHT = 1e-5
"""Floor of the absmean weight scale (as ``quantize_i2s(method="absmean")``)."""

EPS_ACT = 1e-5
"""Floor of ``max|x_n|`` in the int8 activation scale (as ``act_bits=8`` of the kernels)."""

IntPair = Union[int, tuple[int, int]]


def _check_act_bits(act_bits: object) -> int | None:
    if act_bits is None or (type(act_bits) is int and act_bits == 8):
        return act_bits  # type: ignore[return-value]
    raise ValueError(f"act_bits must be None (float32 activations) or 8, got {act_bits!r}")


def _check_tensor(x: object, name: str) -> torch.Tensor:
    """``x`` if it is a ``torch.Tensor`` (or a ``torch.fx.Proxy``, which stands for one while
    ``torch.fx.symbolic_trace`` records a model), else a ``TypeError`` naming ``name``."""
    if not isinstance(x, (torch.Tensor, torch.fx.Proxy)):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _check_block_size(block_size: object, numel: int) -> int | None:
    """``block_size`` for a tensor of ``numel`` elements: None, or an int >= 1 that divides ``numel``."""
    if block_size is None:
        return None
    b = check_int(block_size, "block_size", or_none=True)
    if b < 1 or numel % b:
        raise ValueError(f"block_size must be None or a positive int that divides w.numel() = {numel}, got {b}")
    return b


def _check_start_dim(start_dim: object, ndim: int) -> int:
    """``start_dim`` for a tensor of ``ndim`` dimensions, in ``[-ndim, ndim]`` (negative: counted from
    the end, as ``torch.flatten``; ``ndim``: each element a sample), returned non-negative."""
    d = check_int(start_dim, "start_dim")
    if not -ndim <= d <= ndim:
        raise ValueError(f"start_dim must be in [{-ndim}, {ndim}] for x with ndim={ndim}, got {d}")
    return d + ndim if d < 0 else d


def _version(t: torch.Tensor) -> int:
    """``t``'s version counter (moved by in-place writes through torch), or -1 for a tensor made
    under ``torch.inference_mode``, which has none (such tensors cannot be written outside it)."""
    return -1 if t.is_inference() else t._version


def _check_size(v: object, name: str) -> None:
    """A layer size (features, channels): an int >= 1. ``nn.Linear`` / ``nn.Conv2d`` allow 0, but a
    weight of no elements has no absmean scale to quantize with."""
    if check_int(v, name) < 1:
        raise ValueError(f"{name} must be >= 1 (a ternary layer needs at least one weight), got {v!r}")


def absmean_scale(w: torch.Tensor, block_size: int | None = None) -> torch.Tensor:
    """The absmean scale of ``w`` as :func:`bitnet_go.quantize_i2s` computes it (no gradient).

    One scale per ``block_size`` consecutive elements of the flattened
    tensor (``block_size`` must divide ``w.numel()``), or one for the whole
    tensor: ``max(mean|w|, 1e-5)``, the mean taken in float64 and rounded
    once to float32. Returns a 1-D float32 tensor of the block scales.

    ``w`` must be a ``torch.Tensor`` with at least one element (``TypeError``,
    ``ValueError``); a ``block_size`` that is not an int (a bool, a float) is a
    ``TypeError``, one < 1 or not dividing ``w.numel()`` a ``ValueError``.

    Example:
        >>> import torch
        >>> absmean_scale(torch.tensor([[0.5, -1.5], [0.0, 0.0]]), 2)
        tensor([1.0000e+00, 1.0000e-05])
    """
    w = _check_tensor(w, "w")
    if isinstance(w, torch.fx.Proxy):  # symbolic tracing: sizes are unknown, the checks run on real tensors
        pass
    elif w.numel() == 0:
        raise ValueError(
            f"w must have at least one element (the mean of nothing is undefined), got shape {tuple(w.shape)}"
        )
    if not isinstance(w, torch.fx.Proxy):
        block_size = _check_block_size(block_size, w.numel())
    a = w.detach().abs().to(torch.float64).reshape(-1 if block_size is None else (-1, block_size))
    m = a.mean(dim=-1).to(torch.float32).clamp_min(EPS_WEIGHT)
    return m.reshape(-1)


def ternary_fake_quant(w: torch.Tensor, block_size: int | None = None) -> torch.Tensor:
    """``w`` fake-quantized to ternary (absmean, BitNet b1.58), with a straight-through gradient.

    Forward: ``clamp(round_half_even(w / s), -1, 1) * s`` with ``s`` from
    :func:`absmean_scale`, the values and scales of
    ``quantize_i2s(w, block_size=block_size)``; backward: the identity
    (straight-through estimator). Written ``q + (w - w.detach())`` rather
    than ``w + (q - w).detach()``: the same gradient, and a forward value
    that is ``q`` exactly (the other form can be 1 ulp off).
    ``w`` and ``block_size`` are checked as :func:`absmean_scale` does.

    Example:
        >>> import torch
        >>> ternary_fake_quant(torch.tensor([0.9, -0.1, -2.0, 1.2]))
        tensor([ 1.0500,  0.0000, -1.0500,  1.0500])
    """
    s = absmean_scale(w, block_size)
    wf = w.reshape(s.numel(), -1)
    s2 = s[:, None]  # float32: the codes as quantize_i2s computes them from a float32 copy of w
    q = (torch.clamp(torch.round(wf.detach().to(torch.float32) / s2), -1, 1) * s2).to(w.dtype).reshape(w.shape)
    return q + (w - w.detach())


def int8_fake_quant(x: torch.Tensor, start_dim: int) -> torch.Tensor:
    """``x`` fake-quantized to int8 per sample (absmax), with a straight-through gradient.

    A sample is ``x[i, ...]`` over the dimensions from ``start_dim`` on (for
    ``start_dim=0``, the whole tensor; for ``start_dim=x.ndim``, each element):
    scale ``a = 127 / max(max|x_n|, 1e-5)``,
    ``q = clamp(round_half_even(x * a), -128, 127) / a``, the activation
    quantization of ``act_bits=8`` in the kernels. Backward: the identity
    (``q + (x - x.detach())``, as :func:`ternary_fake_quant`).

    ``x`` must be a ``torch.Tensor`` (``TypeError``) and ``start_dim`` an int
    (``TypeError``; a bool is not one) in ``[-x.ndim, x.ndim]`` (``ValueError``),
    a negative one counted from the end as in ``torch.flatten``.

    Example:
        >>> import torch
        >>> int8_fake_quant(torch.tensor([[1.0, 0.3333], [0.0, 2.0]]), 1)
        tensor([[1.0000, 0.3307],
                [0.0000, 2.0000]])
    """
    x = _check_tensor(x, "x")
    xd = x.detach()
    if isinstance(x, torch.fx.Proxy):  # symbolic tracing: a start_dim from the end needs no rank
        d = check_int(start_dim, "start_dim")
        dims = tuple(range(d, 0)) if d < 0 else tuple(range(d, x.ndim))
    else:
        dims = tuple(range(_check_start_dim(start_dim, x.ndim), x.ndim))
    m = xd.abs().amax(dim=dims, keepdim=True) if dims else xd.abs()
    a = 127.0 / m.clamp_min(EPS_ACT)
    q = torch.clamp(torch.round(xd * a), -128, 127) / a
    return q + (x - xd)


class _Frozen:
    """What BitLinear and BitConv2d share: the I2_S buffers of the frozen mode."""

    weight_packed: torch.Tensor
    weight_scale: torch.Tensor
    block_size: int | None
    act_bits: int | None

    def _weight_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _block_size(self) -> int | None:
        return self.block_size

    @property
    def frozen(self) -> bool:
        """True once the weight is packed (``freeze()``, ``convert()`` or a frozen state dict)."""
        return "weight_packed" in self._buffers  # type: ignore[attr-defined]

    def ternary_weight(self) -> TernaryTensor:
        """The weight as a :class:`bitnet_go.TernaryTensor`: the packed buffers of a frozen layer
        (no copy; on the buffers' device: a CUDA layer's tensor is on its GPU), or ``quantize_i2s``
        of the master weight of a training-mode layer (on the CPU)."""
        if not self.frozen:
            if self.weight.is_meta:  # type: ignore[attr-defined]
                raise ValueError("the weight is on the meta device (no data): load the weights before freezing")
            w = self.weight.detach().cpu()  # type: ignore[attr-defined]
            return quantize_i2s(w, block_size=self._block_size(), method="absmean", device="cpu")
        # Built once per state of the buffers (forward calls this every time): a buffer that
        # .to() replaced has another address, one written in place through torch (copy_,
        # load_state_dict, indexing) another version. The tensor views the buffers and has a
        # number of its own (arrays.vouched_weight_id), under which Go keeps what it derives
        # (the checked codes, the kernels' layouts) without comparing the codes on each call;
        # writes that bypass torch (through a numpy or DLPack view of a buffer) are not seen.
        packed, scale = self.weight_packed, self.weight_scale
        key = (packed.data_ptr(), scale.data_ptr(), _version(packed), _version(scale))
        cached = self.__dict__.get("_ternary_cache")
        if cached is None or cached[0] != key:
            on_gpu = self.weight_packed.is_cuda
            if on_gpu and self.weight_scale.device != self.weight_packed.device:
                raise ValueError(
                    f"weight_packed is on {self.weight_packed.device} and weight_scale on "
                    f"{self.weight_scale.device}: move the layer with .to(device)"
                )
            t = TernaryTensor._make(
                "i2_s",
                self._weight_shape(),
                self._block_size(),
                "absmean",
                self.weight_packed.detach() if on_gpu else self.weight_packed.numpy(),
                self.weight_scale.detach() if on_gpu else self.weight_scale.numpy(),
            )
            if not on_gpu:
                vouched_weight_id(t.packed)
            cached = self.__dict__["_ternary_cache"] = (key, t)
        return cached[1]

    def _set_frozen(self, t: TernaryTensor | None) -> None:
        """Replace the float weight by I2_S buffers (those of ``t``, or empty ones of the right size),
        on the device of the weight they replace (a layer on a GPU keeps its buffers there)."""
        if t is None:
            t = quantize_i2s(np.zeros(self._weight_shape(), np.float32), block_size=self._block_size(), device="cpu")
        old = self._parameters.get("weight")  # type: ignore[attr-defined]
        device = old.device if old is not None else self.weight_packed.device
        if "weight" in self._parameters:  # type: ignore[attr-defined]
            del self._parameters["weight"]  # type: ignore[attr-defined]
        packed = torch.from_numpy(np.array(t.packed)).to(device)
        scales = torch.from_numpy(np.array(t.scales)).to(device)
        if self.frozen:
            self.weight_packed = packed
            self.weight_scale = scales
        else:
            self.register_buffer("weight_packed", packed)  # type: ignore[attr-defined]
            self.register_buffer("weight_scale", scales)  # type: ignore[attr-defined]

    def freeze(self) -> Any:  # noqa: ANN401 (returns self, the subclass)
        """Pack the weight as I2_S (``quantize_i2s(weight, method="absmean")``) and run the kernels from now on.

        The float weight is dropped; the layer keeps ``weight_packed``
        (uint8) and ``weight_scale`` (float32) buffers, which ``state_dict()``
        holds, on the device the weight was on. The forward then runs the
        kernels (CPU or CUDA tensors, see the class); where autograd needs
        them it passes the training mode's gradients to the input
        (straight-through, the dequantized weight) and to the bias, none to
        the packed weight, so layers around it still train. Run inference
        under ``torch.no_grad()``/``torch.inference_mode()``: with gradients
        on, recording the graph costs about 14 us a call (a 128x128 layer,
        Zen 4). ``torch.jit.trace`` and ``torch.fx`` tracing of a frozen layer
        are a clear error (the kernels run outside torch). Returns ``self``; a
        frozen layer is returned as it is. A weight under a
        ``torch.nn.utils.parametrize`` parametrization is packed as the
        parametrization gives it (the parametrization is dropped).
        """
        if not self.frozen:
            if parametrize.is_parametrized(self, "weight"):  # type: ignore[arg-type]
                self._unparametrize()
            self._set_frozen(self.ternary_weight())
        return self

    def _unparametrize(self) -> None:
        """Make the weight the parametrization gives a plain parameter again (freezing packs it).
        Not ``remove_parametrizations``: it edits the class torch made for the module, which a
        ``deepcopy`` (``convert``'s) shares with the original."""
        names = list(self.parametrizations.keys())  # type: ignore[attr-defined]
        if names != ["weight"]:
            raise ValueError(f"freeze() packs a parametrized weight, but parametrizations of {names} are "
                             f"registered: remove the others first (torch.nn.utils.parametrize)")  # fmt: skip
        with torch.no_grad():
            w = self.weight.detach().clone()  # type: ignore[attr-defined]
        base = next(c for c in type(self).__mro__ if not getattr(c, "__module__", "").startswith("torch.nn.utils"))
        self.__class__ = base
        del self._modules["parametrizations"]  # type: ignore[attr-defined]
        self.weight = nn.Parameter(w)

    def _apply(self, fn: Any, recurse: bool = True) -> Any:  # noqa: ANN401 (torch's signature)
        """``nn.Module._apply`` (``.to()``, ``.half()``, ``.cuda()``, ...), except that the frozen
        ``weight_scale`` keeps its float32 values, moved to the device the others went to: the
        kernels take float32 scales, and a cast to float16 and back would have rounded them."""
        scale = self._buffers.get("weight_scale")  # type: ignore[attr-defined]
        out = super()._apply(fn, recurse)  # type: ignore[misc]
        moved = self._buffers.get("weight_scale")  # type: ignore[attr-defined]
        if scale is not None and moved is not None and moved.dtype != scale.dtype:
            self._buffers["weight_scale"] = scale.to(device=moved.device)  # type: ignore[attr-defined]
        return out

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:  # noqa: ANN401
        # a frozen state dict loads into a training-mode layer: it becomes frozen
        # (both buffers: a state dict lacking one fails the load with the layer as it was)
        if prefix + "weight_packed" in state_dict and prefix + "weight_scale" in state_dict and not self.frozen:
            self._set_frozen(None)
        if self.frozen and prefix + "weight" in state_dict and prefix + "weight_packed" not in state_dict:
            # a float weight cannot go into packed buffers: an error also with strict=False (the
            # layer would keep its old weight silently); error_msgs is load_state_dict's list
            args[-1].append(
                f"{prefix}weight: a float (training-mode) weight for a frozen {type(self).__name__}: load it into "
                f"a training-mode model, then freeze() it (or bitnet_go.nn.convert the model)"
            )
            return
        super()._load_from_state_dict(state_dict, prefix, *args)  # type: ignore[misc]

    def __getattr__(self, name: str) -> Any:  # noqa: ANN401 (nn.Module's)
        try:
            return super().__getattr__(name)  # type: ignore[misc]
        except AttributeError:
            if name == "weight" and "weight_packed" in self.__dict__.get("_buffers", {}):
                raise AttributeError(
                    f"a frozen {type(self).__name__} has no float weight: it is packed I2_S (weight_packed, "
                    f"weight_scale); ternary_weight() gives it as a TernaryTensor, .dequantize() as floats"
                ) from None
            raise

    def _take_float(self, module: nn.Module, freeze: bool) -> Any:  # noqa: ANN401 (self, the subclass)
        """Copy ``module``'s float weight and bias into this new layer (``from_float``'s last
        step), frozen when ``freeze``."""
        with torch.no_grad():
            self.weight.copy_(module.weight.detach())  # type: ignore[operator]
            if module.bias is not None:
                self.bias.copy_(module.bias.detach())  # type: ignore[union-attr,operator]
        return self.freeze() if freeze else self

    def _frozen_extra(self) -> str:
        s = f", act_bits={self.act_bits}"
        return s + (", frozen=True (i2_s)" if self.frozen else "")

    def _bias_arg(self) -> torch.Tensor | np.ndarray | None:
        """The bias for the kernels: a CPU layer's as float32 numpy, made once per state of the
        parameter (its address, torch version counter and dtype, as :meth:`ternary_weight`)."""
        b = self.bias  # type: ignore[attr-defined]
        if b is None or b.is_cuda:
            return None if b is None else b.detach()
        key = (b.data_ptr(), _version(b), b.dtype)
        cached = self.__dict__.get("_bias_cache")
        if cached is None or cached[0] != key:
            cached = self.__dict__["_bias_cache"] = (key, as_float32(b.detach(), "bias"))
        return cached[1]  # type: ignore[no-any-return]


def _out_like(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return y.to(x.dtype) if x.dtype.is_floating_point and x.dtype != y.dtype else y


class _FrozenFunction(torch.autograd.Function):
    """A frozen layer's forward (the kernels) with the gradients of the training-mode forward: to
    the input, ``grad_y`` through the dequantized ternary weight (the fake-quantized weight of
    training mode, bit for bit; the int8 activations straight-through, as
    :func:`int8_fake_quant`), and to the bias, ``grad_y`` summed. The packed weight gets none."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, bias: torch.Tensor | None, layer: _Frozen) -> torch.Tensor:  # noqa: ANN401
        ctx.layer, ctx.x_shape, ctx.has_bias = layer, x.shape, bias is not None
        return layer._kernel_forward(x)

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:  # noqa: ANN401
        layer = ctx.layer
        gx = gb = None
        if ctx.needs_input_grad[0]:
            w = torch.from_numpy(np.asarray(layer.ternary_weight().cpu().dequantize())).to(gy.device, gy.dtype)
            gx = layer._input_grad(gy, w, ctx.x_shape)
        if ctx.has_bias and ctx.needs_input_grad[1]:
            gb = gy.sum(dim=[d for d in range(gy.ndim) if d != layer._channel_dim(gy)])
        return gx, gb, None


def _frozen_forward(layer: Any, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN401 (BitLinear or BitConv2d)
    """A frozen layer's forward: the kernels, with gradients where the input or the bias needs
    them; a clear error where torch traces (the kernels run outside torch: a trace would record
    their output as a constant)."""
    if torch.jit.is_tracing():
        raise RuntimeError(
            f"a frozen {type(layer).__name__} runs bitnet_go's kernels outside torch, so torch.jit.trace would "
            f"record its output as a constant: trace the training-mode model instead"
        )
    if isinstance(x, torch.fx.Proxy):
        raise TypeError(f"a frozen {type(layer).__name__} cannot be symbolically traced (torch.fx): its kernels run "
                        f"outside torch; trace the training-mode model, or mark the layer a leaf")  # fmt: skip
    if x.is_meta:  # shapes only (a model built on the meta device): the float op on a meta weight of the shape
        return layer._meta_forward(x, torch.empty(layer._weight_shape(), dtype=x.dtype, device="meta"))
    try:
        if torch.is_grad_enabled() and (x.requires_grad or (layer.bias is not None and layer.bias.requires_grad)):
            return _FrozenFunction.apply(x, layer.bias, layer)  # type: ignore[no-any-return]
        return layer._kernel_forward(x)  # type: ignore[no-any-return]
    except ValueError as e:
        if "pass check_finite=False" in str(e):  # the layer has no such option
            raise ValueError(f"{str(e).split('; pass check_finite=False')[0]}: a frozen "
                             f"{type(layer).__name__} quantizes only finite inputs") from None  # fmt: skip
        raise


class BitLinear(_Frozen, nn.Linear):
    """A ternary ``nn.Linear`` (BitNet b1.58): trains with fake quantization, runs packed once frozen.

    Training mode (as constructed): a float master ``weight``; the forward
    fake-quantizes the weight to ternary (:func:`ternary_fake_quant`, absmean,
    one scale per ``block_size`` elements of the flattened weight or one for
    the tensor) and, with ``act_bits=8``, each row of the input (each token)
    to int8 (:func:`int8_fake_quant`), with straight-through gradients, so
    ``loss.backward()`` trains the master weight.

    Frozen (:meth:`freeze`, :func:`bitnet_go.nn.convert`): the weight is
    packed I2_S and the forward runs :func:`bitnet_go.linear_quantized`; it
    equals the training-mode forward to float32 rounding. The library keeps
    what it derives from the packed buffers (codes checked, kernel layouts)
    until they are replaced or written through torch (``load_state_dict``,
    ``copy_``, indexing: torch's version counter moves); write them through
    torch, not through a numpy or DLPack view, which it would not see.

    Devices (frozen): ``layer.to("cuda")`` moves the packed buffers (2 bits
    a weight) to the GPU, and the forward of CUDA input runs the GPU kernels
    there (``act_bits=8``: the CPU's bits; None: float32 activations); a CPU
    layer given CUDA input has its weight copied to that GPU once (kept
    while the buffers live). A CUDA layer given CPU input is a
    ``ValueError`` (move the input or the layer).

    Args:
        in_features, out_features, bias: as ``nn.Linear``, except that the
            sizes must be ints >= 1 (a layer of no weights has no scale).
        act_bits: 8 (W1.58A8, BitNet) or None (float activations).
        block_size: None (one weight scale, BitNet b1.58) or a divisor of
            ``in_features`` (``in_features``: one scale per output feature).

    Example:
        >>> import torch
        >>> from bitnet_go.nn import BitLinear
        >>> _ = torch.manual_seed(0)
        >>> layer = BitLinear(64, 8)
        >>> x = torch.randn(4, 64)
        >>> layer(x).sum().backward()
        >>> y = layer(x).detach()
        >>> frozen = layer.freeze()
        >>> bool(torch.allclose(frozen(x), y, atol=1e-5)), frozen.weight_packed.dtype
        (True, torch.uint8)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        act_bits: int | None = 8,
        block_size: int | None = None,
        device: Any = None,  # noqa: ANN401 (as nn.Linear)
        dtype: torch.dtype | None = None,
    ) -> None:
        _check_size(in_features, "in_features")
        _check_size(out_features, "out_features")
        if block_size is not None and (type(block_size) is not int or block_size < 1 or in_features % block_size):
            raise ValueError(f"block_size must be None or a divisor of in_features={in_features}, got {block_size!r}")
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.act_bits = _check_act_bits(act_bits)
        self.block_size = block_size

    def _weight_shape(self) -> tuple[int, ...]:
        return (self.out_features, self.in_features)

    def _kernel_forward(self, x: torch.Tensor) -> torch.Tensor:
        y = linear_quantized(x.detach(), self.ternary_weight(), self._bias_arg(), act_bits=self.act_bits)
        return _out_like(y, x)  # type: ignore[arg-type]

    def _input_grad(self, gy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
        return gy @ w

    def _meta_forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.linear(x, w, None if self.bias is None else self.bias.to("meta", x.dtype))

    def _channel_dim(self, gy: torch.Tensor) -> int:
        return gy.ndim - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``F.linear`` with the quantized weight (and int8 activations with ``act_bits=8``)."""
        if self.frozen:
            return _frozen_forward(self, x)
        w = ternary_fake_quant(self.weight, self.block_size)
        if self.act_bits == 8:
            # one sample a row (a 0-d x: F.linear refuses it; under torch.fx the last dimension)
            x = int8_fake_quant(x, -1 if isinstance(x, torch.fx.Proxy) else max(x.ndim - 1, 0))
        return F.linear(x, w, self.bias)

    @classmethod
    def from_float(
        cls, module: nn.Linear, *, act_bits: int | None = 8, block_size: int | None = None, freeze: bool = True
    ) -> BitLinear:
        """A BitLinear with ``module``'s weight and bias (copied), frozen unless ``freeze=False``.

        ``freeze=False`` gives a training-mode layer to fine-tune
        (quantization-aware training) from a float ``nn.Linear``.

        Example:
            >>> import torch
            >>> from bitnet_go.nn import BitLinear
            >>> BitLinear.from_float(torch.nn.Linear(16, 4)).frozen
            True
        """
        if not isinstance(module, nn.Linear):
            raise TypeError(f"module must be a torch.nn.Linear, got {type(module).__name__}")
        w = module.weight.detach()
        new = cls(
            module.in_features,
            module.out_features,
            module.bias is not None,
            act_bits=act_bits,
            block_size=block_size,
            device=w.device,
            dtype=w.dtype if w.dtype.is_floating_point else None,
        )
        return new._take_float(module, freeze)

    def extra_repr(self) -> str:
        bs = "" if self.block_size is None else f", block_size={self.block_size}"
        return super().extra_repr() + bs + self._frozen_extra()


class BitConv2d(_Frozen, nn.Conv2d):
    """A ternary ``nn.Conv2d``: trains with fake quantization, runs packed once frozen.

    As :class:`BitLinear`: training mode fake-quantizes the weight to ternary
    (absmean, one scale for the tensor) and, with ``act_bits=8``, each sample
    ``x[n]`` of the input to int8, with straight-through gradients; frozen, the
    forward runs :func:`bitnet_go.conv2d_quantized` on CPU tensors, or on
    CUDA tensors on their GPU (``conv.to("cuda")`` moves the packed buffers;
    see :class:`BitLinear` for the device rules and for writing the
    buffers). Only ``padding_mode="zeros"``. The arguments are ``nn.Conv2d``'s,
    except that ``in_channels``, ``out_channels`` and ``kernel_size`` must be
    >= 1 (a layer of no weights has no scale).

    Example:
        >>> import torch
        >>> from bitnet_go.nn import BitConv2d
        >>> _ = torch.manual_seed(0)
        >>> conv = BitConv2d(3, 8, 3, padding=1)
        >>> x = torch.randn(2, 3, 8, 8)
        >>> y = conv(x)
        >>> y.shape, bool(torch.allclose(conv.freeze()(x), y.detach(), atol=1e-5))
        (torch.Size([2, 8, 8, 8]), True)
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair | str = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        *,
        act_bits: int | None = 8,
        device: Any = None,  # noqa: ANN401 (as nn.Conv2d)
        dtype: torch.dtype | None = None,
    ) -> None:
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode must be 'zeros' (the kernels pad with zeros), got {padding_mode!r}")
        _check_size(in_channels, "in_channels")
        _check_size(out_channels, "out_channels")
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            device=device, dtype=dtype,
        )  # fmt: skip
        if min(self.kernel_size) < 1:
            raise ValueError(
                f"kernel_size must be >= 1 (a ternary layer needs at least one weight), got {kernel_size!r}"
            )
        self.act_bits = _check_act_bits(act_bits)
        self.block_size = None

    def _weight_shape(self) -> tuple[int, ...]:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    def _kernel_forward(self, x: torch.Tensor) -> torch.Tensor:
        y = conv2d_quantized(
            x.detach(), self.ternary_weight(), self._bias_arg(), stride=self.stride, padding=self.padding,
            dilation=self.dilation, groups=self.groups, act_bits=self.act_bits,
        )  # fmt: skip
        y = _out_like(y, x)  # type: ignore[arg-type]
        if x.ndim == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
            y = y.contiguous(memory_format=torch.channels_last)  # as nn.Conv2d keeps channels_last
        return y

    def _meta_forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to("meta", x.dtype)
        return F.conv2d(x, w, bias, self.stride, self.padding, self.dilation, self.groups)

    def _input_grad(self, gy: torch.Tensor, w: torch.Tensor, x_shape: torch.Size) -> torch.Tensor:
        # F.conv2d is linear in x: its gradient anywhere is the one at 0 (padding "same" included)
        with torch.enable_grad():
            x0 = torch.zeros(x_shape, dtype=gy.dtype, device=gy.device, requires_grad=True)
            y0 = F.conv2d(x0, w, None, self.stride, self.padding, self.dilation, self.groups)
            (g,) = torch.autograd.grad(y0, x0, gy)
        return g

    def _channel_dim(self, gy: torch.Tensor) -> int:
        return 0 if gy.ndim == 3 else 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``F.conv2d`` with the quantized weight (and int8 activations with ``act_bits=8``)."""
        if self.frozen:
            return _frozen_forward(self, x)
        w = ternary_fake_quant(self.weight)
        if self.act_bits == 8:
            x = int8_fake_quant(x, -3)  # one sample per image: C, H, W (batched or not)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)

    @classmethod
    def from_float(cls, module: nn.Conv2d, *, act_bits: int | None = 8, freeze: bool = True) -> BitConv2d:
        """A BitConv2d with ``module``'s geometry, weight and bias (copied), frozen unless ``freeze=False``.

        Example:
            >>> import torch
            >>> from bitnet_go.nn import BitConv2d
            >>> BitConv2d.from_float(torch.nn.Conv2d(3, 4, 3, padding="same")).padding
            'same'
        """
        if not isinstance(module, nn.Conv2d):
            raise TypeError(f"module must be a torch.nn.Conv2d, got {type(module).__name__}")
        if module.padding_mode != "zeros":
            raise ValueError(f"only padding_mode='zeros' is supported, got {module.padding_mode!r}")
        w = module.weight.detach()
        new = cls(
            module.in_channels, module.out_channels, module.kernel_size, module.stride, module.padding,
            module.dilation, module.groups, module.bias is not None, act_bits=act_bits, device=w.device,
            dtype=w.dtype if w.dtype.is_floating_point else None,
        )  # fmt: skip
        return new._take_float(module, freeze)

    def extra_repr(self) -> str:
        return super().extra_repr() + self._frozen_extra()
