"""Progress over a list of named work items: a tqdm bar where tqdm is installed, plain lines otherwise."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def progress(
    items: Sequence[tuple[str, T]],
    show: bool | None,
    desc: str,
    unit: str,
    sizes: Sequence[int] | None = None,
) -> Iterator[tuple[str, T]]:
    """Yield ``items`` (``(name, item)`` pairs), showing progress on stderr.

    ``show``: None: a tqdm bar (``tqdm.auto``, so notebooks render it) when tqdm
    is installed, else nothing; True: the bar, or a line ``[i/n] name`` per item
    without tqdm; False: nothing.

    ``sizes``: bytes of work per item: the bar then counts bytes (rate and ETA
    in bytes per second) and shows ``k/n unit`` and the current item's name
    beside it; the plain lines add ``MB done/total``. An item counts as done
    when the caller asks for the next one.

    Example:
        >>> [name for name, _ in progress([("a", 1), ("b", 2)], False, "work", "item")]
        ['a', 'b']
    """
    if sizes is not None and len(sizes) != len(items):
        raise ValueError(f"sizes: one per item expected ({len(items)}), got {len(sizes)}")
    if show is False:
        yield from items
        return
    try:  # optional: notebooks render tqdm.auto's bar, which needs ipywidgets (else it warns "IProgress not found")
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.auto import tqdm
        else:
            from tqdm.std import tqdm
    except ImportError:
        tqdm = None
    n = len(items)
    if tqdm is not None and sizes is not None:
        bar = tqdm(total=sum(sizes), desc=desc, unit="B", unit_scale=True, unit_divisor=1024)
        try:
            for i, (item, size) in enumerate(zip(items, sizes)):
                bar.set_postfix_str(f"{i}/{n} {unit}s, {item[0]}", refresh=False)
                yield item
                bar.update(size)
            bar.set_postfix_str(f"{n}/{n} {unit}s", refresh=True)
        finally:
            bar.close()
        return
    if tqdm is not None:
        bar = tqdm(items, desc=desc, unit=unit)
        try:
            for item in bar:
                bar.set_postfix_str(item[0], refresh=False)
                yield item
        finally:
            bar.close()
        return
    done, total = 0, sum(sizes) if sizes is not None else 0
    for i, item in enumerate(items):
        if show:
            amount = f"  ({done / 1e6:.1f} of {total / 1e6:.1f} MB done)" if sizes is not None else ""
            print(f"[{i + 1}/{n}] {item[0]}{amount}", file=sys.stderr)
        yield item
        done += sizes[i] if sizes is not None else 0
