"""``python -m bitnet_go bench``: benchmarks that run PyTorch side by side.

Each suite is a module of this package with two functions:

- ``add_arguments(parser: argparse.ArgumentParser) -> None``: its own options
  (the common ones, ``--threads``, ``--repeat``, ``--min-time``, ``--json``, ``--plot``, are
  added by the command), each with a ``type=`` that refuses a bad value
  (:func:`bitnet_go.bench._common.cli_type`);
- ``run(args: argparse.Namespace) -> list[dict]``: runs, prints its table as it
  goes, and returns the rows (written by ``--json``);

and optionally:

- ``check_args(args: argparse.Namespace) -> None``: raises ValueError (``--option: why``)
  for what depends on several options or on files, before any suite runs;
- ``QUICK``: the options ``--quick`` sets where the command line does not;
- ``DEVICES``: the ``--device`` values it runs on (without it: ``("cpu",)``);
- ``plot(rows: list[dict], path: str) -> None``: draws ``--plot``.

Example:
    >>> from bitnet_go.bench import SUITES
    >>> "quantize" in SUITES
    True
"""

from __future__ import annotations

SUITES: dict[str, str] = {
    "quantize": "bitnet_go.bench.quantize",
    "conv": "bitnet_go.bench.conv",
    "quant": "bitnet_go.bench.quant",
    "linear": "bitnet_go.bench.linear",
    "families": "bitnet_go.bench.families",
    "qops": "bitnet_go.bench.qops",
    "convert": "bitnet_go.bench.convert",
}
"""Suite name -> module, in the order ``bench`` with no suite runs them."""
