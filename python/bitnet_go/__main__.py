"""Command line: ``python -m bitnet_go {bench,convert,demo,info}`` (also the ``bitnet-go`` script).

Bad options are refused before anything runs, with argparse's one-line error (exit status 2).
Ctrl-C stops ``bench`` and ``demo`` with one line on stderr (exit status 130); ``bench``
then, as after a suite's error, keeps what finished: the tables printed, and with ``--json``
the suites that finished and the rows of the one that stopped.

Example:
    $ python -m bitnet_go info
    $ python -m bitnet_go bench quantize --threads 1,2 --json out.json
    $ python -m bitnet_go convert model_dir -o model-i2_s.gguf --format i2_s
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ._version import __version__


def apply_quick(args: argparse.Namespace, names: Sequence[str], given: Collection[str] = ()) -> None:
    """``bench --quick``: 1 thread, exactly 1 timed call, and each named suite's ``QUICK`` options,
    except the options in ``given`` (those the command line gave, :func:`given_options`: they win).

    Example:
        >>> args = build_parser().parse_args(["bench", "quantize", "--quick", "--sizes", "4K"])
        >>> apply_quick(args, ["quantize"], given={"sizes"})
        >>> args.threads, args.repeat, args.sizes
        ('1', 1, '4K')
    """
    from .bench import SUITES

    quick: dict[str, object] = {"threads": "1", "repeat": 1, "min_time": 0.0}
    for name in names:
        quick.update(getattr(importlib.import_module(SUITES[name]), "QUICK", {}))
    for key, value in quick.items():
        if key not in given:
            setattr(args, key, value)
    args.repeat_given = True


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The ``dest`` of every option that ``argv`` gives ``parser``, told from those left at their
    defaults (even where the value given equals the default).

    Example:
        >>> bench = _parsers()[1]["bench"]
        >>> sorted(given_options(bench, ["quantize", "--quick", "--sizes", "1M,16M,64M"]) - {"suites"})
        ['quick', 'sizes']
    """
    unset = object()
    ns = argparse.Namespace(**dict.fromkeys(vars(parser.parse_args([])), unset))
    parser.parse_args(argv, namespace=ns)
    return {key for key, value in vars(ns).items() if value is not unset}


def _suite_names(args: argparse.Namespace) -> list[str]:
    """The suites ``bench`` runs, in order, each once: those named, else all (``--families``: families)."""
    from .bench import SUITES

    names = list(dict.fromkeys(args.suites or (["families"] if args.families else SUITES)))
    if args.families and "families" not in names:
        names.append("families")
    return names


def _warn(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr)


def _check_plot(args: argparse.Namespace, mods: dict[str, ModuleType]) -> None:
    """Refuse (ValueError) a ``--plot`` that would draw nothing or fail after the suites ran; warn
    about the suites it leaves out."""
    from .bench import SUITES

    drawn = [name for name, mod in mods.items() if hasattr(mod, "plot")]
    if not drawn:
        can = [name for name, modname in SUITES.items() if hasattr(importlib.import_module(modname), "plot")]
        raise ValueError(f"--plot: only the {', '.join(can)} suite draws a plot, not {', '.join(mods)}")
    if args.device == "cuda":
        raise ValueError("--plot: draws the CPU rows; --device cuda has no plot")
    if importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--plot: needs matplotlib (pip install matplotlib)")
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(args.plot).suffix.lower().lstrip(".")
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise ValueError(f"--plot: matplotlib cannot write .{suffix} files (it writes {', '.join(sorted(formats))})")
    skipped = [name for name in mods if name not in drawn]
    if skipped:
        _warn(f"--plot draws the {', '.join(drawn)} suite only; {', '.join(skipped)} draw no plot")


def _check_bench(parser: argparse.ArgumentParser, args: argparse.Namespace, given: Collection[str]) -> None:
    """Everything ``bench`` can check before timing anything: ``--quick`` applied (``given``
    options kept), the ``--json``/``--plot`` paths, each suite's ``check_args``. A problem is
    ``parser.error`` (argparse's error line, exit status 2); ``--device cuda`` with suites that
    run on the CPU only is a one-line note on stderr."""
    from .bench import SUITES, _common

    names = _suite_names(args)
    if args.quick:
        apply_quick(args, names, given)
    mods = {name: importlib.import_module(SUITES[name]) for name in names}
    try:
        for option in ("json", "plot"):
            path = getattr(args, option)
            if path is not None:
                try:
                    _common.check_output_path(path)
                except ValueError as e:
                    raise ValueError(f"--{option}: {e}") from None
        if args.plot is not None:
            _check_plot(args, mods)
        for mod in mods.values():
            check = getattr(mod, "check_args", None)
            if check is not None:
                check(args)
    except ValueError as e:
        parser.error(str(e))
    cpu_only = [name for name, mod in mods.items() if "cuda" not in getattr(mod, "DEVICES", ("cpu",))]
    if args.device == "cuda" and cpu_only:
        _warn(
            f"--device cuda: the {', '.join(cpu_only)} suite{'s run' if len(cpu_only) > 1 else ' runs'} on the CPU only"
        )


