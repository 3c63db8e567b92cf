"""Build glue: compile the Go shared library into the package and tag the wheel.

The wheel holds one c-shared library that does not link libpython, so it is
tagged ``py3-none-<platform>``: one wheel serves every CPython 3. On Linux the
platform is ``manylinux_2_NN_<arch>``, NN being the newest glibc symbol version
the built library needs (read from its ELF version references). Building needs
Go (see go.mod for the version) on PATH; installing the wheel does not.

This file is also the one place that says how the library is built: ``make lib``
calls :func:`build_go_library` (stdlib only; setuptools is imported by
:func:`main` alone)::

    python3 -c 'import setup; setup.build_go_library(setup.Path("python/bitnet_go/libbitnet_go.so"))'
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
LIBNAME = {"darwin": "libbitnet_go.dylib", "win32": "bitnet_go.dll"}.get(sys.platform, "libbitnet_go.so")
# -s -w: no symbol table, no DWARF. Go's own pclntab stays, so panics and
# runtime/debug.Stack() still name functions, files and lines.
GO_LDFLAGS = "-s -w"
# The oldest glibc a manylinux tag claims when the library needs nothing newer
# (manylinux2014, the baseline pip and auditwheel treat as universal).
MIN_GLIBC = (2, 17)


def go_build_command(go: str, out: Path) -> list[str]:
    """The ``go build`` command line that writes the c-shared library to ``out``."""
    return [
        go,
        "build",
        "-buildmode=c-shared",
        "-trimpath",
        "-buildvcs=false",
        f"-ldflags={GO_LDFLAGS}",
        "-o",
        str(out),
        "./bindings",
    ]


def build_go_library(dest: Path) -> None:
    """Build the Go library and put it at ``dest`` (the cgo header is not kept).

    The Go toolchain is ``$GO`` if set (``make GO=go1.26.1 lib``), else ``go`` on PATH.
    """
    go = shutil.which(os.environ.get("GO") or "go")
    if go is None:
        raise SystemExit(
            "bitnet_go: building from source needs Go on PATH (https://go.dev/dl/, version in go.mod); "
            "or install a prebuilt wheel"
        )
    env = dict(os.environ, CGO_ENABLED="1")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / LIBNAME
        cmd = go_build_command(go, out)
        print("bitnet_go:", shlex.join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out, dest)


def glibc_needs(lib: Path) -> tuple[int, int] | None:
    """The newest ``GLIBC_x.y`` symbol version a 64-bit little-endian ELF file references.

    Reads the ELF version-needed section (``.gnu.version_r``, what ``objdump -T``
    shows). Returns None when the file is not such an ELF file or references no
    glibc version.
    """
    data = lib.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB
        return None
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    best: tuple[int, int] | None = None
    for _, sh_type, _, _, offset, _, link, count, _, _ in sections:
        if sh_type != 0x6FFFFFFE:  # SHT_GNU_verneed
            continue
        strtab = sections[link][4]
        entry = offset
        for _ in range(count):
            _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", data, entry)
            at = entry + aux
            for _ in range(cnt):
                _, _, _, name, anext = struct.unpack_from("<IHHII", data, at)
                end = data.index(b"\0", strtab + name)
                m = re.fullmatch(rb"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", data[strtab + name : end])
                if m:
                    version = (int(m.group(1)), int(m.group(2)))
                    best = version if best is None or version > best else best
                at += anext
            entry += nxt
    return best


def manylinux_platform(plat: str, lib: Path) -> str:
    """``linux_<arch>`` -> ``manylinux_2_NN_<arch>`` for the glibc ``lib`` needs; other platforms unchanged."""
    if not plat.startswith("linux_"):
        return plat
    needs = glibc_needs(lib)
    if needs is None:
        return plat
    major, minor = max(needs, MIN_GLIBC)
    return f"manylinux_{major}_{minor}_{plat[len('linux_') :]}"


def main() -> None:
    """Run setuptools with the Go build and the wheel tag hooked in."""
    from setuptools import setup
    from setuptools.command.build_py import build_py
    from setuptools.dist import Distribution

    try:
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # setuptools < 70.1
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

    class BuildPy(build_py):
        """build_py that also compiles the Go library into the package."""

        def run(self) -> None:
            super().run()
            build_go_library(Path(self.build_lib) / "bitnet_go" / LIBNAME)

    class BdistWheel(bdist_wheel):
        """Platform wheel, but independent of the Python version and ABI; manylinux on Linux."""

        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self) -> tuple[str, str, str]:
            _, _, plat = super().get_tag()
            if not self.plat_name_supplied:  # an explicit --plat-name wins
                lib = Path(self.get_finalized_command("build_py").build_lib) / "bitnet_go" / LIBNAME
                if lib.exists():
                    plat = manylinux_platform(plat, lib)
            return "py3", "none", plat

    class BinaryDistribution(Distribution):
        """A distribution that has a compiled part, so the wheel is a platform wheel."""

        def has_ext_modules(self) -> bool:
            return True

    setup(cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel}, distclass=BinaryDistribution)


if __name__ == "__main__":
    main()
