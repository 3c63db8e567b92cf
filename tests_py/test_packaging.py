"""The wheel: tagged py3-none-<platform>, no libpython, installs and imports
without Go, from any directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("go") is None:
        pytest.fail("building the wheel needs Go on PATH (see README)")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
    )
    (whl,) = out.glob("*.whl")
    return whl


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks a Linux wheel")
def test_wheel_tag_and_contents(wheel: Path) -> None:
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl") or "-py3-none-linux_" in wheel.name, wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "bitnet_go/libbitnet_go.so" in names
    assert "bitnet_go/__init__.py" in names
    assert not any(n.endswith(".h") for n in names)
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    requires = [ln for ln in text.splitlines() if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert [r.split()[1].split(">")[0] for r in requires] == ["numpy"], requires


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses ldd")
def test_installed_wheel_imports_without_go(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True
    )
    lib = target / "bitnet_go" / "libbitnet_go.so"
    ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "libpython" not in ldd and "libcuda" not in ldd, ldd
    numpy_dir = Path(__import__("numpy").__file__).parent.parent
    env = {
        "PATH": "/usr/bin:/bin",  # no Go
        "PYTHONPATH": os.pathsep.join([str(target), str(numpy_dir)]),
        "HOME": str(tmp_path),
    }
    code = (
        "import bitnet_go, numpy as np; "
        "t = bitnet_go.quantize_i2s(np.arange(-3, 4, dtype=np.float32)); "
        "print(bitnet_go.__file__); print(t.values().tolist())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd="/", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    file_line, values = out.stdout.strip().splitlines()
    assert file_line.startswith(str(target))
    assert values == "[-1, -1, -1, 0, 1, 1, 1]"  # scale 12/7: |1/scale| = 0.58 > 0.5
