"""Shared benchmark helpers: timing, tables, machine facts, JSON output, and the command line's
value parsers (``parse_*``, with :func:`cli_type` turning one into an argparse ``type=``)."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:  # the bench's optional dependency, for annotations only
    import torch


MIN_TIME = 0.0
"""Seconds each ``timeit`` call keeps timing at least when its caller gives no ``min_time``.

Set by ``bench --min-time`` for every suite (0 in library use: exactly ``repeat`` calls).
"""

MAX_CALLS = 1000
"""The most calls one ``timeit`` makes to fill its minimum time."""


PAUSE_S = 0.02
"""Pause before every block of timed calls (:func:`timeit`): a runtime's threads that spin on after
its calls (OpenMP's, ours) go to sleep in it instead of taking the CPUs of whatever is timed next,
and no runtime's settings are touched (torch's OpenMP runs with its defaults). After PyPI torch's
GNU OpenMP ran on 2 threads, our next 2-thread call (after its warm-up call) took 0.38 ms with no
pause, 0.22 ms after 0.5 ms and 0.09-0.12 ms, as alone, after 1 ms or more (Zen 4). 20 ms leaves
room for slower spin loops (a ``pause`` instruction takes about twice as long on recent Xeons); an
Intel OpenMP runtime spins 200 ms by default (``KMP_BLOCKTIME``), which this pause does not cover."""


def timeit(
    fn: Callable[[], object], *, repeat: int = 7, warmup: int = 1, min_time: float | None = None, pause: float = PAUSE_S
) -> list[float]:
    """After a pause of ``pause`` seconds (see :data:`PAUSE_S`), call ``fn`` ``warmup`` times, then
    time ``repeat`` calls (seconds each).

    With ``min_time`` > 0 (default: :data:`MIN_TIME`, which ``bench --min-time``
    sets), keeps timing past ``repeat`` calls until that many seconds have been
    spent (for short calls on a noisy machine), at most :data:`MAX_CALLS` calls.

    Example:
        >>> ts = timeit(lambda: sum(range(100)), repeat=3, min_time=0)
        >>> len(ts)
        3
    """
    if min_time is None:
        min_time = MIN_TIME
    if pause > 0:
        time.sleep(pause)
    for _ in range(warmup):
        fn()
    out: list[float] = []
    start = time.perf_counter()
    while len(out) < repeat or (min_time > 0 and time.perf_counter() - start < min_time and len(out) < MAX_CALLS):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def alternate(
    fns: dict[str, Callable[[], object]], *, repeat: int, rounds: int, min_time: float | None = None
) -> dict[str, list[float]]:
    """Timings (seconds) of each function: ``rounds`` rounds of one :func:`timeit` block each, in turn.

    ``repeat`` timed calls per function in all, split over the rounds (the first ``repeat % rounds``
    rounds take one more; never more rounds than calls), each block after one warm-up call and
    lasting at least ``min_time`` (default :data:`MIN_TIME` / rounds, so that ``bench --min-time``
    still bounds a whole measurement). Libraries timed side by side on a shared machine see the same
    noisy periods this way (a neighbour's burst slows one round of each rather than all of one
    library's calls).

    Example:
        >>> ts = alternate({"a": lambda: None, "b": lambda: None}, repeat=7, rounds=3, min_time=0)
        >>> [len(v) for v in ts.values()]
        [7, 7]
    """
    rounds = max(1, min(rounds, repeat))
    if min_time is None:
        min_time = MIN_TIME / rounds
    out: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        n = repeat // rounds + (1 if r < repeat % rounds else 0)
        for name, fn in fns.items():
            out[name] += timeit(fn, repeat=n, warmup=1, min_time=min_time)
    return out


SETTLE_BYTES = 24 << 20
"""Size of the buffer :func:`settle_allocator` allocates and frees (below glibc's 32 MiB cap)."""


def settle_allocator() -> None:
    """Put glibc's malloc into the state of a process that has freed a large array.

    glibc serves large allocations with fresh ``mmap`` pages until the first
    such block is freed; from then on blocks up to that size come from the
    heap and are reused (its "dynamic mmap threshold"). torch's temporaries
    (4 MB for 1M floats) fall either side of that line depending on what the
    process freed before, and whole runs of the PyTorch expression then take
    8-12 ms or 1.2-1.6 ms for 1M floats. The bench frees one 24 MiB buffer
    before it times anything, so every run starts in the steady state of a
    long-running process. This is process history, not a setting (no
    environment variable or ``mallopt``), and it makes torch faster, not us.

    Example:
        >>> settle_allocator()
    """
    buf = np.ones(SETTLE_BYTES, np.uint8)
    del buf


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of the positive finite ``values`` (NaN when there are none): the
    benches' ratio summaries.

    Example:
        >>> round(geomean([2.0, 8.0, float("nan")]), 6)
        4.0
    """
    v = [x for x in values if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")


def median(ts: Sequence[float]) -> float:
    """Median of a list of timings.

    Example:
        >>> median([3.0, 1.0, 2.0])
        2.0
    """
    return float(statistics.median(ts))


NO_TORCH = "bench: torch is not installed; PyTorch columns are left empty (pip install 'bitnet_go[bench]')"
"""What :func:`torch_or_none` prints by default when torch is missing."""


def torch_or_none(missing: str = NO_TORCH) -> ModuleType | None:
    """Import torch if installed (``pip install bitnet_go[bench]``), else print ``missing`` and return None.

    Example:
        >>> torch_or_none() is None or hasattr(torch_or_none(), "tensor")
        True
    """
    # torch runs with its own settings: its OpenMP threads spin on after each
    # parallel op, and every timeit block starts after PAUSE_S for them to sleep.
    try:
        import torch
    except ImportError:
        print(missing)
        return None
    return torch


def torch_quantize(
    torch: ModuleType, x: torch.Tensor, block_size: int | None, method: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The PyTorch expression of quantize_i2s on x's device (values and scales, no packing).

    Example:
        >>> import torch
        >>> q, s = torch_quantize(torch, torch.tensor([2.0, -0.1, -3.0]), None, "absmean")
        >>> [int(v) for v in q]
        [1, 0, -1]
    """
    n = x.numel()
    bs = n if block_size is None or block_size >= n else block_size
    pad = (-n) % bs
    flat = x.reshape(-1)
    blocks = torch.nn.functional.pad(flat, (0, pad)).reshape(-1, bs)
    a = blocks.abs()
    if method == "absmean":
        counts = torch.full((blocks.shape[0],), float(bs), dtype=torch.float64, device=x.device)
        if pad:
            counts[-1] = bs - pad
        scale = (a.double().sum(1) / counts).float().clamp(min=1e-5)
        q = torch.round(blocks / scale[:, None]).clamp(-1, 1)
    else:
        scale = a.amax(1).clamp(min=1e-8)
        r = blocks / scale[:, None]
        q = (r > 0.5).float() - (r < -0.5).float()
    return q.reshape(-1)[:n], scale


def fmt(v: object, spec: str) -> str:
    """Format a cell; None prints as ``-``.

    Example:
        >>> fmt(None, ".2f"), fmt(1.234, ".2f")
        ('-', '1.23')
    """
    if v is None:
        return "-"
    return format(v, spec)


def spread_text(ts: Sequence[float]) -> str:
    """The spread of timings (seconds) as ``"min-max"`` in ms, the ``range`` columns' text.

    Example:
        >>> spread_text([0.0012, 0.0010, 0.0015])
        '1.00-1.50'
    """
    lo, hi = min(ts) * 1e3, max(ts) * 1e3
    d = 2 if hi >= 0.1 else 3
    return f"{lo:.{d}f}-{hi:.{d}f}"


def put_timings(row: dict[str, Any], key: str, ts: Sequence[float]) -> None:
    """Timings ``ts`` (seconds) into ``row``: ``{key}_ms`` (the median), ``{key}_min_ms``,
    ``{key}_max_ms`` and ``{key}_spread`` (the ``range`` column's text, :func:`spread_text`).

    Example:
        >>> row = {}
        >>> put_timings(row, "ours", [0.002, 0.001, 0.003])
        >>> row
        {'ours_ms': 2.0, 'ours_min_ms': 1.0, 'ours_max_ms': 3.0, 'ours_spread': '1.00-3.00'}
    """
    row[f"{key}_ms"] = median(ts) * 1e3
    row[f"{key}_min_ms"], row[f"{key}_max_ms"] = min(ts) * 1e3, max(ts) * 1e3
    row[f"{key}_spread"] = spread_text(ts)


def time_into(row: dict[str, Any], key: str, fn: Callable[[], object], repeat: int) -> None:
    """:func:`timeit` ``fn`` (``repeat`` calls) into ``row`` by :func:`put_timings`.

    Example:
        >>> row = {}
        >>> time_into(row, "noop", lambda: None, 3)
        >>> sorted(row)
        ['noop_max_ms', 'noop_min_ms', 'noop_ms', 'noop_spread']
    """
    put_timings(row, key, timeit(fn, repeat=repeat))


Column = tuple[str, ...]
"""A table column: (row key, heading, format spec) and optionally the heading's explanation for the legend."""


def print_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[Column], title: str = "", notes: Sequence[str] = ()
) -> None:
    """Print rows as an aligned table; ``columns`` are (key, header, format spec[, explanation]).

    The explanations and ``notes`` are printed under the table as its legend.

    Example:
        >>> print_table([{"a": 1.0}], [("a", "A", ".1f", "a number")])
        A
        ---
        1.0
          A  a number
    """
    cells = [[fmt(r.get(c[0]), c[2]) for c in columns] for r in rows]
    widths = [max([len(c[1])] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    if title:
        print(f"\n{title}")
    head = "  ".join(c[1].rjust(w) if i else c[1].ljust(w) for i, (c, w) in enumerate(zip(columns, widths)))
    print(head.rstrip())
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(c, widths))).rstrip())
    explained = [(c[1], c[3]) for c in columns if len(c) > 3 and c[3]]
    if explained:
        hw = max(len(h) for h, _ in explained)
        for h, e in explained:
            print(f"  {h.ljust(hw)}  {e}")
    for n in notes:
        print(f"  {n}")
    sys.stdout.flush()