def _bench(args: argparse.Namespace) -> int:
    """Run ``bench``'s suites (checked by :func:`_check_bench`), then write ``--json`` and ``--plot``.

    When a suite stops (Ctrl-C, an error), the rows it had are printed and, with ``--json``,
    written with the suites that finished; then 130 is returned after Ctrl-C and the error is
    raised again otherwise.
    """
    from .bench import SUITES, _common

    results: dict[str, list[dict[str, Any]]] = {}
    running: str | None = None
    _common.settle_allocator()
    old_min_time, _common.MIN_TIME = _common.MIN_TIME, bench_min_time(args)
    try:
        for running in _suite_names(args):
            mod = importlib.import_module(SUITES[running])
            _common.forget_tables()
            results[running] = mod.run(args)
        running = None
        if args.json:
            _common.write_json(args.json, results)
        if args.plot:
            for name, rows in results.items():
                mod = importlib.import_module(SUITES[name])
                if hasattr(mod, "plot"):
                    mod.plot(rows, args.plot)
    except BaseException as e:  # Ctrl-C, a suite's SystemExit or error: keep what finished
        _stopped(args, results, running, e)
        if isinstance(e, KeyboardInterrupt):
            return 130
        raise
    finally:
        _common.MIN_TIME = old_min_time
    return 0


def _stopped(
    args: argparse.Namespace, results: dict[str, list[dict[str, Any]]], suite: str | None, e: BaseException
) -> None:
    """Keep what ``bench`` measured before ``e`` stopped ``suite`` (None: after the suites) and say so in one line."""
    from .bench import _common

    _common.progress("", end=True)
    interrupted = isinstance(e, KeyboardInterrupt)
    if suite is None:
        _warn("interrupted" if interrupted else "failed after the suites ran")
        return
    why = "interrupted" if interrupted else f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    rows: list[dict[str, Any]] = []
    for table in _common.unfinished_tables():
        if table.rows:
            of = f" of {table.total}" if table.total else ""
            table.notes.append(f"stopped early ({'Ctrl-C' if interrupted else 'error'}): {len(table.rows)}{of} rows")
            rows += table.done()
    kept = ""
    if args.json and (results or rows):
        _common.write_json(args.json, results, {"suite": suite, "reason": why, "rows": rows})
        kept = f"; {args.json} holds the suites that finished ({', '.join(results) or 'none'})"
        kept += f" and {len(rows)} row{'s' * (len(rows) != 1)} of {suite}" if rows else ""
    elif args.json:
        kept = f"; nothing finished, {args.json} not written"
    _warn(f"{'interrupted in' if interrupted else 'stopped by an error in'} {suite}{kept}")


def _demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    return demo_main(args)


def kernel_table(cpu: dict[str, Any]) -> dict[str, Any]:
    """Every op's kernel in one place, from ``cpu_features()``: the CPU kind, how kernels were
    picked (``dispatch``), and per op the kernel family in use, why, and the families built.

    Every op that has kernel families is listed (the Go side picks them all at start-up); an op
    without a pick would show ``"kernel": None``.

    Example:
        >>> import bitnet_go
        >>> t = kernel_table(bitnet_go.cpu_features())
        >>> sorted(t) == ["cpu_kind", "dispatch", "ops"] and "conv_lut" in t["ops"]
        True
        >>> sorted(t["ops"]["conv_lut"])
        ['families', 'kernel', 'reason']
    """
    families: dict[str, list[str]] = cpu.get("kernel_families", {})
    kernels: dict[str, str] = cpu.get("kernels", {})
    reasons: dict[str, str] = cpu.get("kernel_reasons", {})
    ops = sorted(set(families) | set(kernels))
    return {
        "cpu_kind": cpu.get("cpu_kind"),
        "dispatch": cpu.get("dispatch"),
        "ops": {
            op: {"kernel": kernels.get(op), "reason": reasons.get(op), "families": families.get(op, [])} for op in ops
        },
    }


def _info(args: argparse.Namespace) -> int:
    """Print version, library, threads, every op's kernel (``kernels``) and the CPU's features, as JSON."""
    import bitnet_go

    from ._core.lib import library_path

    cpu = bitnet_go.cpu_features()
    print(
        json.dumps(
            {
                "version": bitnet_go.__version__,
                "library": str(library_path()),
                "num_threads": bitnet_go.get_num_threads(),
                "kernels": kernel_table(cpu),
                "cpu": cpu,
            },
            indent=2,
        )
    )
    return 0


def _suite(name: str) -> str:
    """A bench suite's name, checked."""
    from .bench import SUITES

    if name not in SUITES:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(map(repr, SUITES))})")
    return name


DEFAULT_REPEAT = 7
"""``bench --repeat``'s default: timed calls per measurement, at least."""
DEFAULT_MIN_TIME = 0.2
"""``bench --min-time``'s default (seconds per measurement, without ``--repeat``): sub-millisecond calls are
timed hundreds of times instead of 7, at most 0.2 s more per measurement. Run-to-run swings of
torch's expression that no repeat count averages away (glibc handing its temporaries fresh mmap pages
in some runs and reused heap blocks in others) are removed by :func:`bench._common.settle_allocator`,
which ``bench`` calls once before timing."""


