"""``convert(model)``: replace a model's linear and conv layers by frozen ternary ones."""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Callable, Iterable
from typing import NamedTuple, Union

import torch
from torch import nn

from .._progress import progress as _progress
from ._layers import BitConv2d, BitLinear

Selector = Union[str, Iterable[str], Callable[[str, nn.Module], bool], None]
"""Which layers: a glob pattern on the qualified name (``"features.*"``), several, or a predicate."""


class Converted(NamedTuple):
    """One layer ``convert()`` replaced: its qualified name, its former class, the weight shape,
    and the bytes of weight and bias before (float) and after (I2_S bytes, scales, bias)."""

    name: str
    kind: str
    shape: tuple[int, ...]
    bytes_before: int
    bytes_after: int


def _matcher(sel: Selector, default: bool, arg: str) -> Callable[[str, nn.Module], bool]:
    """The predicate of ``include`` / ``exclude`` (``arg``, for the message); None: always ``default``."""
    if sel is None:
        return lambda name, m: default
    if callable(sel):
        return sel
    accepts = "None, a glob pattern (str), an iterable of them or a callable (name, module) -> bool"
    if isinstance(sel, (bytes, bytearray)) or not isinstance(sel, (str, Iterable)):
        raise TypeError(f"{arg} must be {accepts}, got {type(sel).__name__} {sel!r}")
    patterns = [sel] if isinstance(sel, str) else list(sel)
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"{arg} must be {accepts}; it holds {type(p).__name__} {p!r}")
    return lambda name, m: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _check_materialized(name: str, m: nn.Module) -> None:
    """A ``ValueError`` naming the layer unless its weight and bias hold data (not on the meta device)
    and the weight has at least one element (the quantizer's absmean needs one)."""
    layer = f"layer {name!r}" if name else f"the model (a bare {type(m).__name__})"
    tensors = [*m.parameters(recurse=False), *m.buffers(recurse=False)]
    if any(t.is_meta for t in tensors):
        raise ValueError(
            f"{layer} has parameters on the meta device (no data): load the weights first "
            "(e.g. load_state_dict(..., assign=True) or to_empty() then load), then convert"
        )
    w: torch.Tensor = m.weight  # type: ignore[assignment]
    if w.numel() == 0:
        raise ValueError(f"{layer} has an empty weight, shape {tuple(w.shape)}: a ternary layer needs at least one")


