"""Writing outputs: a temporary file renamed into place, and the safetensors header."""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ._reader import PathLike

HEADER_ALIGN = 8
"""The safetensors header is padded with spaces to a multiple of 8 bytes, so that the data starts aligned."""


def write_safetensors_header(
    f: IO[bytes], tensors: Sequence[tuple[str, str, tuple[int, ...], int]], metadata: dict[str, str]
) -> int:
    """Write the length and JSON header for ``tensors`` (``(name, dtype, shape, nbytes)``, in the order
    their data will follow, with no gaps) and return the header's size (8 + JSON).

    Example:
        >>> import io
        >>> f = io.BytesIO()
        >>> write_safetensors_header(f, [("a", "U8", (3,), 3), ("b", "F32", (1,), 4)], {"k": "v"}) % 8
        0
    """
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, dtype, shape, nbytes in tensors:
        if name in header:
            raise ValueError(f"tensor {name!r} is written twice")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % HEADER_ALIGN)
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    return 8 + len(raw)


@contextmanager
def atomic_output(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (a name not yet taken, in a new private directory there);
    rename it to ``path`` when the block ends without an exception, delete it otherwise (Ctrl-C
    included), so ``path`` is either the complete new file or what it was before.

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> with atomic_output(os.path.join(d, "out.bin")) as tmp:
        ...     _ = tmp.write_bytes(b"x")
        >>> os.listdir(d)
        ['out.bin']
    """
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(f"{out}: the output is a directory; give a file name")
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out.parent}: the output's directory does not exist")
    # A new file in a private directory beside out (not an empty file made first and opened again with
    # O_TRUNC: ext4 then flushes the whole file when it is closed, ~0.1 s for 250 MB), with the mode a plain
    # open() gives.
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    tmp_path = tmp_dir / out.name
    try:
        yield tmp_path
        if not tmp_path.exists():
            tmp_path.touch()
        old = _hold(out)
        os.replace(tmp_path, out)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    if old is not None:  # the replaced file's pages are freed at its last close: off the caller's time
        threading.Thread(target=os.close, args=(old,), name="bitnet_go-free-replaced", daemon=True).start()


def _hold(path: Path) -> int | None:
    """A read-only descriptor of the file ``path`` names now (None if none can be opened), so that replacing
    it does not free its pages (for a large file, tens of milliseconds) until the descriptor is closed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device: nothing to hold
        os.close(fd)
        return None
    return fd
