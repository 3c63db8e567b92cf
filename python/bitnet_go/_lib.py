"""Loading the Go shared library and calling it.

Every exported function of the C ABI is declared once: the core ones in
``_SIGNATURES`` here, feature modules' through :func:`declare`.
The library is loaded with :class:`ctypes.CDLL`, which releases the GIL for the
duration of each call, so kernels run in parallel with other Python threads.

ABI conventions (see ``bindings/main.go``): pointers are passed as integers
(``ndarray.ctypes.data``), counts as int64, output buffers are allocated here,
and every function except the trivial getters returns a status (0 success,
1 ValueError, 2 TypeError, 3 MemoryError, 4 RuntimeError) and writes its error
message into the ``(errbuf, errcap)`` pair passed as the last two arguments.

Example:
    >>> from bitnet_go import _lib
    >>> _lib.lib.bng_abi_version() == _lib.ABI_VERSION
    True
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

ABI_VERSION = 2
"""Must equal ``abiVersion`` in bindings/main.go."""

ENV_LIBRARY = "BITNET_GO_LIBRARY"
"""Environment variable naming a library file to load instead of the bundled one."""

_LIBNAMES = {"darwin": "libbitnet_go.dylib", "win32": "bitnet_go.dll"}
LIBNAME = _LIBNAMES.get(sys.platform, "libbitnet_go.so")

_i32, _i64, _p, _s = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p
_ERR = [_s, _i64]  # every status-returning function ends with (errbuf, errcap)

# name -> (restype, argtypes without the trailing error pair, returns status?)
_SIGNATURES: dict[str, tuple[Any, list[Any], bool]] = {
    "bng_abi_version": (_i32, [], False),
    "bng_get_num_threads": (_i64, [], False),
    "bng_set_num_threads": (_i32, [_i64], True),
    "bng_cpu_features": (_i32, [_s, _i64], True),
    "bng_peak": (_i32, [_s, _i64], True),
    # x, n, block_size, method, check_finite, packed, packed_len, scales, n_scales
    "bng_quantize_i2s": (_i32, [_p, _i64, _i64, _i32, _i32, _p, _i64, _p, _i64], True),
    # qtype, n, rows, out(int64*)
    "bng_packed_len": (_i32, [_i32, _i64, _i64, _p], True),
    # qtype, packed, packed_len, rows, out(int8), n
    "bng_unpack": (_i32, [_i32, _p, _i64, _i64, _p, _i64], True),
    # qtype, values(int8), n, rows, packed, packed_len
    "bng_pack": (_i32, [_i32, _p, _i64, _i64, _p, _i64], True),
    # qtype, packed, packed_len, rows, block_size, scales, n_scales, out(float32), n
    "bng_dequantize": (_i32, [_i32, _p, _i64, _i64, _i64, _p, _i64, _p, _i64], True),
}

_EXCEPTIONS: dict[int, type[Exception]] = {
    1: ValueError,
    2: TypeError,
    3: MemoryError,
    4: RuntimeError,
}

ERRCAP = 8192

# Exported names for feature modules' signature tables.
I32, I64, PTR, STR = _i32, _i64, _p, _s


def library_path() -> Path:
    """Return the path of the shared library that is (or will be) loaded.

    Example:
        >>> library_path().name.startswith(("libbitnet_go", "bitnet_go"))
        True
    """
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / LIBNAME


def _bind(handle: ctypes.CDLL, signatures: dict[str, tuple[Any, list[Any], bool]]) -> None:
    for name, (restype, argtypes, status) in signatures.items():
        fn = getattr(handle, name)
        fn.restype = restype
        fn.argtypes = argtypes + (_ERR if status else [])


def declare(signatures: dict[str, tuple[Any, list[Any], bool]]) -> None:
    """Declare more exports (same form as ``_SIGNATURES``), once per name.

    Feature modules (conv, cuda, ...) keep their signatures beside their code
    and declare them at import; a name declared twice is a bug.

    Example:
        >>> declare({})
    """
    dup = set(signatures) & set(_SIGNATURES)
    if dup:
        raise RuntimeError(f"internal: C ABI functions declared twice: {sorted(dup)}")
    _bind(lib, signatures)
    _SIGNATURES.update(signatures)


def _load() -> ctypes.CDLL:
    path = library_path()
    if not path.is_file():
        raise ImportError(
            f"bitnet_go: the Go library {path} is missing; build it with `make lib` "
            f"or reinstall the package (`pip install .` needs Go on PATH)"
        )
    handle = ctypes.CDLL(str(path))
    _bind(handle, _SIGNATURES)
    got = handle.bng_abi_version()
    if got != ABI_VERSION:
        raise ImportError(
            f"bitnet_go: {path} has C ABI version {got}, this Python package needs "
            f"{ABI_VERSION}; rebuild the library (`make lib`)"
        )
    return handle


lib = _load()


_errbuf = threading.local()


def call(name: str, *args: Any) -> None:
    """Call a status-returning export and raise the mapped exception on failure.

    Example:
        >>> call("bng_set_num_threads", get_num_threads_raw())
    """
    buf = getattr(_errbuf, "buf", None)
    if buf is None:  # one per thread: calls release the GIL and may overlap
        buf = _errbuf.buf = ctypes.create_string_buffer(ERRCAP)
    status = getattr(lib, name)(*args, buf, ERRCAP)
    if status:
        exc = _EXCEPTIONS.get(status, RuntimeError)
        raise exc(buf.value.decode("utf-8", "replace"))


def get_num_threads_raw() -> int:
    """Return the Go side's thread setting (no checks)."""
    return int(lib.bng_get_num_threads())


def ptr(a: np.ndarray) -> int:
    """Address of a C-contiguous array's data, for a ``c_void_p`` argument."""
    assert a.flags.c_contiguous, "internal: non-contiguous array passed to Go"
    return int(a.ctypes.data)