class _RepeatAction(argparse.Action):
    """Stores ``--repeat N`` and notes that it was given (then the default minimum time is off)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.repeat_given = True


def bench_min_time(args: argparse.Namespace) -> float:
    """Seconds each measurement of ``bench`` keeps timing at least: ``--min-time`` if given, else
    :data:`DEFAULT_MIN_TIME`, or 0 (exactly N calls) where ``--repeat N`` was given alone.

    Example:
        >>> p = build_parser()
        >>> [bench_min_time(p.parse_args(["bench", *a])) for a in ([], ["--repeat", "3"], ["--min-time", "1"])]
        [0.2, 0.0, 1.0]
    """
    if args.min_time is not None:
        return max(0.0, float(args.min_time))
    return 0.0 if getattr(args, "repeat_given", False) else DEFAULT_MIN_TIME


def _prog() -> str | None:
    """``python -m bitnet_go`` when run so (``sys.argv[0]`` is this file), else None: argparse's
    default, the name the program was run by (``bitnet-go``)."""
    run_as = sys.argv[:1]
    return "python -m bitnet_go" if run_as and Path(run_as[0]).resolve() == Path(__file__).resolve() else None


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m bitnet_go`` argument parser.

    Example:
        >>> build_parser().parse_args(["bench", "quantize"]).suites
        ['quantize']
    """
    return _parsers()[0]


def _parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The argument parser and its subcommands' parsers, by name."""
    from .bench import SUITES
    from .bench._common import block_size_arg, cli_type, parse_dims, parse_threads, positive_int

    p = argparse.ArgumentParser(prog=_prog(), description="bitnet_go command line")
    p.add_argument("--version", action="version", version=__version__, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    # a short usage line: argparse's error then takes two lines, not the forty of every option
    b = sub.add_parser("bench", help="benchmarks against PyTorch, side by side", usage="%(prog)s [SUITE ...] [options]")
    # Checked by type, not choices: argparse (3.11) checks an empty list against choices and
    # refuses "bench --families" with no suite named.
    b.add_argument(
        "suites", nargs="*", type=_suite, metavar="SUITE", help=f"suites to run: {', '.join(SUITES)} (default: all)"
    )
    b.add_argument(
        "--threads", type=cli_type(parse_threads), default="1,2", help="comma-separated thread counts (default 1,2)"
    )
    b.add_argument(
        "--repeat",
        type=positive_int,
        default=DEFAULT_REPEAT,
        action=_RepeatAction,
        help=f"timed calls per measurement (median reported; default {DEFAULT_REPEAT}, and at least "
        f"{DEFAULT_MIN_TIME} s of calls; given alone: exactly N calls)",
    )
    b.add_argument(
        "--min-time",
        type=float,
        default=None,
        metavar="S",
        help=f"keep timing short calls until S seconds per measurement (default {DEFAULT_MIN_TIME} "
        f"without --repeat, else 0), at most 1000 calls",
    )
    b.add_argument("--json", metavar="PATH", help="write raw results as JSON")
    b.add_argument(
        "--families", action="store_true", help="run the families suite (every kernel family per op, and the pick)"
    )
    b.add_argument("--plot", metavar="PATH.png", help="draw the results (needs matplotlib)")
    b.add_argument(
        "--quick",
        action="store_true",
        help="a few seconds on tiny inputs, 1 thread, 1 call each: checks that every suite runs (make bench-smoke); "
        "options given on the command line win",
    )
    for name, modname in SUITES.items():
        g = b.add_argument_group(f"{name} suite")
        importlib.import_module(modname).add_arguments(g)
    b.set_defaults(func=_bench)

    c = sub.add_parser("convert", help="quantize a safetensors checkpoint to ternary safetensors or GGUF")
    from .convert._cli import add_arguments as convert_arguments

    convert_arguments(c)

    d = sub.add_parser("demo", help="quantize a random weight and compare with PyTorch")
    d.add_argument("--shape", type=cli_type(parse_dims), default="4096,4096", help="weight shape (default 4096,4096)")
    d.add_argument("--block-size", type=block_size_arg, default=None, help="elements per scale (default: one scale)")
    d.set_defaults(func=_demo)

    i = sub.add_parser("info", help="version, library path, threads, each op's kernel and why, CPU features")
    i.set_defaults(func=_info)
    return p, {"bench": b, "convert": c, "demo": d, "info": i}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m bitnet_go`` and the ``bitnet-go`` script; returns the exit status.

    A bad option exits with argparse's error (status 2) before anything runs; Ctrl-C is one
    line on stderr and status 130 (``bench`` keeps what finished, see :func:`_bench`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, commands = _parsers()
    args = parser.parse_args(argv)
    try:
        if args.command == "bench":
            bench = commands["bench"]
            given = given_options(bench, argv[argv.index("bench") + 1 :]) if args.quick else set()
            _check_bench(bench, args, given)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