def progress(text: str, *, end: bool = False) -> None:
    """Show what the bench is doing now on stderr: in place on a terminal, a line each otherwise.

    ``end=True`` clears the line on a terminal (nothing elsewhere).

    Example:
        >>> progress("[1/2] 1M thr=1")  # on stderr
    """
    err = sys.stderr
    tty = hasattr(err, "isatty") and err.isatty()
    if end:
        if tty:
            err.write("\r\033[K")
            err.flush()
        return
    if tty:
        err.write("\r\033[K" + text[: max(20, _term_width() - 1)])
    else:
        err.write(text + "\n")
    err.flush()


def _term_width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


_UNFINISHED: list[Table] = []
"""Tables made since :func:`forget_tables` and not printed yet (see :func:`unfinished_tables`)."""


def forget_tables() -> None:
    """Forget the unfinished tables: ``bench`` calls this before each suite.

    Example:
        >>> forget_tables(); unfinished_tables()
        []
    """
    _UNFINISHED.clear()


def unfinished_tables() -> list[Table]:
    """The tables made since :func:`forget_tables` whose ``done`` was not called: a suite that
    stopped early (Ctrl-C, an error), whose rows so far ``bench`` keeps.

    Example:
        >>> forget_tables()
        >>> t = Table("T", [("a", "A", "d")])
        >>> unfinished_tables() == [t]
        True
    """
    return list(_UNFINISHED)


