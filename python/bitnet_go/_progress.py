"""Progress over a list of named work items: a tqdm bar where tqdm is installed, plain lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def progress(items: Sequence[tuple[str, T]], show: bool | None, desc: str, unit: str) -> Iterator[tuple[str, T]]:
    """Yield ``items`` (``(name, item)`` pairs), showing progress on stderr.

    ``show``: None: a tqdm bar (``tqdm.auto``, so notebooks render it) when tqdm
    is installed, else nothing; True: the bar, or a line ``[i/n] name`` per item
    without tqdm; False: nothing.

    Example:
        >>> [name for name, _ in progress([("a", 1), ("b", 2)], False, "work", "item")]
        ['a', 'b']
    """
    if show is False:
        yield from items
        return
    try:
        from tqdm.auto import tqdm  # optional: notebooks render it as a bar
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(items, desc=desc, unit=unit)
        try:
            for item in bar:
                bar.set_postfix_str(item[0], refresh=False)
                yield item
        finally:
            bar.close()
        return
    for i, item in enumerate(items):
        if show:
            print(f"[{i + 1}/{len(items)}] {item[0]}", file=sys.stderr)
        yield item
