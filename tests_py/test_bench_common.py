"""The bench's common timing options (``--repeat``, ``--min-time``) and the GPU table's range columns (no GPU)."""

from __future__ import annotations

import argparse
import os
import types
from typing import Any

import numpy as np
import pytest

from bitnet_go.__main__ import DEFAULT_MIN_TIME, DEFAULT_REPEAT, bench_min_time, build_parser, main
from bitnet_go.bench import _common, quantize_cuda
from bitnet_go.bench import quantize as bench_quantize


def _bench(*a: str) -> argparse.Namespace:
    return build_parser().parse_args(["bench", *a])


def test_repeat_and_min_time_defaults() -> None:
    args = _bench()
    assert args.repeat == DEFAULT_REPEAT and bench_min_time(args) == DEFAULT_MIN_TIME > 0
    # --repeat N alone: exactly N calls (quick runs, the tests' --repeat 1)
    args = _bench("--repeat", "3")
    assert args.repeat == 3 and bench_min_time(args) == 0.0
    assert bench_min_time(_bench("--repeat", "3", "--min-time", "0.5")) == 0.5
    assert bench_min_time(_bench("--min-time", "-1")) == 0.0
    assert bench_min_time(argparse.Namespace(min_time=None)) == DEFAULT_MIN_TIME  # a suite's own Namespace


def test_timeit_min_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(_common.timeit(lambda: None, repeat=3, min_time=0)) == 3
    monkeypatch.setattr(_common, "MAX_CALLS", 50)
    assert len(_common.timeit(lambda: None, repeat=3, min_time=60)) == 50  # capped
    monkeypatch.setattr(_common, "MIN_TIME", 60.0)
    assert len(_common.timeit(lambda: None, repeat=3)) == 50  # the bench-wide default applies
    assert len(_common.timeit(lambda: None, repeat=3, min_time=0)) == 3  # an explicit value wins


