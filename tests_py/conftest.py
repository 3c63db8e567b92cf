"""Shared fixtures, and the skips for optional packages.

Random data is drawn fresh per case from a seed printed in the test id, so any
failure can be replayed.

torch (and torchao, matplotlib, and setuptools/wheel for building wheels) are
optional: without them the tests that need them skip with a reason and the rest
runs. Some files that check parity with torch skip at import
(``pytest.importorskip`` with a reason); in test_quantize.py and test_conv.py,
whose other tests need no torch, the tests that call it carry
``@pytest.mark.needs("torch")`` and skip with "torch is not installed"
(:func:`pytest_collection_modifyitems`, which also marks the few tests elsewhere
that need an optional package). The header of the run says which optional
packages are installed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # torch_ref

OPTIONAL = ("torch", "torchao", "matplotlib", "safetensors", "gguf", "tqdm")
"""The dev packages (requirements-dev.txt) some tests need; without one, those tests skip."""

DOCTESTS_NEED = {
    "bitnet_go.bench._common": "torch",
    "bitnet_go.bench.conv": "matplotlib",
    "bitnet_go.convert._gguf": "gguf",
}
"""Modules whose docstring examples (test_docs.py) call an optional package, and which."""


def _have(module: str) -> bool:
    """Whether ``module`` (a top-level package) is installed, without importing it."""
    return importlib.util.find_spec(module) is not None


def _can_build_wheels() -> bool:
    """setup.py's ``bdist_wheel``: setuptools >= 70.1 has it, older setuptools needs the wheel package.

    Checked by file, without importing setuptools (which patches distutils).
    """
    spec = importlib.util.find_spec("setuptools")
    if spec is None or spec.origin is None:
        return False
    return (Path(spec.origin).parent / "command" / "bdist_wheel.py").exists() or _have("wheel")


def pytest_report_header(config: pytest.Config) -> str:
    """``bitnet_go optional packages: torch yes, torchao no (its tests skip), ...`` atop the run."""
    have = ", ".join(f"{m} {'yes' if _have(m) else 'no (its tests skip)'}" for m in OPTIONAL)
    return f"bitnet_go optional packages: {have}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*packages): the test imports these optional packages; without one it skips"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, with a reason, the tests that need a missing optional package: those marked
    ``@pytest.mark.needs("torch", ...)``, the docstring examples of :data:`DOCTESTS_NEED`, and the
    wheel/sdist builds of test_packaging.py."""
    wheels: bool | None = None  # checked once, when a packaging test is collected
    for item in items:
        path = Path(str(item.fspath)).name
        missing = [m for mark in item.iter_markers("needs") for m in mark.args if not _have(m)]
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"{missing[0]} is not installed"))
        elif path == "test_docs.py" and hasattr(item, "callspec"):
            need = DOCTESTS_NEED.get(item.callspec.params.get("name", ""))
            if need and not _have(need):
                item.add_marker(pytest.mark.skip(reason=f"{need} is not installed: these docstring examples call it"))
        elif path == "test_packaging.py" and ("wheel" in item.fixturenames or "sdist" in item.name):
            if wheels is None:
                wheels = _can_build_wheels()
            if not wheels:
                reason = "building wheels needs setuptools >= 70.1 or the wheel package"
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _restore_threads():
    import bitnet_go

    old = bitnet_go.get_num_threads()
    yield
    bitnet_go.set_num_threads(old)
