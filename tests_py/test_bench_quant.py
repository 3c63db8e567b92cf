"""The ``bench quant`` suite end to end at tiny sizes: rows, columns and JSON (not timings)."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from bitnet_go.__main__ import build_parser, main
from bitnet_go.bench import SUITES
from bitnet_go.bench import quant as bench_quant

TINY = ["--quant-sizes", "4K", "--quant-obs-size", "16K", "--quant-obs-batches", "2", "--repeat", "1"]


def _args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["bench", "quant", "--threads", "1,2", *TINY, *extra])


def _torch_ok() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _torchao_ok() -> bool:
    return _torch_ok() and bench_quant.torchao_or_none() is not None


def test_registered() -> None:
    assert SUITES["quant"] == "bitnet_go.bench.quant"
    args = _args()
    assert args.suites == ["quant"] and args.quant_sizes == "4K" and args.quant_obs_batches == 2


def test_rows_and_json(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "quant.json"
    assert main(["bench", "quant", "--threads", "1,2", *TINY, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ours ms" in out and "target" in out
    doc = json.loads(path.read_text())
    rows = doc["suites"]["quant"]
    torch, ao = _torch_ok(), _torchao_ok()

    qdq = [r for r in rows if r["op"] in bench_quant.QDQ_OPS]
    # every dtype x scheme x thread count x op
    got = {(r["op"], r["dtype"], r["scheme"], r["threads"]) for r in qdq}
    assert got == {
        (op, dt, sc, th)
        for op in bench_quant.QDQ_OPS
        for dt in bench_quant.DTYPES
        for sc in ("per_tensor", "per_channel")
        for th in (1, 2)
    }
    assert len(qdq) == len(got)
    for r in qdq:
        assert r["shape"] == "64x64" and r["n"] == 4096
        for k in ("ours_ms", "ours_min_ms", "ours_max_ms", "ours_gbs"):
            assert math.isfinite(r[k]) and r[k] > 0, k
        assert r["ours_min_ms"] <= r["ours_ms"] <= r["ours_max_ms"]
        assert isinstance(r["target_met"], bool) and r["target"].startswith("yes" if r["target_met"] else "no")
        if torch:
            assert r["of_sum"] == pytest.approx(r["sum_ms"] / r["ours_ms"])
            no_torch = r["dtype"] == "int4" and r["scheme"] == "per_channel"  # torch: no per-channel quint4x2
            # our integers are torch's (torchao's where torch has no such call; no reference without torchao)
            assert r["same"] is (None if no_torch and not ao else True)
            assert (r.get("torch_ms") is None) == no_torch
            if not no_torch:
                assert r["x_torch"] == pytest.approx(r["torch_ms"] / r["ours_ms"])
                assert r["torch_min_ms"] <= r["torch_ms"] <= r["torch_max_ms"]
            else:
                assert r["note"].startswith("torch:")
        assert (r.get("torchao_ms") is not None) == ao
        if ao:
            assert r["x_torchao"] == pytest.approx(r["torchao_ms"] / r["ours_ms"])

    obs = [r for r in rows if r["op"].endswith("Observer")]
    assert {(r["op"], r["threads"]) for r in obs} == {
        (name, th) for name in ("MinMaxObserver", "HistogramObserver", "PerChannelMinMaxObserver") for th in (1, 2)
    }
    for r in obs:
        assert r["shape"] == "2x90x91" and r["n"] == 2 * 90 * 91
        assert r["ours_ms"] > 0 and r["ours_gbs"] > 0 and "torchao_ms" not in r
        if torch:
            assert r["same"] is True  # the same qparams as torch's observer
            assert r["x_torch"] > 0 and r["sum_gbs"] > 0
            assert r["target"] == "yes" if r["x_torch"] >= bench_quant.TARGET_X_OBSERVER else r["target"] == "no: torch"
    assert len(rows) == len(qdq) + len(obs)


def test_parts_and_dtypes() -> None:
    rows = bench_quant.run(_args("--quant-parts", "qdq", "--quant-dtypes", "int8"))
    assert rows and {r["dtype"] for r in rows} == {"int8"} and {r["op"] for r in rows} == set(bench_quant.QDQ_OPS)
    rows = bench_quant.run(_args("--quant-parts", "observers"))
    assert rows and all(r["op"].endswith("Observer") for r in rows)