def test_timeit_sleeps_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block of timed calls starts after PAUSE_S (the previous library's threads sleep in it)."""
    slept: list[float] = []
    calls: list[str] = []
    monkeypatch.setattr(_common.time, "sleep", lambda s: (slept.append(s), calls.append("sleep")))
    ts = _common.timeit(lambda: calls.append("call"), repeat=3, warmup=1, min_time=0)
    assert slept == [_common.PAUSE_S] and _common.PAUSE_S > 0
    assert calls == ["sleep", "call", "call", "call", "call"] and len(ts) == 3  # the pause before the warm-up
    slept.clear()
    _common.timeit(lambda: None, repeat=1, min_time=0, pause=0)
    assert slept == []


def test_bench_leaves_torch_openmp_settings_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The competitor runs with its defaults: importing torch for a bench sets no OpenMP variable."""
    for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(k, raising=False)
    _common.torch_or_none("")
    assert not any(k in os.environ for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT"))


def test_bench_sets_and_restores_min_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[float, int]] = []

    def fake_run(args: argparse.Namespace) -> list[dict[str, Any]]:
        seen.append((_common.MIN_TIME, args.repeat))
        return []

    monkeypatch.setattr(bench_quantize, "run", fake_run)
    before = _common.MIN_TIME
    assert main(["bench", "quantize"]) == 0
    assert main(["bench", "quantize", "--repeat", "2"]) == 0
    assert main(["bench", "quantize", "--min-time", "0.05"]) == 0
    assert seen == [(DEFAULT_MIN_TIME, DEFAULT_REPEAT), (0.0, 2), (0.05, DEFAULT_REPEAT)]
    assert _common.MIN_TIME == before


class _FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        pass

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 3.0  # over 3 launches: 1 ms each


def _fake_torch() -> types.SimpleNamespace:
    cuda = types.SimpleNamespace(Event=_FakeEvent, synchronize=lambda *a: None)
    return types.SimpleNamespace(cuda=cuda)


def test_cuda_rows_have_ranges_next_to_medians(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The GPU table's rows and printing, with the GPU calls replaced (no GPU needed)."""
    calls = {"n": 0}

    def fake_quantize(x: object, **kw: object) -> types.SimpleNamespace:
        calls["n"] += 1
        return types.SimpleNamespace(nbytes=1000)

    monkeypatch.setattr(quantize_cuda, "cuda_plan", lambda n, bs: {"passes": 2 if bs is None else 1})
    monkeypatch.setattr(quantize_cuda, "cuda_time_quantize", lambda x, **kw: 0.5)
    monkeypatch.setattr(
        quantize_cuda, "bitnet_go", types.SimpleNamespace(quantize_i2s=fake_quantize, get_num_threads=lambda: 2)
    )
    monkeypatch.setattr(quantize_cuda, "torch_quantize", lambda *a: None)
    monkeypatch.setattr(_common, "MIN_TIME", 0.0)
    n = 1 << 20
    row = quantize_cuda._measure(_fake_torch(), None, None, np.zeros(4, np.float32), n, None, "absmean", 3)
    assert calls["n"] > 0
    for key in ("e2e_torch", "e2e_numpy", "cpu"):
        lo, hi = (float(v) for v in row[f"{key}_spread"].split("-"))
        assert lo - 0.001 <= row[f"{key}_ms"] <= hi + 0.001  # the text is rounded to 0.001 ms
    assert row["kernel_ms"] == 0.5 and row["torch_expr_ms"] == 1.0 and row["passes"] == 2
    row.update(gpu="fake", copy_ms=1.0, copy_gbs=8 * n / 1e6, frac_of_copy=row["kernel_gbs"] / (8 * n / 1e6))

    keys = [c[0] for c in quantize_cuda._COLUMNS]
    for key in ("e2e_torch", "e2e_numpy", "cpu"):  # each median with its range right after it
        assert keys[keys.index(f"{key}_ms") + 1] == f"{key}_spread"
    table = _common.Table(quantize_cuda._TITLE, quantize_cuda._COLUMNS, total=1, notes=quantize_cuda._NOTES)
    table.add(row)
    table.done()
    out = capsys.readouterr().out.splitlines()
    head = out[out.index(next(line for line in out if line.startswith("elements")))]
    assert head.split().count("range") == 3
    cells = out[out.index(head) + 2].split()
    assert row["e2e_torch_spread"] in cells and row["e2e_numpy_spread"] in cells and row["cpu_spread"] in cells
    assert any("no per-call times" in line for line in out)


@pytest.mark.parametrize(("text", "want"), [("1,8,64", [1, 8, 64]), ("none", []), (" None ", []), ("4", [4])])
def test_qops_batches_parsed(text: str, want: list[int]) -> None:
    from bitnet_go.bench.qops import _batches

    assert _batches(text) == want


@pytest.mark.parametrize("text", ["0", "1,-8", "", "x", "1.5"])
def test_qops_batches_refused_with_a_message(text: str) -> None:
    from bitnet_go.bench.qops import _batches

    with pytest.raises(SystemExit, match="--qops-batches wants positive counts"):
        _batches(text)


def test_alternate_interleaves_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round times every function once (a block of its share of the calls after one warm-up), in turn."""
    monkeypatch.setattr(_common.time, "sleep", lambda s: None)
    order: list[str] = []
    ts = _common.alternate({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, repeat=7, rounds=3)
    # 7 calls split 3, 2, 2 over the rounds, each block after one warm-up call
    assert order == ["a"] * 4 + ["b"] * 4 + ["a"] * 3 + ["b"] * 3 + ["a"] * 3 + ["b"] * 3
    assert [len(v) for v in ts.values()] == [7, 7]
    order.clear()
    _common.alternate({"a": lambda: order.append("a")}, repeat=2, rounds=5)  # never more rounds than calls
    assert order == ["a", "a", "a", "a"]
