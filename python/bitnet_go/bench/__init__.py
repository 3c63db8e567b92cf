"""``python -m bitnet_go bench``: benchmarks that run PyTorch side by side.

Each suite is a module of this package with two functions:

- ``add_arguments(parser: argparse.ArgumentParser) -> None``: its own options
  (the common ones, ``--threads``, ``--repeat``, ``--min-time``, ``--json``, ``--plot``, are
  added by the command);
- ``run(args: argparse.Namespace) -> list[dict]``: runs, prints its table as it
  goes, and returns the rows (written by ``--json``).

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
