"""Loading the Go shared library and calling it.

Every exported function of the C ABI is declared once: the runtime ones in
``_SIGNATURES`` here, the others beside their one caller through
:func:`declare` (the ops in ``_core/ops.py``, the CUDA status in
``bitnet_go.cuda``, ``bng_diagnostics`` in ``bitnet_go.diagnostics``).
Exports are bound lazily: a library without one of them still loads, and
calling the missing export raises ``RuntimeError`` naming it (only
``bng_abi_version`` is required at load).
The library is loaded with :class:`ctypes.CDLL`, which releases the GIL for the
duration of each call, so kernels run in parallel with other Python threads.

The library is loaded at the first call that needs it, not at import:
loading starts the Go runtime, and a Go runtime does not survive ``fork()``
(its threads are gone in the child). A process that forks before its first
call (``import bitnet_go``, then a ``fork`` multiprocessing pool or torch
DataLoader workers) gives each child a runtime of its own; a child forked
after the parent loaded the library gets a ``RuntimeError`` at its first
call, never a hang (see :func:`handle`).

ABI conventions (see ``bindings/main.go``): pointers are passed as integers
(``_core.descriptor.address``), counts as int64, output buffers are allocated here,
and every function except the trivial getters returns a status (0 success,
1 ValueError, 2 TypeError, 3 MemoryError, 4 RuntimeError, 5 interrupted by
SIGINT) and writes its error message into the ``(errbuf, errcap)`` pair
passed as the last two arguments.

Example:
    >>> from bitnet_go._core import lib
    >>> lib.handle().bng_abi_version() == lib.ABI_VERSION
    True
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ABI_VERSION = 7
"""Must equal ``abiVersion`` in bindings/main.go."""

ENV_LIBRARY = "BITNET_GO_LIBRARY"
"""Environment variable naming a library file to load instead of the bundled one."""

_LIBNAMES = {"darwin": "libbitnet_go.dylib", "win32": "bitnet_go.dll"}
LIBNAME = _LIBNAMES.get(sys.platform, "libbitnet_go.so")

_i32, _i64, _p, _s = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p
_ERR = [_s, _i64]  # every status-returning function ends with (errbuf, errcap)

Signature = tuple[Any, list[Any], bool]
"""(restype, argtypes without the trailing error pair, returns a status?)"""

_SIGNATURES: dict[str, Signature] = {
    "bng_abi_version": (_i32, [], False),
    "bng_get_num_threads": (_i64, [], False),
    "bng_set_num_threads": (_i32, [_i64], True),
    "bng_cpu_features": (_i32, [_s, _i64], True),
}

_REQUIRED = "bng_abi_version"
"""The one export a library must have to load: it says which ABI the rest follows."""

_EXCEPTIONS: dict[int, type[Exception]] = {
    1: ValueError,
    2: TypeError,
    3: MemoryError,
    4: RuntimeError,
}

ERRCAP = 8192
_ERRCAP_ARG = ctypes.c_int64(ERRCAP)
"""ERRCAP as the error-pair argument every status-returning export ends with (a ctypes number:
correct with or without declared argument types)."""

# Exported names for feature modules' signature tables.
I32, I64, PTR, STR = _i32, _i64, _p, _s


def library_path() -> Path:
    """Return the path of the shared library that is (or will be) loaded.

    Example:
        >>> library_path().name.startswith(("libbitnet_go", "bitnet_go"))
        True
    """
    env = os.environ.get(ENV_LIBRARY)
    if env:  # absolute: ctypes takes a bare name ("./lib.so" becomes "lib.so") as one to search for
        return Path(env).expanduser().absolute()
    return Path(__file__).resolve().parent.parent / LIBNAME  # in the package directory, beside _core/


def _bind(handle: ctypes.CDLL, signatures: dict[str, Signature]) -> None:
    """Set the types of the exports ``handle`` has; a missing one is left for :func:`function` to report."""
    for name, (restype, argtypes, status) in signatures.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            if name == _REQUIRED:
                raise ImportError(
                    f"bitnet_go: {_describe_path()} has no export {name}: it is not this version's bitnet_go "
                    f"library; rebuild it (`make lib`) or reinstall the package"
                ) from None
            continue
        fn.restype = restype
        if status and argtypes and all(isinstance(t, type) and issubclass(t, ctypes._Pointer) for t in argtypes):
            # Pointers only (byref() or None from the callers, then the error buffer and a
            # c_int64): ctypes passes them as they are, and checking each against its declared
            # type cost 1-2 us a call, a tenth of a small layer's. Exports taking numbers keep
            # their types (a bare Python int would cross as a C int).
            fn.argtypes = None
        else:
            fn.argtypes = argtypes + (_ERR if status else [])


def declare(signatures: dict[str, Signature]) -> None:
    """Declare more exports (same form as ``_SIGNATURES``), once per name.

    Modules keep the signatures of the exports they call beside their code
    and declare them at import; they are bound when the library is loaded
    (at once if it already is). A name declared twice is a bug. An export
    the library lacks does not stop it loading: :func:`function` raises
    ``RuntimeError`` when it is called.

    Example:
        >>> declare({})
    """
    dup = set(signatures) & set(_SIGNATURES)
    if dup:
        raise RuntimeError(f"internal: C ABI functions declared twice: {sorted(dup)}")
    _SIGNATURES.update(signatures)
    if _state.handle is not None:
        _bind(_state.handle, signatures)


def function(name: str) -> Callable[..., int]:
    """The declared export ``name`` of the loaded library (loading it if needed).

    Raises ``RuntimeError`` naming the export and the C ABI version when the
    library has no such export (a library older or newer than this package).
    An export declared with pointer argument types only comes without them
    (see ``_bind``): its caller passes ctypes objects alone, ``ctypes.c_int64``
    for the error capacity too (a bare int would cross as a 32-bit C int;
    :func:`call` does this for its callers).

    Example:
        >>> function("bng_abi_version")() == ABI_VERSION
        True
    """
    h = handle()
    if name not in _SIGNATURES:
        raise RuntimeError(f"internal: C ABI function {name} is not declared")
    try:
        return getattr(h, name)
    except AttributeError:
        raise RuntimeError(
            f"bitnet_go: {_describe_path()} has no export {name} (C ABI version {ABI_VERSION}): the library "
            f"does not match this Python package; rebuild it (`make lib`) or reinstall the package"
        ) from None


def _describe_path() -> str:
    path = library_path()
    return f"{ENV_LIBRARY}={os.environ[ENV_LIBRARY]!r}" if os.environ.get(ENV_LIBRARY) else f"the library {path}"


_MAGICS = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def check_library_file() -> Path:
    """Check that the library file exists and looks like a shared library.

    Runs at import (cheap: no loading). ``ImportError`` names
    ``BITNET_GO_LIBRARY`` when that variable chose the file.

    Example:
        >>> check_library_file().is_file()
        True
    """
    path = library_path()
    what = _describe_path()
    if path.is_dir():
        raise ImportError(f"bitnet_go: {what} is a directory; it must name the shared library file")
    if not path.is_file():
        hint = (
            f"set {ENV_LIBRARY} to an existing library file, or unset it"
            if os.environ.get(ENV_LIBRARY)
            else "build it with `make lib` or reinstall the package (`pip install .` needs Go on PATH)"
        )
        raise ImportError(f"bitnet_go: {what} does not exist; {hint}")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ImportError(f"bitnet_go: {what} cannot be read: {e}") from None
    if not magic.startswith(_MAGICS):
        raise ImportError(f"bitnet_go: {what} is not a shared library (no ELF, Mach-O or PE header)")
    return path


class _State:
    """The loaded library and the process that loaded it."""

    handle: ctypes.CDLL | None = None
    pid: int = 0
    lock = threading.Lock()


_state = _State()


def handle() -> ctypes.CDLL:
    """The loaded library, loading it at the first call.

    Raises ``RuntimeError`` in a process forked after its parent loaded the
    library (the Go runtime's threads do not exist in the child: calling into
    it could hang), and ``ImportError`` when the library cannot be loaded.

    Example:
        >>> handle().bng_abi_version() == ABI_VERSION
        True
    """
    h = _state.handle
    if h is not None and _state.pid == os.getpid():
        return h
    return _load()


def _load() -> ctypes.CDLL:
    with _state.lock:
        if _state.handle is not None:
            if _state.pid != os.getpid():
                raise RuntimeError(_forked_message(_state.pid))
            return _state.handle
        path = check_library_file()
        try:
            h = ctypes.CDLL(str(path))
        except OSError as e:
            raise ImportError(f"bitnet_go: {_describe_path()} cannot be loaded: {e}") from None
        _bind(h, _SIGNATURES)
        got = h.bng_abi_version()
        if got != ABI_VERSION:
            raise ImportError(
                f"bitnet_go: {_describe_path()} has C ABI version {got}, this Python package needs "
                f"{ABI_VERSION}; rebuild the library (`make lib`)"
            )
        _state.handle, _state.pid = h, os.getpid()
    _warn_settings()
    return h


def _forked_message(parent: int) -> str:
    return (
        f"bitnet_go: this process (pid {os.getpid()}) was forked from process {parent} after that process "
        f"loaded bitnet_go's Go library (its first bitnet_go call). A Go runtime does not survive fork(): its "
        f"threads do not exist in the child, and calling into it can hang. Start worker processes with the "
        f"'spawn' or 'forkserver' method (multiprocessing.get_context('spawn'), "
        f"torch DataLoader(..., multiprocessing_context='spawn')), or make the first bitnet_go call in the "
        f"children only (importing bitnet_go does not load the library)."
    )


def features() -> dict[str, Any]:
    """The Go side's report (``bng_cpu_features``): what ``bitnet_go.cpu_features()`` returns.

    Its ``settings`` say how the numeric environment variables were read:
    ``name``, ``value`` (as set, ``""`` when unset), ``in_effect`` and, for a
    refused value, ``problem``.

    Example:
        >>> sorted(s["name"] for s in features()["settings"])
        ['BITNET_GO_NUM_THREADS', 'BITNET_GO_WEIGHT_CACHE_MB']
    """
    buf = ctypes.create_string_buffer(8192)
    call("bng_cpu_features", buf, len(buf))
    return dict(json.loads(buf.value.decode()))


def _warn_settings() -> None:
    """Warn once per process (at load) about each refused environment value: the numeric ones
    (``settings``), and the kernel family names of ``BITNET_GO_DISABLE`` and the
    ``BITNET_GO_DISPATCH`` mode that the Go side ignored."""
    f = features()
    problems = [s["problem"] for s in f["settings"] if s.get("problem")]
    if f.get("disable_ignored"):
        problems.append(
            f"BITNET_GO_DISABLE: {', '.join(map(repr, f['disable_ignored']))} ignored (not a kernel family: "
            f"give a comma list of avx512vnni, avx512, avx2, or all)"
        )
    if f.get("dispatch_ignored"):
        problems.append(
            f"BITNET_GO_DISPATCH: {f['dispatch_ignored']!r} ignored (give measured or best-first); "
            f"{f['dispatch']!r} in effect"
        )
    for problem in problems:
        warnings.warn(f"bitnet_go: {problem}", RuntimeWarning, stacklevel=_outside_package())


_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


def _outside_package() -> int:
    """The ``stacklevel`` of :func:`warnings.warn`, called from :func:`_warn_settings`, that names the
    first frame outside the bitnet_go package: the user's line that made the first call."""
    frame, level = sys._getframe(2), 2  # _warn_settings' caller is level 2
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def __getattr__(name: str) -> ctypes.CDLL:
    if name == "lib":  # the handle, as older code reads it
        return handle()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_errbuf = threading.local()

