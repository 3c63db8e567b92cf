"""What observers and calibrators share: taking batches, the settings that must
match to merge or restore, the ``(1.0, 0)`` qparams before any data, and the
checks of a saved state's arrays.

Example:
    >>> from bitnet_go.quantization import MinMaxObserver
    >>> obs = MinMaxObserver("int8")
    >>> obs([1.0, -2.0]) == [1.0, -2.0], unit_qparams()[0]
    (True, array([1.], dtype=float32))
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

_C = TypeVar("_C", bound="Collector")


def unit_qparams() -> tuple[np.ndarray, np.ndarray]:
    """``(scale [1.0], zero_point [0])``: what torch's observers answer before any data.

    Example:
        >>> unit_qparams()
        (array([1.], dtype=float32), array([0], dtype=int32))
    """
    return np.ones(1, np.float32), np.zeros(1, np.int32)


def check_state_array(v: object, name: str, dtype: type, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A copy of the saved array ``state[name]``, which must be of ``dtype`` (``TypeError``) and
    ``shape`` (when given; ``ValueError``).

    Example:
        >>> check_state_array(np.float32([1, 2]), "min_val", np.float32, (2,))
        array([1., 2.], dtype=float32)
    """
    a = np.asarray(v)
    if a.dtype != dtype:
        raise TypeError(f"state's {name} must be {np.dtype(dtype).name}, got {a.dtype}")
    if shape is not None and a.shape != shape:
        raise ValueError(f"state's {name} must have shape {shape}, got {a.shape}")
    return np.array(a, dtype)


class Collector:
    """Takes batches (``update(x)``, or call it: returns ``x`` as torch's observers do) and
    gives qparams; ``_config()`` is the settings that two of them must share to merge, and
    that a saved state must match to be loaded."""

    def __call__(self, x: ArrayLike) -> ArrayLike:
        """``update(x)``; returns ``x`` (as torch's observers do)."""
        self.update(x)
        return x

    def update(self, x: ArrayLike) -> None:  # pragma: no cover - every collector has one
        raise NotImplementedError

    def _config(self) -> dict[str, Any]:  # pragma: no cover - every collector has one
        raise NotImplementedError

    def _check_mergeable(self: _C, other: object) -> _C:
        """``other``, if it is of this type with the same settings (``TypeError`` otherwise)."""
        if type(other) is not type(self) or other._config() != self._config():  # type: ignore[attr-defined]
            raise TypeError(f"can only merge a {type(self).__name__} with the same settings")
        return other  # type: ignore[return-value]

    def _check_state(self, state: object) -> dict[str, Any]:
        """``state``, if it is a dict saved by a collector of this type and settings."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict (from state_dict()), got {type(state).__name__}")
        name = type(self).__name__
        if state.get("kind") != name:
            raise ValueError(f"state is a {state.get('kind')!r}'s, not a {name}'s")
        for k, v in self._config().items():
            if state.get(k) != v:
                raise ValueError(f"state's {k} is {state.get(k)!r}, this {name}'s is {v!r}")
        return state
