"""Regenerate i2s_golden.json from the PyTorch reference (tests_py/torch_ref.py).

    python tests_go/testdata/gen_i2s_golden.py

The vectors are checked by tests_go/golden_test.go (Go kernels) and by
tests_py/test_quantize.py::test_golden_vectors (the Python package).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests_py"))
from torch_ref import ref_pack, ref_quantize  # noqa: E402


def case(name: str, x: np.ndarray, block_size: int | None, method: str) -> dict:
    x = np.asarray(x, np.float32)
    q, s = ref_quantize(torch.from_numpy(x), block_size, method)
    return {
        "name": name,
        "x": [float(v) for v in x],
        "block_size": block_size,
        "method": method,
        "values": [int(v) for v in q],
        "packed_hex": ref_pack(q).numpy().tobytes().hex(),
        "scale_bits": [int(v) for v in s.numpy().view(np.uint32)],
    }


def main() -> None:
    rng = np.random.default_rng(2026)
    up = float(np.nextafter(np.float32(1), np.float32(2)))
    cases = [
        case("absmax_ties_at_half", [2, 1, -1, up, -up, 0.5, -2], None, "absmax"),
        case("absmean_half_even", [0.5, -0.5, 1.5, -1.5, 1, -1], None, "absmean"),
        case("all_zero", [0, 0, 0, 0, 0], None, "absmean"),
        case("random_300_bs96_absmean", rng.standard_normal(300), 96, "absmean"),
        case("random_129_absmax", rng.standard_normal(129) * 1e-3, None, "absmax"),
        case("random_1000_bs100_absmax", rng.standard_normal(1000), 100, "absmax"),
        case("random_130_bs32_absmean", rng.standard_normal(130) * 50, 32, "absmean"),
    ]
    (HERE / "i2s_golden.json").write_text(json.dumps(cases, indent=1) + "\n")


if __name__ == "__main__":
    main()
