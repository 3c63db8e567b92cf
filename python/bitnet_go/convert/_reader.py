"""Reading safetensors checkpoints through mmap and numpy (no safetensors package needed).

A safetensors file is an 8-byte little-endian header length N, N bytes of
JSON (``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}}``), then the data, offsets counted from the end of the header.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import reprlib
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from .._core.ops import cast

PathLike = Union[str, "os.PathLike[str]"]

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # numpy has no bfloat16: read as its bits (see :func:`to_float32`)
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
"""safetensors dtype names and the numpy dtype their bytes are read as."""

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
"""The dtypes that can be quantized."""

MAX_HEADER = 100 << 20
"""Largest header accepted (safetensors' own limit)."""

INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class Entry:
    """One tensor of a checkpoint: where its bytes are and what they hold."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    begin: int  # absolute file offsets
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


def read_header(path: PathLike) -> tuple[dict[str, Entry], dict[str, str]]:
    """The tensors and the ``__metadata__`` of one safetensors file, checked against the file's size: a header
    that is not a JSON object, an entry :func:`_entry` refuses or tensors whose bytes overlap are a
    ``ValueError`` naming the file (and the tensor).

    Example:
        >>> import tempfile, os
        >>> from bitnet_go.convert._writer import write_safetensors_header
        >>> p = os.path.join(tempfile.mkdtemp(), "x.safetensors")
        >>> with open(p, "wb") as f:
        ...     _ = write_safetensors_header(f, [("w", "F32", (2,), 8)], {"k": "v"})
        ...     _ = f.write(np.ones(2, np.float32).tobytes())
        >>> entries, meta = read_header(p)
        >>> entries["w"].shape, entries["w"].nbytes, meta
        ((2,), 8, {'k': 'v'})
    """
    p = Path(path)
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{p}: not a safetensors file (shorter than the 8-byte header length)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise ValueError(f"{p}: not a safetensors file (header length {n} for a file of {size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{p}: not a safetensors file (the header is not JSON: {e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{p}: the safetensors header must be a JSON object, got {type(header).__name__}")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError(f"{p}: __metadata__ must map strings to strings")
    start = 8 + n
    entries = {name: _entry(p, name, info, start, size) for name, info in header.items()}
    _check_disjoint(p, entries, start)
    return entries, dict(meta)


def is_json_int(v: object) -> bool:
    """Whether ``v`` is an integer as ``json.loads`` reads one: an int, not a bool (``true``) or a float (``4.0``).

    Example:
        >>> is_json_int(4), is_json_int(4.0), is_json_int(True), is_json_int(None)
        (True, False, False, False)
    """
    return isinstance(v, int) and not isinstance(v, bool)


def _entry(p: Path, name: str, info: object, start: int, size: int) -> Entry:
    """Header entry ``name`` of file ``p`` (data from byte ``start`` of ``size``) checked and made an
    :class:`Entry`: an object with ``dtype`` (a name in :data:`DTYPES`), ``shape`` (a list of ints >= 0) and
    ``data_offsets`` (two ints ``[begin, end]``, the shape's bytes, within the file); a ``ValueError`` naming
    the file and the tensor otherwise.

    Example:
        >>> e = _entry(Path("x.safetensors"), "w", {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, 16, 24)
        >>> e.shape, e.begin, e.end
        ((2,), 16, 24)
        >>> _entry(Path("x.safetensors"), "w", {"dtype": "F32", "shape": [2], "data_offsets": [0.0, 8.0]}, 16, 24)
        Traceback (most recent call last):
        ValueError: x.safetensors: tensor 'w': data_offsets must be two ints [begin, end], got [0.0, 8.0]
    """
    where = f"{p}: tensor {name!r}"
    if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
        raise ValueError(f"{where}: malformed header entry {info!r} (an object with dtype, shape and data_offsets)")
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str):
        raise ValueError(f"{where}: dtype must be a string such as 'F32', got {dtype!r}")
    if dtype not in DTYPES:
        raise ValueError(
            f"{where} has dtype {dtype}, which is not supported (supported: "
            f"{', '.join(DTYPES)}; F8 and other dtypes numpy cannot read are not)"
        )
    if not isinstance(shape, list) or not all(is_json_int(d) and d >= 0 for d in shape):
        raise ValueError(f"{where}: shape must be a list of ints >= 0, got {shape!r}")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(is_json_int(o) for o in offsets):
        raise ValueError(f"{where}: data_offsets must be two ints [begin, end], got {offsets!r}")
    b, e = offsets
    want = math.prod(shape) * DTYPES[dtype].itemsize
    if not (0 <= b <= e) or e - b != want or start + e > size:
        raise ValueError(
            f"{where} ({dtype}, shape {shape}) has data_offsets [{b}, {e}]: "
            f"expected {want} bytes within the file's {size - start} data bytes"
        )
    return Entry(name, dtype, tuple(shape), p, start + b, start + e)


def _check_disjoint(p: Path, entries: dict[str, Entry], start: int) -> None:
    """Refuse tensors whose bytes overlap (a corrupt or hand-made header: two tensors would share data)."""
    last: Entry | None = None
    for e in sorted(entries.values(), key=lambda e: (e.begin, e.end)):
        if last is not None and e.begin < last.end and e.nbytes and last.nbytes:
            raise ValueError(
                f"{p}: tensors {last.name!r} (data_offsets [{last.begin - start}, {last.end - start}]) and "
                f"{e.name!r} ([{e.begin - start}, {e.end - start}]) overlap: the header is corrupt"
            )
        if last is None or e.end > last.end:
            last = e


def find_files(path: PathLike) -> tuple[list[Path], dict[str, Any] | None]:
    """The safetensors files of a checkpoint and its ``config.json`` (None when there is none).

    ``path``: a ``.safetensors`` file (a ``config.json`` beside it is used);
    a directory with ``model.safetensors.index.json`` (the shards it names);
    or a directory with ``config.json`` and ``model.safetensors`` or other
    ``*.safetensors`` files (all of them, sorted).

    Example:
        >>> find_files("/nonexistent")
        Traceback (most recent call last):
        FileNotFoundError: /nonexistent: no such file or directory
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_file():
        cfg = p.parent / "config.json"
        return [p], load_json_object(cfg) if cfg.is_file() else None
    cfg_path = p / "config.json"
    config = load_json_object(cfg_path) if cfg_path.is_file() else None
    index = p / INDEX_NAME
    if index.is_file():
        files = sorted({p / f for f in _shard_names(index)})
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{index} names shards that do not exist: {missing}")
        return files, config
    single = p / "model.safetensors"
    files = [single] if single.is_file() else sorted(p.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{p}: no {INDEX_NAME}, model.safetensors or other *.safetensors file in this directory"
        )
    return files, config


def _shard_names(index: Path) -> set[str]:
    """The shard file names ``model.safetensors.index.json`` names: its ``weight_map`` must be a non-empty
    object mapping each tensor name to a file name (a string); a ``ValueError`` naming the index otherwise.

    Example:
        >>> import tempfile
        >>> index = Path(tempfile.mkdtemp()) / INDEX_NAME
        >>> _ = index.write_text('{"weight_map": {"a": "1.safetensors", "b": "1.safetensors"}}')
        >>> _shard_names(index)
        {'1.safetensors'}
        >>> _ = index.write_text('{"weight_map": {"a": 5}}')
        >>> _shard_names(index)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: .../model.safetensors.index.json: weight_map must map each tensor name to its file name ...
    """
    data = load_json_object(index)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(
            f"{index}: expected a 'weight_map' object mapping tensor names to shard file names, "
            f"got {reprlib.repr(weight_map)}"
        )
    for name, file in weight_map.items():
        if not isinstance(file, str) or not file:
            raise ValueError(
                f"{index}: weight_map must map each tensor name to its file name (a string), "
                f"but {name!r} maps to {file!r}"
            )
    return set(weight_map.values())


def load_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in file ``path``; a ``ValueError`` naming the file when it is not JSON or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


@dataclass
class Checkpoint:
    """The tensors of a checkpoint (one file or shards), read one at a time through mmap.

    ``entries`` keeps the order of the files and, within a file, of its header.
    Use as a context manager (or call :meth:`close`): the maps stay open until then.

    Example:
        >>> import tempfile, os
        >>> from bitnet_go.convert._writer import write_safetensors_header
        >>> p = os.path.join(tempfile.mkdtemp(), "x.safetensors")
        >>> with open(p, "wb") as f:
        ...     _ = write_safetensors_header(f, [("w", "BF16", (2,), 4)], {})
        ...     _ = f.write(np.array([0x3F80, 0xC000], np.uint16).tobytes())
        >>> with Checkpoint.open(p) as ck:
        ...     to_float32(ck.array("w"), "BF16").tolist()
        [1.0, -2.0]
    """

    entries: dict[str, Entry]
    metadata: dict[str, str]
    config: dict[str, Any] | None
    root: Path
    _maps: dict[Path, mmap.mmap] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: PathLike) -> Checkpoint:
        files, config = find_files(path)
        entries: dict[str, Entry] = {}
        metadata: dict[str, str] = {}
        for f in files:
            es, meta = read_header(f)
            for name, e in es.items():
                if name in entries:
                    raise ValueError(f"tensor {name!r} is in both {entries[name].file} and {f}")
                entries[name] = e
            metadata.update(meta)
        p = Path(path)
        return cls(entries, metadata, config, p if p.is_dir() else p.parent)

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the maps (arrays still viewing them keep theirs alive)."""
        maps, self._maps = self._maps, {}
        for m in maps.values():
            try:
                m.close()
            except BufferError:  # an array still views it: it is unmapped when that array goes
                pass

    def _map(self, file: Path) -> mmap.mmap:
        m = self._maps.get(file)
        if m is None:
            with open(file, "rb") as f:
                m = self._maps[file] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return m

    def array(self, name: str) -> np.ndarray:
        """Tensor ``name`` as a read-only numpy view of the mapped file (no copy), in its stored dtype
        (BF16 as uint16 bits). Unaligned data is copied."""
        e = self.entries[name]
        m = self._map(e.file)
        dt = DTYPES[e.dtype]
        if e.begin % dt.alignment:
            a = np.frombuffer(m[e.begin : e.end], dtype=dt)
        else:
            a = np.frombuffer(m, dtype=dt, count=math.prod(e.shape), offset=e.begin)
        return a.reshape(e.shape)

    def release(self, name: str) -> None:
        """Tell the kernel that tensor ``name``'s pages are no longer needed, so that reading a
        checkpoint tensor by tensor keeps the resident memory to about one tensor."""
        e = self.entries[name]
        m = self._maps.get(e.file)
        if m is None or not hasattr(m, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        start = e.begin - e.begin % page
        if e.end > start:
            m.madvise(mmap.MADV_DONTNEED, start, e.end - start)


def to_float32(a: np.ndarray, dtype: str) -> np.ndarray:
    """A new C-contiguous float32 array of a tensor read in safetensors dtype ``dtype`` (BF16 exactly, widened
    in Go on the library's threads).

    Example:
        >>> to_float32(np.array([0x3F80], np.uint16), "BF16").tolist()
        [1.0]
    """
    if dtype == "BF16":
        return cast(np.ascontiguousarray(a), "bfloat16", "float32")
    return np.array(a, dtype=np.float32, order="C")


def to_float16(a: np.ndarray, dtype: str) -> np.ndarray:
    """A new C-contiguous float16 array of a tensor read in safetensors dtype ``dtype``, rounded as numpy's
    ``astype(np.float16)`` rounds its float32 value (BF16 and F32 in Go, on the library's threads).

    Example:
        >>> to_float16(np.array([0x3F80, 0x4049], np.uint16), "BF16").tolist()
        [1.0, 3.140625]
    """
    if dtype == "BF16":
        return cast(np.ascontiguousarray(a), "bfloat16", "float16")
    if a.dtype == np.float16:
        return np.array(a, order="C")
    return cast(to_float32(a, dtype), "float32", "float16")


@contextmanager
def opened(path: PathLike) -> Iterator[Checkpoint]:
    """``with opened(path) as ck``: :meth:`Checkpoint.open`, closed at the end.

    Example:
        >>> with opened("/nonexistent") as ck:
        ...     pass
        Traceback (most recent call last):
        FileNotFoundError: /nonexistent: no such file or directory
    """
    ck = Checkpoint.open(path)
    try:
        yield ck
    finally:
        ck.close()