_bound: dict[str, Callable[..., int]] = {}
"""The exports :func:`call` has looked up in this process (``os.getpid()`` is a system call: a
forked child empties this at the fork instead, so its first call takes :func:`function`'s way
and gets the fork's ``RuntimeError``)."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_bound.clear)

STATUS_INTERRUPTED = 5
"""The status of a call that SIGINT stopped early (its outputs are incomplete)."""


def call(name: str, *args: object) -> None:
    """Call a status-returning export and raise the mapped exception on failure.

    A call that SIGINT interrupted (status 5) has let Python's SIGINT handler
    run by the time it returns here: the default handler raises
    ``KeyboardInterrupt`` (on the main thread) at the next bytecode. If it
    does not (another thread, a handler that does not raise), the call is
    made again, so the result is always complete.

    Example:
        >>> call("bng_set_num_threads", get_num_threads_raw())
    """
    buf = _buffer()
    call_prepared(_export(name), (*args, buf, _ERRCAP_ARG), buf)


def _buffer() -> ctypes.Array[ctypes.c_char]:
    """This thread's error buffer: one per thread, as calls release the GIL and may overlap."""
    buf = getattr(_errbuf, "buf", None)
    if buf is None:
        buf = _errbuf.buf = ctypes.create_string_buffer(ERRCAP)
    return buf


