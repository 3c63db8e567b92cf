"""PyTorch layers with ternary weights: ``BitLinear``, ``BitConv2d``, ``convert()`` (imports torch).

``import bitnet_go`` does not import this module (nor torch): import it as
``bitnet_go.nn`` (``from bitnet_go import nn as bnn``).

- :class:`BitLinear` and :class:`BitConv2d` have ``nn.Linear`` /
  ``nn.Conv2d``'s signatures. As constructed they train (BitNet b1.58): a
  float master weight, fake-quantized to ternary (absmean) in the forward,
  activations fake-quantized to int8 per sample (absmax), straight-through
  gradients. ``.freeze()`` packs the weight as I2_S; the forward then runs
  :func:`bitnet_go.linear_quantized` / :func:`bitnet_go.conv2d_quantized`
  on CPU tensors with the same result to float32 rounding.
- :func:`convert` replaces a model's ``nn.Linear`` / ``nn.Conv2d`` layers by
  frozen ones and reports what it replaced; :func:`layers` lists them.
- :func:`from_hf_packed` / :func:`to_hf_packed` read and write transformers'
  BitNet packing (four values per uint8 along dim 0 plus ``weight_scale``).

Example:
    >>> import torch
    >>> from bitnet_go import nn as bnn
    >>> model = torch.nn.Sequential(bnn.BitLinear(32, 16), torch.nn.ReLU(), bnn.BitLinear(16, 4))
    >>> model(torch.randn(8, 32)).sum().backward()  # trains
    >>> frozen, report = bnn.convert(model, progress=False)
    >>> [r.bytes_after for r in report]
    [196, 52]
"""

from ._convert import Converted, convert, convertible, layers
from ._hf import bitlinear_from_hf, from_hf_packed, pack_hf, to_hf_packed, unpack_hf
from ._layers import BitConv2d, BitLinear, absmean_scale, int8_fake_quant, ternary_fake_quant

__all__ = [
    "BitConv2d",
    "BitLinear",
    "Converted",
    "absmean_scale",
    "bitlinear_from_hf",
    "convert",
    "convertible",
    "from_hf_packed",
    "int8_fake_quant",
    "layers",
    "pack_hf",
    "ternary_fake_quant",
    "to_hf_packed",
    "unpack_hf",
]
