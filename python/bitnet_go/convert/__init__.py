"""Checkpoint conversion: safetensors in; ternary safetensors or GGUF out (``bitnet-go convert``).

:func:`convert_checkpoint` reads a checkpoint tensor by tensor through mmap
(numpy only: the ``safetensors`` package is not needed to read or write
safetensors), quantizes the selected weights (or unpacks transformers'
packed BitNet weights, keeping their values), and writes:

- **safetensors**: a quantized tensor ``N`` becomes ``N_packed`` (uint8, the
  :class:`~bitnet_go.TernaryTensor`'s ``packed`` bytes) and ``N_scale``
  (float32, its ``scales``); for ``x.weight`` these are ``x.weight_packed``
  and ``x.weight_scale``, the buffers of a frozen ``bitnet_go.nn`` layer, so
  an I2_S file loads into a model of frozen ``BitLinear``/``BitConv2d`` with
  ``load_state_dict``. The metadata key ``bitnet_go.quantized`` holds JSON
  ``{N: {"qtype", "shape", "block_size", "method"}}``; ``bitnet_go.checkpoint``
  is the layout version (``"1"``). Other tensors are copied unchanged (dtype
  kept). :func:`load_checkpoint` reads it back.
- **GGUF**: see ``bitnet_go.convert._gguf``: the tensor names, types,
  metadata keys and file type of bitnet.cpp's converter (I2_S, TL1, TL2) or
  llama.cpp's (TQ1_0, TQ2_0), written with the ``gguf`` package
  (``pip install 'bitnet_go[convert]'``); TL1/TL2 tiled by the model's
  ``kernel_config.ini`` (``bitnet_go.convert._tl_gguf``); the tokenizer's
  ``tokenizer.ggml.*`` keys (``bitnet_go.convert._tokenizer``).

Memory: one tensor at a time (its float32 copy, its packed form), the input's
pages released after each tensor; the output is written to a temporary file
renamed into place at the end.

Example:
    >>> from bitnet_go.convert import default_quantized
    >>> default_quantized("model.layers.0.mlp.up_proj.weight", (8, 4))
    True
"""

from ._convert import (
    META_KEY,
    PACKED_SUFFIX,
    SCALE_SUFFIX,
    Conversion,
    Planned,
    convert_checkpoint,
    default_quantized,
    hf_scale_mode,
    load_checkpoint,
    plan,
)
from ._formats import FORMATS
from ._gguf import ConfigError, bitnet_cpp_types
from ._reader import Checkpoint

__all__ = [
    "FORMATS",
    "META_KEY",
    "PACKED_SUFFIX",
    "SCALE_SUFFIX",
    "Checkpoint",
    "ConfigError",
    "Conversion",
    "Planned",
    "bitnet_cpp_types",
    "convert_checkpoint",
    "default_quantized",
    "hf_scale_mode",
    "load_checkpoint",
    "plan",
]
