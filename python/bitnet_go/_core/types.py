"""The ``Literal`` types of the public API: one definition of each set of names.

Example:
    >>> from typing import get_args
    >>> get_args(Method)
    ('absmean', 'absmax')
"""

from __future__ import annotations

from typing import Literal, Union

QType = Literal["i2_s", "tl1", "tl2", "tq2_0", "tq1_0"]
"""Packed formats of a quantized tensor (the next formats join this list)."""

Method = Literal["absmean", "absmax"]
"""How a block's scale is computed (see ``bitnet_go.quantize_i2s``)."""

Algorithm = Literal["auto", "naive", "im2col", "direct", "lut"]
"""Algorithms a caller may ask ``conv2d_quantized`` for."""

Kernel = Literal["naive", "im2col", "direct", "depthwise", "gemm1x1", "lut"]
"""Algorithms that run (``"direct"`` and ``"auto"`` resolve to one of these)."""

Device = Union[Literal["auto", "cpu", "cuda"], str]
"""``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
