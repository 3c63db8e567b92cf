"""bitnet_go: ternary (BitNet b1.58) quantization kernels written in Go.

Example:
    >>> import numpy as np, bitnet_go
    >>> t = bitnet_go.quantize_i2s(np.ones((4, 128), np.float32), block_size=128)
    >>> t.values().sum()
    np.int64(512)
"""

from . import cuda, diagnostics, functional, quantization
from ._conv import conv2d_quantized, quantize_conv_weight
from ._core.runtime import CPUFeatures, cpu_features, get_num_threads, set_num_threads
from ._linear import linear_quantized
from ._quantized import QuantizedTensor, dequantize
from ._ternary import TernaryTensor, quantize_i2s, quantize_tl1, quantize_tl2, quantize_tq1_0, quantize_tq2_0
from ._version import __version__
from .convert import load_checkpoint
from .quantization._api import choose_qparams, quantize

__all__ = [
    "CPUFeatures",
    "QuantizedTensor",
    "TernaryTensor",
    "__version__",
    "choose_qparams",
    "conv2d_quantized",
    "cpu_features",
    "cuda",
    "dequantize",
    "diagnostics",
    "functional",
    "get_num_threads",
    "linear_quantized",
    "load_checkpoint",
    "quantization",
    "quantize",
    "quantize_conv_weight",
    "quantize_i2s",
    "quantize_tl1",
    "quantize_tl2",
    "quantize_tq1_0",
    "quantize_tq2_0",
    "set_num_threads",
]
