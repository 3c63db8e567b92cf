"""Shared fixtures. Random data is drawn fresh per case from a seed printed
in the test id, so any failure can be replayed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # torch_ref


@pytest.fixture(autouse=True)
def _restore_threads():
    import bitnet_go

    old = bitnet_go.get_num_threads()
    yield
    bitnet_go.set_num_threads(old)
