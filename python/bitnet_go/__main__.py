"""Command line: ``python -m bitnet_go {bench,convert,demo,info}``.

Example:
    $ python -m bitnet_go info
    $ python -m bitnet_go bench quantize --threads 1,2 --json out.json
    $ python -m bitnet_go convert model_dir -o model-i2_s.gguf --format i2_s
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any


def apply_quick(args: argparse.Namespace, names: Sequence[str]) -> None:
    """``bench --quick``: 1 thread, exactly 1 timed call, and each named suite's ``QUICK`` options.

    Example:
        >>> args = build_parser().parse_args(["bench", "quantize", "--quick"])
        >>> apply_quick(args, ["quantize"])
        >>> args.threads, args.repeat, args.sizes
        ('1', 1, '1M')
    """
    from .bench import SUITES

    args.threads, args.repeat, args.min_time, args.repeat_given = "1", 1, 0.0, True
    for name in names:
        for key, value in getattr(importlib.import_module(SUITES[name]), "QUICK", {}).items():
            setattr(args, key, value)


def _bench(args: argparse.Namespace) -> int:
    from .bench import SUITES, _common
    from .bench._common import write_json

    names = args.suites or (["families"] if args.families else list(SUITES))
    if args.families and "families" not in names:
        names.append("families")
    results: dict[str, list[dict[str, Any]]] = {}
    if args.quick:
        apply_quick(args, names)
    _common.settle_allocator()
    old_min_time, _common.MIN_TIME = _common.MIN_TIME, bench_min_time(args)
    try:
        for name in names:
            mod = importlib.import_module(SUITES[name])
            results[name] = mod.run(args)
    finally:
        _common.MIN_TIME = old_min_time
    if args.json:
        write_json(args.json, results)
    if args.plot:
        for name in names:
            mod = importlib.import_module(SUITES[name])
            if hasattr(mod, "plot"):
                mod.plot(results[name], args.plot)
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m bitnet_go`` argument parser.

    Example:
        >>> build_parser().parse_args(["bench", "quantize"]).suites
        ['quantize']
    """
    from .bench import SUITES

    p = argparse.ArgumentParser(prog="python -m bitnet_go", description="bitnet_go command line")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="benchmarks against PyTorch, side by side")
    # Checked by type, not choices: argparse (3.11) checks an empty list against choices and
    # refuses "bench --families" with no suite named.
    b.add_argument(
        "suites", nargs="*", type=_suite, metavar="SUITE", help=f"suites to run: {', '.join(SUITES)} (default: all)"
    )
    b.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    b.add_argument(
        "--repeat",
        type=int,
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
        help="a few seconds on tiny inputs, 1 thread, 1 call each: checks that every suite runs (make bench-smoke)",
    )
    for name, modname in SUITES.items():
        g = b.add_argument_group(f"{name} suite")
        importlib.import_module(modname).add_arguments(g)
    b.set_defaults(func=_bench)

    c = sub.add_parser("convert", help="quantize a safetensors checkpoint to ternary safetensors or GGUF")
    from .convert._cli import add_arguments as convert_arguments

    convert_arguments(c)

    d = sub.add_parser("demo", help="quantize a random weight and compare with PyTorch")
    d.add_argument("--shape", default="4096,4096", help="weight shape (default 4096,4096)")
    d.add_argument("--block-size", type=int, default=None, help="elements per scale (default: one scale)")
    d.set_defaults(func=_demo)

    i = sub.add_parser("info", help="version, library path, threads, each op's kernel and why, CPU features")
    i.set_defaults(func=_info)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m bitnet_go`` and the ``bitnet-go`` script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
