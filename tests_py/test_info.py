"""``python -m bitnet_go info``: every op's kernel, with the CPU kind and the reasons, in a fresh process
(before any op ran)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import bitnet_go

PYTHON_DIR = Path(bitnet_go.__file__).resolve().parent.parent


def test_info_lists_every_ops_kernel_from_start_up() -> None:
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    out = subprocess.run([sys.executable, "-m", "bitnet_go", "info"], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout  # fmt: skip
    info = json.loads(out)
    cpu, table = info["cpu"], info["kernels"]
    ops = set(cpu["kernel_families"])
    assert {"conv_gemm", "conv_lut", "quantize_i2s"} <= ops  # conv_lut too, although no LUT conv ran
    assert set(cpu["kernels"]) == ops and set(cpu["kernel_reasons"]) == ops
    assert table["cpu_kind"] == cpu["cpu_kind"] and table["cpu_kind"]
    assert table["dispatch"] == cpu["dispatch"]
    assert set(table["ops"]) == ops
    for op, row in table["ops"].items():
        assert row["kernel"] in cpu["kernel_families"][op], (op, row)
        assert row["reason"] and row["families"] == cpu["kernel_families"][op], (op, row)