def _bytes(*tensors: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def _frozen_of(m: nn.Module) -> nn.Module:
    """The frozen replacement of a convertible layer (a new module, ``m`` left as it is)."""
    if isinstance(m, (BitLinear, BitConv2d)):
        return copy.deepcopy(m).freeze()
    if isinstance(m, nn.Linear):
        return BitLinear.from_float(m)
    return BitConv2d.from_float(m)  # type: ignore[arg-type]


def convertible(m: nn.Module) -> bool:
    """True for the layers ``convert()`` replaces: ``nn.Linear``, ``nn.Conv2d`` with zero padding
    (subclasses included), and BitLinear/BitConv2d in training mode."""
    if isinstance(m, (BitLinear, BitConv2d)):
        return not m.frozen
    if isinstance(m, nn.Conv2d):
        return type(m) is nn.Conv2d and m.padding_mode == "zeros"
    return type(m) is nn.Linear


def convert(
    model: nn.Module,
    *,
    include: Selector = None,
    exclude: Selector = None,
    inplace: bool = False,
    progress: bool | None = None,
) -> tuple[nn.Module, list[Converted]]:
    """Replace ``model``'s ``nn.Linear`` and ``nn.Conv2d`` layers by frozen BitLinear / BitConv2d.

    Each selected layer is quantized to ternary I2_S (absmean, one scale per
    layer, int8 activations: ``from_float`` with its defaults); BitLinear and
    BitConv2d layers in training mode are frozen with their own settings.
    Subclasses of ``nn.Linear`` / ``nn.Conv2d`` (they may have a forward of
    their own) and convolutions with a ``padding_mode`` other than
    ``"zeros"`` are left as they are.

    Args:
        model: the model; a bare ``nn.Linear`` or ``nn.Conv2d`` works too (the
            returned model is then the new layer).
        include: convert only layers whose qualified name (as
            ``named_modules()``) matches one of these glob patterns, or for
            which the callable ``include(name, module)`` is true; None: all.
        exclude: then leave out those matching (same forms); None: none.
        inplace: False: convert a deep copy and leave ``model`` untouched;
            True: replace the layers in ``model`` itself.
        progress: None: a tqdm bar when tqdm is installed (optional), else
            nothing; True: the bar, or a line a layer on stderr without tqdm;
            False: nothing.

    Returns:
        ``(model, report)``: the converted model and one :class:`Converted`
        a replaced layer, in ``named_modules()`` order. A layer used at
        several places (one module shared) is selected by its first name,
        replaced by one frozen module at every place, and reported once.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``, or ``include`` /
            ``exclude`` is none of the forms above.
        ValueError: a selected layer has its parameters on the meta device
            (load the weights first) or an empty weight; checked for every
            selected layer before any is replaced.

    Interrupting (``KeyboardInterrupt``, e.g. a notebook's stop button)
    propagates at once: layers replaced so far stay converted, the others are
    untouched (with ``inplace=False`` that is the copy, which is dropped, and
    ``model`` is unchanged). Each layer is replaced only once its frozen
    version is complete.

    Example:
        >>> import torch
        >>> from bitnet_go import nn as bnn
        >>> model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 10))
        >>> qmodel, report = bnn.convert(model, exclude="2", progress=False)
        >>> [(r.name, r.kind, r.shape) for r in report]
        [('0', 'Conv2d', (8, 3, 3, 3))]
        >>> type(qmodel[0]).__name__, type(model[0]).__name__
        ('BitConv2d', 'Conv2d')
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    inc, exc = _matcher(include, True, "include"), _matcher(exclude, False, "exclude")
    if not inplace:
        model = copy.deepcopy(model)
    todo = [(n, m) for n, m in model.named_modules() if convertible(m) and inc(n, m) and not exc(n, m)]
    # every place a layer sits (a module used twice is one layer: one frozen module for both places)
    places: dict[int, list[str]] = {}
    for n, m in model.named_modules(remove_duplicate=False):
        places.setdefault(id(m), []).append(n)
    for name, m in todo:  # before any is replaced: a bad layer leaves the model as it was
        _check_materialized(name, m)
    report: list[Converted] = []
    for name, m in _progress(todo, progress, "bitnet_go.nn.convert", "layer"):
        w = m.weight
        before = _bytes(w, m.bias)  # type: ignore[arg-type]
        new = _frozen_of(m)
        after = _bytes(new.weight_packed, new.weight_scale, new.bias)  # type: ignore[arg-type]
        for place in places[id(m)]:
            if place == "":
                model = new
            else:
                parent_name, _, attr = place.rpartition(".")
                setattr(model.get_submodule(parent_name), attr, new)
        report.append(Converted(name, type(m).__name__, tuple(w.shape), before, after))  # type: ignore[union-attr]
    return model, report


def layers(model: nn.Module) -> list[tuple[str, str, tuple[int, ...], str, int]]:
    """The linear and conv layers of ``model``: (name, class, weight shape, format, weight bytes).

    The format is ``"i2_s"`` for frozen BitLinear/BitConv2d (bytes: packed
    weight and scales), ``"ternary fake-quant"`` for training-mode ones, and
    the float dtype (``"float32"``) for plain ``nn.Linear``/``nn.Conv2d``.

    Example:
        >>> import torch
        >>> from bitnet_go import nn as bnn
        >>> model, _ = bnn.convert(torch.nn.Sequential(torch.nn.Linear(128, 4)), progress=False)
        >>> bnn.layers(model)
        [('0', 'BitLinear', (4, 128), 'i2_s', 132)]
    """
    out = []
    for name, m in model.named_modules():
        if isinstance(m, (BitLinear, BitConv2d)) and m.frozen:
            out.append((name, type(m).__name__, m._weight_shape(), "i2_s", _bytes(m.weight_packed, m.weight_scale)))
        elif isinstance(m, (BitLinear, BitConv2d)):
            out.append((name, type(m).__name__, tuple(m.weight.shape), "ternary fake-quant", _bytes(m.weight)))
        elif isinstance(m, (nn.Linear, nn.Conv2d)):
            dt = str(m.weight.dtype).removeprefix("torch.")
            out.append((name, type(m).__name__, tuple(m.weight.shape), dt, _bytes(m.weight)))
    return out
