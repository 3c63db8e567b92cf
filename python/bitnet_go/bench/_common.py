"""Shared benchmark helpers: timing, tables, machine facts, JSON output."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the bench's optional dependency, for annotations only
    import torch


MIN_TIME = 0.0
"""Seconds each ``timeit`` call keeps timing at least when its caller gives no ``min_time``.

Set by ``bench --min-time`` for every suite (0 in library use: exactly ``repeat`` calls).
"""

MAX_CALLS = 1000
"""The most calls one ``timeit`` makes to fill its minimum time."""


def timeit(fn: Callable[[], object], *, repeat: int = 7, warmup: int = 1, min_time: float | None = None) -> list[float]:
    """Call ``fn`` ``warmup`` times, then time ``repeat`` calls (seconds each).

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
    for _ in range(warmup):
        fn()
    out: list[float] = []
    start = time.perf_counter()
    while len(out) < repeat or (min_time > 0 and time.perf_counter() - start < min_time and len(out) < MAX_CALLS):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


PAUSE_S = 0.01
"""Pause before a block of timed calls that follows another library's block (:func:`paused_timeit`):
a runtime's threads that spin on after its calls (OpenMP's, ours) go to sleep in it instead of
taking the other's CPUs. Its settings are not touched. 10 ms was enough for PyPI torch's GNU
OpenMP threads in our runs, and ours spin 200 us; an Intel OpenMP runtime spins 200 ms by default
(``KMP_BLOCKTIME``), which this pause does not cover."""


def paused_timeit(
    fn: Callable[[], object], *, repeat: int = 7, warmup: int = 1, min_time: float | None = None
) -> list[float]:
    """:func:`timeit` after a pause of :data:`PAUSE_S`, for benches that alternate libraries.

    Example:
        >>> len(paused_timeit(lambda: None, repeat=2, min_time=0))
        2
    """
    time.sleep(PAUSE_S)
    return timeit(fn, repeat=repeat, warmup=warmup, min_time=min_time)


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


def torch_or_none() -> ModuleType | None:
    """Import torch if installed (``pip install bitnet_go[bench]``), else None.

    Example:
        >>> torch_or_none() is None or hasattr(torch_or_none(), "tensor")
        True
    """
    # Torch's OpenMP workers spin for milliseconds after each parallel op by
    # default and would take the second core from whatever is timed next (our
    # 2-thread rows lost up to half their speed that way). Passive waiting
    # costs torch nothing measurable on these op sizes. Only effective before
    # torch is first imported; an explicit setting by the user wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        print("bench: torch is not installed; PyTorch columns are left empty (pip install 'bitnet_go[bench]')")
        return None
    return torch


_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_sizes(s: str) -> list[int]:
    """Parse ``"1M,16M,1000"`` into element counts (K/M/G are powers of 1024).

    Example:
        >>> parse_sizes("1M,3")
        [1048576, 3]
    """
    out = []
    for tok in s.split(","):
        tok = tok.strip().upper()
        if not tok:
            continue
        mult = _SUFFIX.get(tok[-1], 1)
        out.append(int(tok[:-1] if mult > 1 else tok) * mult)
    return out


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


def parse_int_list(s: str) -> list[int]:
    """Parse ``"1,2,4"`` into ``[1, 2, 4]``.

    Example:
        >>> parse_int_list("1, 2")
        [1, 2]
    """
    return [int(v) for v in s.split(",") if v.strip()]


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


class Table:
    """A suite's rows: a progress line (stderr) per measurement, the table once at the end, with its legend.

    ``columns`` are (key, heading, format spec[, explanation]); ``total`` is the number of
    measurements (rows) the suite will make, for ``[k/total]``; ``notes`` are printed
    under the legend.

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
        progress("", end=True)
        print_table(self.rows, self.columns, title=self.title, notes=self.notes)
        return self.rows


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


def write_json(path: str | os.PathLike[str], suites: dict[str, list[dict[str, Any]]]) -> None:
    """Write raw results with machine facts to ``path``.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "b.json")
        >>> write_json(p, {"quantize": []})
        bench: wrote ...b.json
    """
    doc = {"machine": machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "suites": suites}
    Path(path).write_text(json.dumps(doc, indent=2, default=str))
    print(f"bench: wrote {path}")