class Table:
    """A suite's rows: a progress line (stderr) per measurement, the table once at the end, with its legend.

    ``columns`` are (key, heading, format spec[, explanation]); ``total`` is the number of
    measurements (rows) the suite will make, for ``[k/total]``; ``notes`` are printed
    under the legend. Until ``done``, the table is one of :func:`unfinished_tables`.

    Example:
        >>> t = Table("T", [("a", "A", ".1f", "a number")], total=1)
        >>> t.start("a=1")  # "[1/1] a=1 ..." on stderr
        >>> t.add({"a": 1.0})
        >>> rows = t.done()
        <BLANKLINE>
        T
        A
        ---
        1.0
          A  a number
        >>> len(rows)
        1
    """

    def __init__(
        self, title: str, columns: Sequence[Column], *, total: int | None = None, notes: Sequence[str] = ()
    ) -> None:
        self.title = title
        self.columns = columns
        self.total = total
        self.notes = list(notes)
        self.rows: list[dict[str, Any]] = []
        self._started = False
        self._t0 = time.perf_counter()
        _UNFINISHED.append(self)

    def _prefix(self) -> str:
        k = len(self.rows) + 1
        return f"[{k}/{self.total}]" if self.total else f"[{k}]"

    def start(self, label: str) -> None:
        """Say on stderr which measurement starts now (``[3/20] label ...``)."""
        self._started = True
        progress(f"{self._prefix()} {label} ...  ({time.perf_counter() - self._t0:.0f} s so far)")

    def add(self, row: dict[str, Any]) -> None:
        """Keep ``row`` (a progress line from its leading label columns if ``start`` was not called)."""
        if not self._started:
            label = " ".join(f"{c[1]}={fmt(row.get(c[0]), c[2])}" for c in self.columns[:4] if c[2] in ("s", "d", ""))
            progress(f"{self._prefix()} {label}  ({time.perf_counter() - self._t0:.0f} s so far)")
        self._started = False
        self.rows.append(row)

    def done(self) -> list[dict[str, Any]]:
        """Print the whole table and its legend once; returns the rows."""
        if self in _UNFINISHED:
            _UNFINISHED.remove(self)
        progress("", end=True)
        print_table(self.rows, self.columns, title=self.title, notes=self.notes)
        return self.rows


