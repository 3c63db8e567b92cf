"""Every docstring example in the installed package runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import bitnet_go

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(bitnet_go.__path__, "bitnet_go.")
    if not m.name.endswith("__main__") and not m.name.rsplit(".", 1)[-1].startswith("libbitnet_go")  # the Go .so
) + ["bitnet_go"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    mod = importlib.import_module(name)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_every_public_function_has_an_example() -> None:
    missing = [
        name
        for name in bitnet_go.__all__
        if not name.startswith("_") and ">>>" not in (getattr(bitnet_go, name).__doc__ or "")
    ]
    assert not missing, f"public names without a docstring example: {missing}"


README = Path(__file__).resolve().parent.parent / "README.md"
README_BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if README.is_file() else []


@pytest.mark.skipif(not README_BLOCKS, reason="README.md is not beside tests_py (an installed copy of the tests)")
@pytest.mark.parametrize("i", range(len(README_BLOCKS)))
def test_readme_python_blocks_run(i: int) -> None:
    """Each ```python block of the README runs as written, on its own (a block that needs torch
    skips without it)."""
    code = README_BLOCKS[i]
    if re.search(r"^\s*import torch|^\s*from torch", code, re.M):
        pytest.importorskip("torch")
    exec(compile(code, f"README.md python block {i}", "exec"), {"__name__": "readme"})
