"""bench conv's summary lines: the geomeans against issue 15's targets."""

from __future__ import annotations

import math

import pytest

from bitnet_go.bench.conv import ISSUE15_ROWS, TARGETS, summary_lines


def _row(
    layer: str, n: int, threads: int, ours_i8: float, ours_f32: float, torch_f32: float, torch_i8: float | None
) -> dict:
    r = {
        "layer": layer,
        "n": n,
        "threads": threads,
        "ours_i8_ms": ours_i8,
        "ours_f32_ms": ours_f32,
        "torch_f32_ms": torch_f32,
    }
    if torch_i8 is not None:
        r["torch_i8_ms"] = torch_i8
    return r


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_summary_geomeans_and_verdicts(seed: int) -> None:
    """Random times per row (seeded): each line's geomeans are those of torch ms / ours ms over
    its rows (GEMV-like rows left out, issue 15's five rows apart), per thread count, with the
    verdict against each target."""
    import random

    rng = random.Random(seed)
    layers = [(name, n) for name, n in sorted(ISSUE15_ROWS)] + [("conv1x1 64->256 @56", 1), ("stem7x7/2 3->64 @224", 8)]
    rows = []
    for th in (1, 2):
        for name, n in layers + [("gemv1x1 4096->4096 @1", 1)]:
            rows.append(
                _row(name, n, th, rng.uniform(0.1, 1), rng.uniform(0.5, 2), rng.uniform(0.5, 4), rng.uniform(0.2, 2))
            )
    lines = summary_lines(rows)
    assert len(lines) == 4, lines
    for th, line_all, line_named in ((1, lines[0], lines[1]), (2, lines[2], lines[3])):
        conv = [r for r in rows if r["threads"] == th and not r["layer"].startswith("gemv")]
        named = [r for r in conv if (r["layer"], r["n"]) in ISSUE15_ROWS]
        assert len(conv) == len(layers) and len(named) == 5
        for line, sub, what in ((line_all, conv, "conv rows"), (line_named, named, "of issue 15's rows")):
            assert line.startswith(f"bench conv: {th} thread(s), {len(sub)} {what}: "), line
            for label, theirs, ours, target in TARGETS:
                gm = math.exp(sum(math.log(r[theirs] / r[ours]) for r in sub) / len(sub))
                verdict = "yes" if gm >= target else "no"
                assert f"{label} {gm:.2f} (>= {target:g}: {verdict})" in line, (label, line)


def test_summary_digits_at_the_target() -> None:
    """A geomean just under its target shows the digits that keep it under: never "3.00 (>= 3: no)"."""
    r = _row("conv3x3 64->64 @56", 1, 2, 1.0, 1.0, 2.9996, 2.0)
    line = summary_lines([r])[0]
    assert "i8 x torch f32 2.9996 (>= 3: no)" in line, line
    r2 = _row("conv3x3 64->64 @56", 1, 2, 1.0, 1.0, 3.0004, 2.0)
    assert "i8 x torch f32 3.00 (>= 3: yes)" in summary_lines([r2])[0]
    mixed = [r, _row("conv1x1 64->256 @56", 1, 2, 1.0, 1.0, 1.0, None)]
    assert "i8 x torch i8 2.00 [1] (>= 1.5: yes)" in summary_lines(mixed)[0]


def test_summary_without_torch_int8_or_rows() -> None:
    """A row without torch's int8 time leaves that ratio out; no torch times at all, no line."""
    r = _row("conv3x3 64->64 @56", 1, 2, 0.5, 1.0, 1.0, None)
    (line, named) = summary_lines([r])
    assert (
        "i8 x torch i8" not in line
        and "i8 x torch f32 2.00 (>= 3: no)" in line
        and "f32 x torch f32 1.00 (>= 1: yes)" in line
    )
    assert named.startswith("bench conv: 2 thread(s), 1 of issue 15's rows:")
    bare = {"layer": "conv3x3 64->64 @56", "n": 1, "threads": 2, "ours_i8_ms": 0.5, "ours_f32_ms": 1.0}
    assert summary_lines([bare]) == []
    assert summary_lines([]) == []


@pytest.mark.parametrize("table", [[], ["--conv-depthwise"]])
def test_rows_time_ours_and_torch_in_alternating_rounds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table: list[str]
) -> None:
    """Ours (f32, int8) and torch's (f32, int8) go through one alternate() call per row, in rounds,
    in the ResNet table and in the depthwise one."""
    torch = pytest.importorskip("torch")
    assert torch is not None
    from bitnet_go.__main__ import main
    from bitnet_go.bench import conv

    calls: list[tuple[list[str], int, int]] = []
    real = conv.alternate

    def spy(fns, *, repeat: int, rounds: int, min_time=None):  # noqa: ANN001, ANN202 (a test double)
        calls.append((list(fns), repeat, rounds))
        return real(fns, repeat=repeat, rounds=rounds, min_time=min_time)

    monkeypatch.setattr(conv, "alternate", spy)
    layers = [] if table else ["--conv-layers", "quick3x3"]
    assert main(["bench", "conv", "--conv-quick", "--conv-no-mem", "--threads", "1", "--repeat", "3",
                 "--conv-rounds", "2", *layers, *table]) == 0  # fmt: skip
    capsys.readouterr()
    assert calls, "no row was timed through alternate()"
    for names, repeat, rounds in calls:
        assert names[:3] == ["ours_f32", "ours_i8", "torch_f32"] and (repeat, rounds) == (3, 2)