@contextmanager
def engine(torch: ModuleType | None, name: str) -> Iterator[str | None]:
    """torch's quantized engine set to ``name`` inside (if supported), restored on the way out.

    Example:
        >>> with engine(None, "fbgemm") as used:
        ...     print(used)
        None
    """
    if torch is None:
        yield None
        return
    old = torch.backends.quantized.engine
    use = name if name in torch.backends.quantized.supported_engines else old
    torch.backends.quantized.engine = use
    try:
        yield use
    finally:
        torch.backends.quantized.engine = old


@contextmanager
def restored_threads(torch: ModuleType | None) -> Iterator[None]:
    """Thread counts set inside (bitnet_go's, and torch's when given) are undone on the way out.

    Example:
        >>> import bitnet_go
        >>> n = bitnet_go.get_num_threads()
        >>> with restored_threads(None):
        ...     bitnet_go.set_num_threads(1)
        >>> bitnet_go.get_num_threads() == n
        True
    """
    import bitnet_go

    old = bitnet_go.get_num_threads()
    old_torch = torch.get_num_threads() if torch else None
    try:
        yield
    finally:
        bitnet_go.set_num_threads(old)
        if torch:
            torch.set_num_threads(old_torch)


def machine() -> dict[str, Any]:
    """Facts about this machine and build, recorded with every benchmark.

    Example:
        >>> "cpu_count" in machine()
        True
    """
    import numpy as np

    import bitnet_go

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "bitnet_go": bitnet_go.__version__,
        "cpu_count": os.cpu_count(),
        "cpu": bitnet_go.cpu_features(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    return info


def write_json(
    path: str | os.PathLike[str],
    suites: dict[str, list[dict[str, Any]]],
    unfinished: dict[str, Any] | None = None,
) -> None:
    """Write raw results with machine facts to ``path``: ``suites`` (name -> rows) and, when a
    suite stopped early, ``unfinished`` (its name, why, and the rows it had measured).

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "b.json")
        >>> write_json(p, {"quantize": []})
        bench: wrote ...b.json
    """
    doc: dict[str, Any] = {"machine": machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "suites": suites}
    if unfinished is not None:
        doc["unfinished"] = unfinished
    Path(path).write_text(json.dumps(doc, indent=2, default=str))
    print(f"bench: wrote {path}")


# ------------------------------------------------------------------ command-line values
#
# One parser per kind of value. Each raises ValueError with a one-line message naming the
# bad value; cli_type turns it into an argparse ``type=``, so that argparse refuses the
# option by name (exit status 2) before anything runs. The suites parse the same text
# again with the same function when they run.

MAX_THREADS = 1024
"""The most threads ``--threads`` takes: :func:`bitnet_go.set_num_threads`'s bound
(``cpu_features()["max_threads"]``)."""

MAX_ELEMENTS = 1 << 30
"""The largest element count a size or shape option takes: 1G elements, 4 GiB of float32
before any copy a benchmark makes (``--sizes 100G`` would ask for 400 GiB)."""

MAX_BATCH = 1 << 16
"""The largest batch size a batch option takes."""

_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

_T = TypeVar("_T")


def size_text(n: int) -> str:
    """``n`` with the largest K/M/G suffix that divides it: how the size options write sizes.

    Example:
        >>> size_text(1 << 30), size_text(3 << 20), size_text(1000)
        ('1G', '3M', '1000')
    """
    for suffix, mult in reversed(_SUFFIX.items()):
        if n and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def _values(text: str) -> list[str]:
    """The comma-separated values of ``text``, stripped, empty ones skipped; at least one."""
    out = [t.strip() for t in text.split(",") if t.strip()]
    if not out:
        raise ValueError(f"no value given ({text!r})")
    return out


def _check_range(v: int, tok: str, minimum: int, maximum: int | None, unit: str = "") -> int:
    if v < minimum or (maximum is not None and v > maximum):
        hi = "" if maximum is None else f" to {size_text(maximum) if unit else maximum}"
        want = f"{minimum}{hi}" if maximum is not None else f"at least {minimum}"
        raise ValueError(f"{tok!r} is out of range: want {want}{' ' + unit if unit else ''}")
    return v


def parse_int(text: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """One whole number (``int()``'s syntax) in [minimum, maximum].

    Example:
        >>> parse_int(" 3"), parse_int("0", minimum=0)
        (3, 0)
        >>> parse_int("0")
        Traceback (most recent call last):
        ValueError: '0' is out of range: want at least 1
    """
    tok = text.strip()
    try:
        v = int(tok)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    return _check_range(v, tok, minimum, maximum)


def parse_int_list(s: str, *, minimum: int = 1, maximum: int | None = None) -> list[int]:
    """Parse ``"1,2,4"`` into ``[1, 2, 4]``: whole numbers in [minimum, maximum], empty values skipped.

    Raises ValueError naming the first bad value, or when there is none.

    Example:
        >>> parse_int_list("1, 2")
        [1, 2]
        >>> parse_int_list("1,abc")
        Traceback (most recent call last):
        ValueError: 'abc' is not a whole number
    """
    return [parse_int(tok, minimum=minimum, maximum=maximum) for tok in _values(s)]


def parse_threads(s: str) -> list[int]:
    """Parse ``--threads``: thread counts from 1 to :data:`MAX_THREADS`.

    Example:
        >>> parse_threads("1,2")
        [1, 2]
        >>> parse_threads("0")
        Traceback (most recent call last):
        ValueError: '0' is out of range: want 1 to 1024
    """
    return parse_int_list(s, maximum=MAX_THREADS)


def parse_batches(s: str) -> list[int]:
    """Parse a batch-size list (``--linear-batches``, ``--conv-batches``): 1 to :data:`MAX_BATCH` each.

    Example:
        >>> parse_batches("1,8,64")
        [1, 8, 64]
    """
    return parse_int_list(s, maximum=MAX_BATCH)


def _size(tok: str, minimum: int, maximum: int | None, unit: str) -> int:
    t = tok.strip().upper()
    mult = _SUFFIX.get(t[-1:], 1)
    try:
        v = int(t[:-1] if mult > 1 else t) * mult
    except ValueError:
        raise ValueError(
            f"{tok!r} is not a size: want a whole number with an optional K, M or G (1024, 4K, 16M)"
        ) from None
    return _check_range(v, tok, minimum, maximum, unit)


def parse_sizes(s: str, *, minimum: int = 1, maximum: int | None = MAX_ELEMENTS, unit: str = "elements") -> list[int]:
    """Parse ``"1M,16M,1000"`` into counts (K/M/G are powers of 1024) in [minimum, maximum].

    Empty values are skipped; raises ValueError naming the first bad value, or when there is none.

    Example:
        >>> parse_sizes("1M,3")
        [1048576, 3]
        >>> parse_sizes("100G")
        Traceback (most recent call last):
        ValueError: '100G' is out of range: want 1 to 1G elements
    """
    return [_size(tok, minimum, maximum, unit) for tok in _values(s)]


def parse_size(s: str, *, minimum: int = 1, maximum: int | None = MAX_ELEMENTS, unit: str = "elements") -> int:
    """Parse one size (``--quant-obs-size``, ``--families-size``, ...) as :func:`parse_sizes` does.

    Example:
        >>> parse_size("4K")
        4096
        >>> parse_size("1M,4M")
        Traceback (most recent call last):
        ValueError: one size wanted, got 2 ('1M,4M')
    """
    vals = _values(s)
    if len(vals) != 1:
        raise ValueError(f"one size wanted, got {len(vals)} ({s!r})")
    return _size(vals[0], minimum, maximum, unit)


def parse_shapes(s: str) -> list[tuple[int, int]]:
    """Parse ``"4096x4096,2560x6912"`` into ``[(rows, k), ...]``, each at most :data:`MAX_ELEMENTS` in all.

    Example:
        >>> parse_shapes("4096x4096, 2560X6912")
        [(4096, 4096), (2560, 6912)]
        >>> parse_shapes("abc")
        Traceback (most recent call last):
        ValueError: 'abc' is not a shape: want ROWSxK such as 4096x4096
    """
    out = []
    for tok in _values(s):
        parts = tok.lower().split("x")
        if len(parts) != 2:
            raise ValueError(f"{tok!r} is not a shape: want ROWSxK such as 4096x4096")
        try:
            rows, k = (parse_int(v) for v in parts)
        except ValueError as e:
            raise ValueError(f"{tok!r}: {e}") from None
        _check_range(rows * k, tok, 1, MAX_ELEMENTS, "elements")
        out.append((rows, k))
    return out


def parse_dims(s: str) -> tuple[int, ...]:
    """Parse a tensor shape written ``"4096,4096"``: positive sizes, at most :data:`MAX_ELEMENTS` in all.

    Example:
        >>> parse_dims("64, 128")
        (64, 128)
        >>> parse_dims("4,,4")
        Traceback (most recent call last):
        ValueError: '4,,4' has an empty dimension
    """
    toks = s.split(",")
    if any(not t.strip() for t in toks):
        raise ValueError(f"{s!r} has an empty dimension")
    dims = tuple(parse_int(t) for t in toks)
    _check_range(math.prod(dims), s, 1, MAX_ELEMENTS, "elements")
    return dims


def parse_block_sizes(s: str) -> list[int | None]:
    """Parse ``"none,128"`` into ``[None, 128]`` (``none`` or 0: one scale per tensor).

    Example:
        >>> parse_block_sizes("none, 128")
        [None, 128]
    """
    out: list[int | None] = []
    for tok in _values(s):
        out.append(None if tok.lower() in ("none", "0") else parse_int(tok, maximum=MAX_ELEMENTS))
    return out


def parse_names(s: str, valid: Sequence[str], what: str = "name") -> list[str]:
    """Parse ``"a,b"`` into names, each one of ``valid``.

    Example:
        >>> parse_names("qdq", ["qdq", "observers"], "part")
        ['qdq']
        >>> parse_names("foo", ["qdq", "observers"], "part")
        Traceback (most recent call last):
        ValueError: unknown part 'foo' (choose from qdq, observers)
    """
    out = _values(s)
    for name in out:
        if name not in valid:
            raise ValueError(f"unknown {what} {name!r} (choose from {', '.join(valid)})")
    return out


def cli_type(parse: Callable[[str], _T], *, keep_text: bool = True) -> Callable[[str], Any]:
    """An argparse ``type=`` that checks an option's text with ``parse`` (a ValueError becomes
    argparse's error naming the option, exit status 2).

    It returns the text itself (the suites parse it when they run, so ``QUICK`` presets and
    namespaces built by hand work alike), or with ``keep_text=False`` what ``parse`` returns.

    Example:
        >>> import argparse
        >>> p = argparse.ArgumentParser()
        >>> _ = p.add_argument("--threads", type=cli_type(parse_threads))
        >>> p.parse_args(["--threads", "1,2"]).threads
        '1,2'
        >>> cli_type(parse_threads)("0")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: '0' is out of range: want 1 to 1024
    """

    def check(text: str) -> Any:  # noqa: ANN401 (the text, or what parse returns)
        try:
            value = parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text if keep_text else value

    return check


positive_int = cli_type(parse_int, keep_text=False)
"""argparse ``type=`` of a whole number of at least 1 (``--repeat``, ``--linear-rounds``, ...)."""

block_size_arg = cli_type(partial(parse_int, maximum=MAX_ELEMENTS), keep_text=False)
"""argparse ``type=`` of ``--block-size`` (``bench quantize``, ``demo``): 1 to :data:`MAX_ELEMENTS`."""


def check_output_path(path: str) -> None:
    """Raise ValueError unless a file can be written at ``path``: its directory exists and is
    writable, and ``path`` is not a directory (checked before a benchmark runs, not after).

    Example:
        >>> check_output_path("/nonexistent/d/x.json")
        Traceback (most recent call last):
        ValueError: directory '/nonexistent/d' does not exist
    """
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{path!r} is a directory")
    parent = p.parent
    if not parent.is_dir():
        raise ValueError(f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{path!r} is not writable")
