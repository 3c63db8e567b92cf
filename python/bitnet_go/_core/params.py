"""One parameter list for two public functions that take the same arguments.

Example:
    >>> import inspect
    >>> def area(w: int, h: int = 1) -> int:
    ...     return w * h
    >>> @parameters_of(area)
    ... def double_area(*args: object, **kwargs: object) -> int:
    ...     return 2 * area(*args, **kwargs)
    >>> double_area(3, h=2), str(inspect.signature(double_area))
    (12, "(w: 'int', h: 'int' = 1) -> 'int'")
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # typing.ParamSpec is Python 3.10+; type checkers ship typing_extensions
    from typing_extensions import ParamSpec

    _P = ParamSpec("_P")

_R = TypeVar("_R")


def parameters_of(model: Callable[_P, object]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Give the decorated function ``model``'s parameters: names, kinds, defaults and hints.

    The decorated function is returned as it is (no wrapper, no cost a call),
    written ``(*args, **kwargs)`` and passing them on to a function that
    takes ``model``'s parameters; ``inspect.signature``, ``help`` and
    ``typing.get_type_hints`` show ``model``'s parameters with the decorated
    function's return hint, and type checkers see them (ParamSpec). Both
    functions must be in one module (hints are resolved in its globals).
    """

    def give(f: Callable[..., _R]) -> Callable[_P, _R]:
        returns = f.__annotations__.get("return", inspect.Signature.empty)
        f.__signature__ = inspect.signature(model).replace(return_annotation=returns)  # type: ignore[attr-defined]
        hints: dict[str, Any] = {k: v for k, v in model.__annotations__.items() if k != "return"}
        f.__annotations__ = {**hints, "return": returns} if "return" in f.__annotations__ else hints
        return f

    return give
