"""Command line: ``python -m bitnet_go {bench,demo,info}``.

Example:
    $ python -m bitnet_go info
    $ python -m bitnet_go bench quantize --threads 1,2 --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any


def _bench(args: argparse.Namespace) -> int:
    from .bench import SUITES
    from .bench._common import write_json

    names = args.suites or (["families"] if args.families else list(SUITES))
    if args.families and "families" not in names:
        names.append("families")
    results: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        mod = importlib.import_module(SUITES[name])
        results[name] = mod.run(args)
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
    b.add_argument("--repeat", type=int, default=7, help="timed calls per measurement (median reported)")
    b.add_argument("--json", metavar="PATH", help="write raw results as JSON")
    b.add_argument(
        "--families", action="store_true", help="run the families suite (every kernel family per op, and the pick)"
    )
    b.add_argument("--plot", metavar="PATH.png", help="draw the results (needs matplotlib)")
    for name, modname in SUITES.items():
        g = b.add_argument_group(f"{name} suite")
        importlib.import_module(modname).add_arguments(g)
    b.set_defaults(func=_bench)

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
