"""The ``Literal`` types of the public API and the element-type tables: one definition of each
set of names (``_quantized``, ``quantization`` and ``_core.ops`` import them from here).

Example:
    >>> from typing import get_args
    >>> get_args(Method)
    ('absmean', 'absmax')
    >>> CODE_RANGES["int4"], PLAIN_DTYPES[-1]
    ((-8, 7), 'binary')
"""

from __future__ import annotations

from typing import Literal, Union

QType = Literal["i2_s", "tl1", "tl2", "tq2_0", "tq1_0"]
"""Packed formats of a quantized tensor (the next formats join this list)."""

TERNARY_QTYPES: tuple[str, ...] = ("i2_s", "tl1", "tl2", "tq2_0", "tq1_0")
"""The packed ternary formats (``QType``'s names), in dtype-code order."""

INT_DTYPES: tuple[str, ...] = ("int8", "uint8", "int4", "uint4")
"""The integer element types of ``bitnet_go.quantize`` (affine: scales and zero points)."""

PLAIN_DTYPES: tuple[str, ...] = INT_DTYPES + ("binary",)
"""The element types of the plain (non-ternary) quantized tensors."""

CODE_RANGES: dict[str, tuple[int, int]] = {"int8": (-128, 127), "uint8": (0, 255), "int4": (-8, 7), "uint4": (0, 15),
                                           "binary": (-1, 1), "ternary": (-1, 1)}  # fmt: skip
"""Lowest and highest code of each element type (binary has no code 0)."""

TORCH_QDTYPES: dict[str, str] = {"torch.qint8": "int8", "torch.quint8": "uint8", "torch.quint4x2": "uint4"}
"""torch's quantized dtypes (as ``str(dtype)``, so torch need not be imported) by this package's names."""

VALUES_PER_BYTE: dict[str, int] = {"int8": 1, "uint8": 1, "int4": 2, "uint4": 2, "binary": 8}
"""How many values of a plain element type one byte of ``packed`` holds."""

Method = Literal["absmean", "absmax"]
"""How a block's scale is computed (see ``bitnet_go.quantize_i2s``)."""

Algorithm = Literal["auto", "naive", "im2col", "direct", "lut"]
"""Algorithms a caller may ask ``conv2d_quantized`` for."""

Kernel = Literal["naive", "im2col", "direct", "depthwise", "gemm1x1", "lut"]
"""Algorithms that run (``"direct"`` and ``"auto"`` resolve to one of these)."""

Device = Union[Literal["auto", "cpu", "cuda"], str]
"""``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
