"""The ``bench linear`` suite end to end at tiny sizes: rows, columns and JSON (not timings).

With bitnet.cpp's kernel built (``tools/bitnet_cpp/build.sh BITNET_SRC``, the
library named by ``$BITNET_CPP_PEER``), its int32 dot products are also checked
against a numpy oracle and ours; without it those tests are skipped.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from bitnet_go.__main__ import build_parser, main
from bitnet_go.bench import SUITES
from bitnet_go.bench import linear as bench_linear

TINY = ["--linear-shapes", "256x512,130x384", "--linear-batches", "1,4,6", "--repeat", "1", "--linear-rounds", "1"]

PEER = os.environ.get(bench_linear.PEER_ENV, "")
needs_peer = pytest.mark.skipif(
    not (PEER and Path(PEER).is_file()),
    reason=f"bitnet.cpp's kernel is not built: run tools/bitnet_cpp/build.sh BITNET_SRC and set "
    f"{bench_linear.PEER_ENV}=build/bitnet_cpp/libbitnet_cpp_peer.so",
)


def test_registered() -> None:
    assert SUITES["linear"] == "bitnet_go.bench.linear"
    args = build_parser().parse_args(["bench", "linear", *TINY, "--bitnet-cpp", "x.so"])
    assert args.suites == ["linear"] and args.linear_batches == "1,4,6" and args.bitnet_cpp == "x.so"
    assert bench_linear.parse_shapes(args.linear_shapes) == [(256, 512), (130, 384)]
    defaults = build_parser().parse_args(["bench", "linear"])
    assert bench_linear.parse_shapes(defaults.linear_shapes) == bench_linear.SHAPES
    assert [int(v) for v in defaults.linear_batches.split(",")] == bench_linear.BATCHES == [1, 8, 64]


def test_make_case_rejects_k_off_the_group() -> None:
    with pytest.raises(ValueError, match="multiple of 128"):
        bench_linear.make_case(4, 100, 1)


def _check_rows(rows: list[dict], peer: bool) -> None:
    got = {(r["shape"], r["n"], r["threads"]) for r in rows}
    assert got == {(s, n, t) for s in ("256x512", "130x384") for n in (1, 4, 6) for t in (1, 2)}
    assert len(rows) == len(got)
    for r in rows:
        assert r["gop"] == pytest.approx(2 * r["n"] * r["rows"] * r["k"] / 1e9)
        assert r["weight_bytes"] == r["rows"] * r["k"] // 4
        assert r["kernel"]
        for key in ("ours_ms", "ours_min_ms", "ours_max_ms", "ours_gops"):
            assert math.isfinite(r[key]) and r[key] > 0, key
        assert r["ours_min_ms"] <= r["ours_ms"] <= r["ours_max_ms"]
        assert (r.get("ours_scaling") is not None) == (r["threads"] == 2)
        if peer:
            assert r["same"] is True
            assert r["x_peer"] == pytest.approx(r["peer_ms"] / r["ours_ms"])
            assert r["x_peer_min"] == pytest.approx(r["peer_min_ms"] / r["ours_min_ms"])
            assert r["peer_min_ms"] <= r["peer_ms"] <= r["peer_max_ms"]
            assert isinstance(r["target_met"], bool) and r["target"].startswith("yes" if r["target_met"] else "no")
        else:
            assert r["same"] is None and "peer_ms" not in r and "x_peer" not in r
            assert r["target_met"] is None and r["target"] == "?"
            assert "build.sh" in r["note"]


def test_rows_and_json_without_peer(tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(bench_linear.PEER_ENV, raising=False)
    path = tmp_path / "linear.json"
    assert main(["bench", "linear", "--threads", "1,2", *TINY, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ours ms" in out and "bnc ms" in out and "tools/bitnet_cpp/build.sh" in out
    _check_rows(json.loads(path.read_text())["suites"]["linear"], peer=False)


def test_missing_peer_library_is_a_note(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_linear.load_peer(str(tmp_path / "nope.so")) is None
    assert "cannot load" in capsys.readouterr().out


@needs_peer
def test_rows_and_json_with_peer(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "linear.json"
    assert main(["bench", "linear", "--threads", "1,2", *TINY, "--bitnet-cpp", PEER, "--json", str(path)]) == 0
    assert "x bnc geomean" in capsys.readouterr().out
    _check_rows(json.loads(path.read_text())["suites"]["linear"], peer=True)


@needs_peer
@pytest.mark.parametrize(("rows", "k", "n"), [(1, 128, 1), (5, 256, 1), (130, 384, 4), (129, 128, 6), (300, 1152, 9)])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_peer_dots_equal_numpy_and_ours(rows: int, k: int, n: int, threads: int) -> None:
    import bitnet_go

    peer = bench_linear.Peer(PEER)
    w, wb, x = bench_linear.make_case(rows, k, n, seed=rows + n)
    act = x.reshape(n, k).astype(np.int8)
    want = act.astype(np.int64) @ w.values().reshape(rows, k).T.astype(np.int64)
    np.testing.assert_array_equal(peer.dots(wb, act, rows, threads), want)
    ours = bitnet_go.conv2d_quantized(x, w, act_bits=8).reshape(n, rows)
    np.testing.assert_array_equal(ours.astype(np.int64), want)


def test_summary_geomeans_and_scaling_misses(capsys: pytest.CaptureFixture[str]) -> None:
    big, small = bench_linear.SCALING_MIN_BYTES, bench_linear.SCALING_MIN_BYTES - 1
    rows = [
        {"threads": 1, "x_peer": 2.0, "x_peer_min": 1.0, "weight_bytes": big},
        {"threads": 1, "x_peer": 0.5, "x_peer_min": 4.0, "weight_bytes": big},
        {"threads": 2, "x_peer": 3.0, "x_peer_min": 3.0, "weight_bytes": big, "ours_scaling": 1.69},
        {"threads": 2, "x_peer": 3.0, "x_peer_min": 3.0, "weight_bytes": big, "ours_scaling": 1.71},
        {"threads": 2, "x_peer": 3.0, "x_peer_min": 3.0, "weight_bytes": small, "ours_scaling": 1.0},
    ]
    bench_linear._summary(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("bench linear: 1 thread(s): x bnc geomean 1.00 over 2 rows")
    assert out[0].endswith("of the fastest calls 2.00") and "scaling" not in out[0]
    assert "x bnc geomean 3.00 over 3 rows" in out[1] and out[1].endswith("scaling < 1.7 on 1 of 2 rows")
