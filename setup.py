"""Build glue: compile the Go shared library into the package and tag the wheel.

The wheel holds one c-shared library that does not link libpython, so it is
tagged ``py3-none-<platform>``: one wheel serves every CPython 3. Building
needs Go (see go.mod for the version) on PATH; installing the wheel does not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent
LIBNAME = {"darwin": "libbitnet_go.dylib", "win32": "bitnet_go.dll"}.get(sys.platform, "libbitnet_go.so")


def build_go_library(dest: Path) -> None:
    """Run ``go build -buildmode=c-shared`` and put the library at ``dest``."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit(
            "bitnet_go: building from source needs Go on PATH (https://go.dev/dl/, version in go.mod); "
            "or install a prebuilt wheel"
        )
    env = dict(os.environ, CGO_ENABLED="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / LIBNAME
        cmd = [go, "build", "-buildmode=c-shared", "-trimpath", "-buildvcs=false", "-o", str(out), "./bindings"]
        print("bitnet_go:", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)


class BuildPy(build_py):
    """build_py that also compiles the Go library into the package."""

    def run(self) -> None:
        super().run()
        build_go_library(Path(self.build_lib) / "bitnet_go" / LIBNAME)


class BdistWheel(bdist_wheel):
    """Platform wheel, but independent of the Python version and ABI."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel}, distclass=BinaryDistribution)
