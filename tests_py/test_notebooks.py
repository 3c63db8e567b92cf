"""The notebooks in examples/ run from top to bottom without errors (nbclient), and ship without outputs.

Each notebook asserts its own results (parity with torch, the ternary CNN's accuracy floor); together
they must finish in under two minutes. Skipped with a reason where nbclient/ipykernel, torch or
matplotlib (all notebooks), scikit-learn or ``bitnet_go.nn`` (02) are missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

import bitnet_go

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOKS = sorted(p.name for p in EXAMPLES.glob("*.ipynb"))
BUDGET_S = 120.0
"""All notebooks together, seconds."""

_spent: dict[str, float] = {}


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _needs(name: str) -> list[str]:
    need = ["torch", "matplotlib"]
    if name.startswith("02_"):
        need.append("sklearn")
    return need


def test_notebooks_exist_and_are_stripped() -> None:
    assert NOTEBOOKS[:3] == ["01_quantize.ipynb", "02_train_ternary_cnn.ipynb", "03_parity.ipynb"]
    for name in NOTEBOOKS:
        nb = json.loads((EXAMPLES / name).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and cell.get("execution_count") is None, f"{name}: outputs not stripped"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = _missing("nbclient", "nbformat", "ipykernel")
    if missing:
        pytest.skip(f"executing notebooks needs {', '.join(missing)} (pip install -r requirements-dev.txt)")
    missing = _missing(*_needs(name))
    if missing:
        pytest.skip(f"{name} needs {', '.join(missing)}")
    if name.startswith("02_"):
        try:
            importlib.import_module("bitnet_go.nn")
        except ImportError as e:
            pytest.skip(f"{name} needs bitnet_go.nn, which cannot be imported here: {e}")
    import nbclient
    import nbformat

    # the kernel imports the bitnet_go these tests import (an installed package or PYTHONPATH=python)
    root = str(Path(bitnet_go.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(EXAMPLES / name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=int(BUDGET_S), kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}
    )
    t0 = time.perf_counter()
    client.execute()  # raises CellExecutionError with the cell and its traceback on a failure
    _spent[name] = time.perf_counter() - t0
    stderr = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stderr"
    )  # fmt: skip
    assert "IProgress not found" not in stderr, f"{name}: tqdm's widget warning (ipywidgets missing): {stderr[:300]}"
    total = sum(_spent.values())
    assert total < BUDGET_S, f"the notebooks took {total:.0f} s so far ({_spent}), over {BUDGET_S:.0f} s"
