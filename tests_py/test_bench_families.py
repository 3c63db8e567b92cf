"""The ``bench families`` suite: every family of every op timed, and dispatch's pick within 10% of the best.

The timing test runs the suite at its quick sizes on the machine running the
tests: for every op, the family ``cpu_features()["kernels"]`` reports must be
one whose score (geometric mean of median ms over the op's workloads) is
within ``TOLERANCE`` of the fastest family's. On a noisy machine an op that
misses is measured again, up to twice, with more rounds each time, before
the test fails (families within a few percent of each other, as conv_dw's
avx512 and avx2 on Zen 4, once missed twice in a row by noise alone: 1.19x).
"""

from __future__ import annotations

import pytest

import bitnet_go
from bitnet_go.__main__ import build_parser
from bitnet_go.bench import SUITES
from bitnet_go.bench import families as bf


def test_registered_and_flag() -> None:
    assert SUITES["families"] == "bitnet_go.bench.families"
    args = build_parser().parse_args(["bench", "--families", "--families-quick", "--threads", "2"])
    assert args.families and args.suites == [] and args.families_quick
    assert build_parser().parse_args(["bench", "families"]).suites == ["families"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "no_such_suite"])


def test_every_op_has_workloads() -> None:
    feats = bitnet_go.cpu_features()
    for op in feats["kernels"]:
        assert bf.workloads(op, True, 1 << 20), f"bench families has no workload for op {op}"
        assert bf.workloads(op, False, 1 << 20), f"bench families has no workload for op {op}"
        fams = feats["kernel_families"][op]
        assert fams[0] == "generic" and set(fams) <= set(bf.FAMILIES)
        assert feats["kernels"][op] in fams, (op, feats["kernels"][op], fams)
        assert feats["kernel_reasons"][op]


def test_disable_above() -> None:
    assert bf._disable_above("avx512vnni", []) == ""
    assert bf._disable_above("avx512", []) == "avx512vnni"
    assert bf._disable_above("avx2", ["avx2"]) == "avx2,avx512vnni,avx512"
    assert bf._disable_above("generic", []) == "all"


def _verdicts(ops: list[str] | None, rounds: int) -> dict[str, dict]:
    rows = bf.measure(
        ops, threads=[bitnet_go.get_num_threads()], rounds=rounds, repeat=5, quick=True, size=4 << 20, max_s=0.5
    )
    for r in rows:
        if r["row"] == "workload":
            fams = bitnet_go.cpu_features()["kernel_families"][r["op"]]
            assert all(r[f"{f}_ms"] > 0 for f in fams), r
    return {r["op"]: r for r in rows if r["row"] == "op"}


def test_pick_within_tolerance_of_best(capsys: pytest.CaptureFixture[str]) -> None:
    feats = bitnet_go.cpu_features()
    got = _verdicts(None, rounds=3)
    assert set(got) == set(feats["kernels"])
    for rounds in (5, 9):  # a noisy machine: measure the ops that missed again, longer, before failing
        missed = [op for op, r in got.items() if not r["ok"]]
        if not missed:
            break
        got.update(_verdicts(missed, rounds=rounds))
    bad = {
        op: (r["pick"], r["fastest"], round(r["pick_over_best"] or 0, 3), {f: r[f"{f}_score"] for f in r["families"]})
        for op, r in got.items()
        if not r["ok"]
    }
    with capsys.disabled():
        for op, r in sorted(got.items()):
            print(f"\n{op}: pick {r['pick']} fastest {r['fastest']} pick/best {r['pick_over_best']:.2f}", end="")
    assert not bad, f"dispatch picks a family more than {bf.TOLERANCE:.0%} slower than the best here: {bad}"
