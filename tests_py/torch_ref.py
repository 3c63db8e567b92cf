"""PyTorch references for the tests, written from DESIGN.md's formulas.

Torch ops only, float32 with torch.round (half to even); independent of the
bitnet_go code under test.
"""

from __future__ import annotations

import torch


def ref_quantize(x: torch.Tensor, block_size: int | None, method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Ternary values (int8, flat) and float32 scales of a float32 tensor."""
    flat = x.reshape(-1).to(torch.float32)
    n = flat.numel()
    bs = n if block_size is None or block_size >= n else block_size
    nb = -(-n // bs)
    pad = nb * bs - n
    blocks = torch.cat([flat, torch.zeros(pad, dtype=torch.float32)]).reshape(nb, bs)
    if method == "absmean":
        counts = torch.full((nb,), bs, dtype=torch.float64)
        counts[-1] = bs - pad
        gamma = (blocks.abs().to(torch.float64).sum(dim=1) / counts).to(torch.float32)
        scale = torch.clamp(gamma, min=1e-5)
        q = torch.clamp(torch.round(blocks / scale[:, None]), -1, 1)
    elif method == "absmax":
        scale = torch.clamp(blocks.abs().amax(dim=1), min=1e-8)
        r = blocks / scale[:, None]
        q = torch.where(r > 0.5, 1.0, torch.where(r < -0.5, -1.0, 0.0))
    else:
        raise ValueError(method)
    return q.reshape(-1)[:n].to(torch.int8), scale


def ref_pack(q: torch.Tensor) -> torch.Tensor:
    """I2_S bytes of flat int8 values: groups of 128, value j in byte j%32 at shift 6-2*(j//32)."""
    n = q.numel()
    groups = -(-n // 128)
    codes = torch.ones(groups * 128, dtype=torch.int32)
    codes[:n] = q.to(torch.int32) + 1
    c = codes.reshape(groups, 4, 32)
    packed = (c[:, 0] << 6) | (c[:, 1] << 4) | (c[:, 2] << 2) | c[:, 3]
    return packed.reshape(-1).to(torch.uint8)
