"""The wheel: tagged py3-none-manylinux_2_NN_<arch> for the glibc its library
needs, stripped, licensed, no libpython, installs and imports without Go, from
any directory. The sdist ships the LICENSE and the Go sources."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import setup  # noqa: E402  (the build glue under test: importing it runs nothing)

LICENSE_FIRST_LINE = "MIT License"


def elf_section_names(data: bytes) -> list[str]:
    """Section names of a 64-bit little-endian ELF file (independent of setup.py's reader)."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not an ELF64 LE file"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    return [data[names_at + h[0] : data.index(b"\0", names_at + h[0])].decode() for h in headers]


def glibc_bound(data: bytes) -> tuple[int, int]:
    """An upper bound on the glibc versions a library references: every GLIBC_x.y string in it."""
    found = {(int(a), int(b)) for a, b in re.findall(rb"GLIBC_(\d+)\.(\d+)", data)}
    assert found, "no GLIBC_ version strings: not a glibc-linked library?"
    return max(found)


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
    m = re.fullmatch(r"bitnet_go-[^-]+-py3-none-manylinux_(\d+)_(\d+)_(\w+)\.whl", wheel.name)
    assert m, wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    assert "bitnet_go/libbitnet_go.so" in names
    assert "bitnet_go/__init__.py" in names
    assert not any(n.endswith(".h") for n in names)
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    requires = [ln for ln in text.splitlines() if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert [r.split()[1].split(">")[0] for r in requires] == ["numpy"], requires
    assert "License-Expression: MIT" in text.splitlines(), text
    (lic,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert zipfile.ZipFile(wheel).read(lic).decode().splitlines()[0] == LICENSE_FIRST_LINE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks a Linux wheel")
def test_wheel_library_is_stripped_and_within_its_manylinux_tag(wheel: Path) -> None:
    data = zipfile.ZipFile(wheel).read("bitnet_go/libbitnet_go.so")
    sections = elf_section_names(data)
    assert ".text" in sections and ".dynsym" in sections, sections
    assert ".symtab" not in sections, "built without -ldflags=-s"
    assert not [s for s in sections if s.startswith((".debug_", ".zdebug_"))], "built without -ldflags=-w"
    m = re.search(r"-manylinux_(\d+)_(\d+)_", wheel.name)
    assert m, wheel.name
    tag = (int(m.group(1)), int(m.group(2)))
    assert glibc_bound(data) <= tag, (glibc_bound(data), wheel.name)
    assert tag == max(glibc_bound(data), (2, 17)), "tag: the oldest glibc the library allows (floor 2.17)"


@pytest.mark.skipif(shutil.which("objdump") is None, reason="compares with binutils' objdump -T")
def test_glibc_needs_reader_matches_objdump(wheel: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib.so"
    lib.write_bytes(zipfile.ZipFile(wheel).read("bitnet_go/libbitnet_go.so"))
    dump = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True).stdout
    want = max((int(a), int(b)) for a, b in re.findall(r"\bGLIBC_(\d+)\.(\d+)", dump))
    assert setup.glibc_needs(lib) == want


def test_manylinux_platform_rules(tmp_path: Path) -> None:
    not_elf = tmp_path / "x.so"
    not_elf.write_bytes(b"MZ not an ELF file")
    assert setup.manylinux_platform("macosx_11_0_arm64", not_elf) == "macosx_11_0_arm64"
    assert setup.manylinux_platform("linux_x86_64", not_elf) == "linux_x86_64"  # unknown needs: no claim
    assert setup.glibc_needs(not_elf) is None


def test_one_go_build_command_line() -> None:
    """make lib and the wheel build run the same command: setup.py's, stripped."""
    cmd = setup.go_build_command("go", Path("out.so"))
    assert "-ldflags=-s -w" in cmd and "-buildmode=c-shared" in cmd and "-trimpath" in cmd, cmd
    dry = subprocess.run(["make", "-n", "-B", "lib"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "setup.build_go_library" in dry and "go build" not in dry, dry


def test_sdist_ships_license_and_sources(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH="")
    code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp_path)!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    name = out.stdout.strip().splitlines()[-1]
    with tarfile.open(tmp_path / name) as tar:
        members = {m.split("/", 1)[1] for m in tar.getnames() if "/" in m}
        top = name.removesuffix(".tar.gz")
        license_text = tar.extractfile(f"{top}/LICENSE").read().decode()  # type: ignore[union-attr]
    assert license_text.splitlines()[0] == LICENSE_FIRST_LINE
    for want in ("setup.py", "go.mod", "go.sum", "bindings/main.go", "python/bitnet_go/__init__.py"):
        assert want in members, want
    assert not [m for m in members if m.startswith("_gen/")], "the generator is not needed to build"
    built = [m for m in members if m.endswith(".so") or (m.endswith(".h") and not m.startswith("cuda/"))]
    assert not built, built


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
