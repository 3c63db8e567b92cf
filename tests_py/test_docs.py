"""Every docstring example in the installed package runs and gives what it shows."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

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