def _export(name: str) -> Callable[..., int]:
    """The export ``name``, looked up once per process (:data:`_bound`)."""
    fn = _bound.get(name)
    if fn is None:  # not loaded yet, forked, or a missing export: the slow path says which
        fn = _bound[name] = function(name)
    return fn


def prepared(name: str, *args: object) -> tuple[Callable[..., int], tuple[object, ...], ctypes.Array[ctypes.c_char]]:
    """What :func:`call_prepared` takes for the export ``name`` on this thread: the function, its
    arguments followed by this thread's error buffer and capacity, and that buffer; for a caller
    that keeps them and calls again and again with the same argument objects (descriptors whose
    fields it re-points between calls). Valid in this process only: :func:`still_bound` says
    whether it still is (after a fork it is not).

    Example:
        >>> fn, args, buf = prepared("bng_set_num_threads", get_num_threads_raw())
        >>> call_prepared(fn, args, buf)
    """
    buf = _buffer()
    return _export(name), (*args, buf, _ERRCAP_ARG), buf


def still_bound(name: str, fn: Callable[..., int]) -> bool:
    """Whether ``fn`` (from :func:`prepared`) is still this process's export ``name``: False in a
    forked child (whose calls must take :func:`call`'s way, which raises), or before any call."""
    return _bound.get(name) is fn


def call_prepared(fn: Callable[..., int], args: tuple[object, ...], buf: ctypes.Array[ctypes.c_char]) -> None:
    """:func:`call` with what :func:`prepared` returned: the same retries and exceptions, without
    looking anything up (the prepared arguments are one thread's: its error buffer)."""
    status = fn(*args)
    while status == STATUS_INTERRUPTED:
        status = fn(*args)
    if status:
        exc = _EXCEPTIONS.get(status, RuntimeError)
        raise exc(buf.value.decode("utf-8", "replace"))


def get_num_threads_raw() -> int:
    """Return the Go side's thread setting (no checks)."""
    return int(handle().bng_get_num_threads())


def ptr(a: np.ndarray) -> int:
    """Address of a C-contiguous array's data, for a ``c_void_p`` argument."""
    assert a.flags.c_contiguous, "internal: non-contiguous array passed to Go"
    return int(a.ctypes.data)


check_library_file()  # at import: a missing or wrong file is an ImportError at once
