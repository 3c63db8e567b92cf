"""``python -m bitnet_go bench`` / ``demo``: bad options refused up front, results kept on Ctrl-C or errors.

Nothing here times anything: every bench suite's ``run`` is replaced (a refused option must not
reach it), and the cases that run the command give it fake rows.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import bitnet_go
from bitnet_go import __main__ as cli
from bitnet_go.__main__ import build_parser, main
from bitnet_go.bench import SUITES, _common

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

# (argv, a distinctive part of the error line); "{tmp}" is a temporary directory
REFUSED: list[tuple[str, str]] = [
    # --threads: whole numbers in [1, 1024]
    ("bench quantize --threads abc", "argument --threads: 'abc' is not a whole number"),
    ("bench quantize --threads 0", "argument --threads: '0' is out of range: want 1 to 1024"),
    ("bench quantize --threads -1", "argument --threads: '-1' is out of range: want 1 to 1024"),
    ("bench quantize --threads 99999", "argument --threads: '99999' is out of range: want 1 to 1024"),
    ("bench quantize --threads 1,2.5", "argument --threads: '2.5' is not a whole number"),
    ("bench quantize --threads ,", "argument --threads: no value given"),
    # sizes with K/M/G suffixes, bounded
    ("bench quantize --sizes abc", "argument --sizes: 'abc' is not a size"),
    ("bench quantize --sizes 1.5M", "argument --sizes: '1.5M' is not a size"),
    ("bench quantize --sizes 0", "argument --sizes: '0' is out of range: want 1 to 1G elements"),
    ("bench quantize --sizes -5", "argument --sizes: '-5' is out of range"),
    ("bench quantize --sizes 100G", "argument --sizes: '100G' is out of range: want 1 to 1G elements"),
    ("bench quantize --sizes ,", "argument --sizes: no value given"),
    ("bench quant --quant-sizes 0", "argument --quant-sizes: '0' is out of range"),
    ("bench quant --quant-obs-size abc", "argument --quant-obs-size: 'abc' is not a size"),
    ("bench qops --qelem-sizes abc", "argument --qelem-sizes: 'abc' is not a size"),
    ("bench families --families-size abc", "argument --families-size: 'abc' is not a size"),
    ("bench families --families-size 1M,4M", "argument --families-size: one size wanted, got 2"),
    ("bench quantize --device cuda --cuda-sizes 0", "argument --cuda-sizes: '0' is out of range"),
    ("bench convert --convert-floats 1000", "argument --convert-floats: '1000' is not a multiple of 256"),
    ("bench convert --convert-size 100G", "argument --convert-size: '100G' is out of range: want 0 to 16G bytes"),
    # positive counts
    ("bench quantize --repeat 0", "argument --repeat: '0' is out of range: want at least 1"),
    ("bench quantize --repeat -3", "argument --repeat: '-3' is out of range: want at least 1"),
    ("bench quantize --repeat abc", "argument --repeat: 'abc' is not a whole number"),
    ("bench quantize --block-size 0", "argument --block-size: '0' is out of range"),
    ("bench quantize --block-size 2000000000", "argument --block-size: '2000000000' is out of range"),
    ("bench quantize --device cuda --cuda-block-sizes -1", "argument --cuda-block-sizes: '-1' is out of range"),
    ("bench linear --linear-rounds 0", "argument --linear-rounds: '0' is out of range"),
    ("bench families --families-rounds 0", "argument --families-rounds: '0' is out of range"),
    ("bench quant --quant-obs-batches 0", "argument --quant-obs-batches: '0' is out of range"),
    ("bench convert --convert-repeat 0", "argument --convert-repeat: '0' is out of range"),
    # batch lists
    ("bench linear --linear-batches 0", "argument --linear-batches: '0' is out of range"),
    ("bench conv --conv-batches 0", "argument --conv-batches: '0' is out of range"),
    ("bench conv --device cuda --cuda-batches x", "argument --cuda-batches: 'x' is not a whole number"),
    ("bench qops --qops-batches 0", "argument --qops-batches: wants positive counts like 1,8,64 or 'none'"),
    # shapes
    ("bench linear --linear-shapes abc", "argument --linear-shapes: 'abc' is not a shape: want ROWSxK"),
    ("bench linear --linear-shapes 4096x", "argument --linear-shapes: '4096x': '' is not a whole number"),
    ("bench linear --linear-shapes 0x128", "argument --linear-shapes: '0x128': '0' is out of range"),
    ("bench linear --linear-shapes 65536x65536", "argument --linear-shapes: '65536x65536' is out of range"),
    ("bench linear --linear-shapes 128x100", "--linear-shapes: k must be a multiple of 128"),
    ("demo --shape abc", "argument --shape: 'abc' is not a whole number"),
    ("demo --shape 4,,4", "argument --shape: '4,,4' has an empty dimension"),
    ("demo --shape 0,4", "argument --shape: '0' is out of range"),
    ("demo --shape 100000,100000", "argument --shape: '100000,100000' is out of range: want 1 to 1G elements"),
    ("demo --block-size 0", "argument --block-size: '0' is out of range"),
    # names
    ("bench quant --quant-parts foo", "argument --quant-parts: unknown part 'foo' (choose from qdq, observers)"),
    (
        "bench quant --quant-dtypes int3",
        "argument --quant-dtypes: unknown dtype 'int3' (choose from int8, uint8, int4)",
    ),
    ("bench qops --qelem-ops mul", "--qelem-ops: unknown element-wise op 'mul' (choose from add, add_relu, "),
    ("bench qops --qelem-ops ,", "--qelem-ops: no value given"),
    (
        "bench conv --conv-layers nosuch",
        "--conv-layers: no layer of the suite starts with 'nosuch' (its layers: conv3x3",
    ),
    ("bench --quick conv --conv-layers conv3x3", "--conv-layers: no layer of --conv-quick starts with 'conv3x3'"),
    ("bench families --families-ops nosuch", "--families-ops: unknown op 'nosuch' (registered: "),
    ("bench conv --conv-depthwise --device cuda", "--conv-depthwise: the GPU suite (--device cuda) has no depthwise"),
    # output paths, checked before any suite runs
    ("bench quantize --json /nonexistent/d/x.json", "--json: directory '/nonexistent/d' does not exist"),
    ("bench quantize --json {tmp}", "--json: '{tmp}' is a directory"),
    ("bench conv --plot /nonexistent/d/x.png", "--plot: directory '/nonexistent/d' does not exist"),
    ("bench quantize --plot {tmp}/x.png", "--plot: only the conv suite draws a plot, not quantize"),
    ("bench conv --device cuda --plot {tmp}/x.png", "--plot: draws the CPU rows; --device cuda has no plot"),
    # external tools given on the command line
    ("bench convert --bitnet-converter /nonexistent.py", "--bitnet-converter: '/nonexistent.py' is not a file"),
    ("bench convert --bitnet-converter {tmp} --bitnet-wrapper /no/w.py", "--bitnet-converter: '{tmp}' is not a file"),
    ("bench convert --convert-dir /nonexistent/d", "--convert-dir: '/nonexistent/d' is not a writable directory"),
    ("bench linear --bitnet-cpp /nonexistent.so", "--bitnet-cpp: cannot load /nonexistent.so"),
    # the suite name, and an unknown option
    ("bench nosuch", "argument SUITE: invalid choice: 'nosuch'"),
    ("bench quantize --no-such-option", "unrecognized arguments: --no-such-option"),
]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[argparse.Namespace]]:
    """Every suite's ``run`` replaced: it records its arguments and returns one fake row (no timing)."""
    calls: dict[str, list[argparse.Namespace]] = {name: [] for name in SUITES}
    for name, modname in SUITES.items():

        def fake(args: argparse.Namespace, name: str = name) -> list[dict[str, Any]]:
            calls[name].append(argparse.Namespace(**vars(args)))
            return [{"suite": name}]

        monkeypatch.setattr(importlib.import_module(modname), "run", fake)
    monkeypatch.setattr(_common, "settle_allocator", lambda: None)
    return calls


def _argv(line: str, tmp: Path) -> list[str]:
    return line.replace("{tmp}", str(tmp)).split()


@pytest.mark.parametrize(("line", "message"), REFUSED, ids=[line for line, _ in REFUSED])
def test_bad_option_is_one_argparse_error(
    line: str, message: str, runs: dict[str, list[argparse.Namespace]], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as e:
        main(_argv(line, tmp_path))
    assert e.value.code == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert "Traceback" not in err and out == ""
    assert lines[0].startswith("usage: ") and len(lines) == 2, err  # the usage line, then the one-line error
    assert "error: " in lines[1] and message.replace("{tmp}", str(tmp_path)) in lines[1], lines[1]
    assert all(not calls for calls in runs.values())  # refused before any suite ran


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_plot_format_is_checked_up_front(runs: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "conv", "--plot", str(tmp_path / "x.foo")])
    assert e.value.code == 2 and "--plot: matplotlib cannot write .foo files (it writes " in capsys.readouterr().err
    assert not runs["conv"]


def test_max_threads_is_the_librarys() -> None:
    assert _common.MAX_THREADS == bitnet_go.cpu_features()["max_threads"]


def test_valid_values_keep_their_syntax() -> None:
    args = build_parser().parse_args(
        ["bench", "--threads", " 1, 2,", "--sizes", "1k,16M,,1000", "--linear-shapes", "4096X4096, 2560x6912"]
    )
    assert args.threads == " 1, 2," and _common.parse_threads(args.threads) == [1, 2]  # the text, parsed when run
    assert _common.parse_sizes(args.sizes) == [1024, 16 << 20, 1000]
    assert _common.parse_shapes(args.linear_shapes) == [(4096, 4096), (2560, 6912)]
    args = build_parser().parse_args(["bench", "--cuda-block-sizes", "none,0,128", "--convert-floats", "0"])
    assert _common.parse_block_sizes(args.cuda_block_sizes) == [None, None, 128]
    assert build_parser().parse_args(["demo", "--shape", "64, 128", "--block-size", "32"]).block_size == 32
    assert build_parser().parse_args(["bench", "qops", "--qops-batches", "none"]).qops_batches == "none"


def test_version(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == bitnet_go.__version__


def test_prog_is_the_name_run_by(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/local/bin/bitnet-go"])
    assert build_parser().prog == "bitnet-go"
    monkeypatch.setattr(sys, "argv", [cli.__file__])  # python -m bitnet_go
    assert build_parser().prog == "python -m bitnet_go"


def test_quick_keeps_the_options_given(runs: dict[str, list[argparse.Namespace]]) -> None:
    assert main(["bench", "quantize", "--quick", "--sizes", "4K", "--threads", "2"]) == 0
    (args,) = runs["quantize"]
    assert (args.sizes, args.threads, args.repeat) == ("4K", "2", 1)
    # given, even where equal to the default; and what --quick sets otherwise
    assert main(["bench", "linear", "--quick", "--threads", "1,2", "--repeat", "7", "--linear-batches", "1,8,64"]) == 0
    (args,) = runs["linear"]
    assert (args.threads, args.repeat, args.linear_batches) == ("1,2", 7, "1,8,64")
    assert (args.linear_shapes, args.linear_rounds) == ("128x128", 1)


def test_quick_batches_give_way_to_the_options(runs: dict[str, list[argparse.Namespace]]) -> None:
    from bitnet_go.bench import conv, qops

    assert main(["bench", "conv", "qops", "--quick", "--conv-batches", "8", "--qops-batches", "2,4"]) == 0
    assert conv._batches(runs["conv"][0]) == [8] and qops._batches(runs["qops"][0].qops_batches) == [2, 4]
    assert conv._batches(argparse.Namespace(conv_quick=True, conv_batches=None)) == [1]
    assert conv._batches(argparse.Namespace(conv_quick=False, conv_batches=None)) == [1, 8]


def test_each_suite_runs_once(runs: dict[str, list[argparse.Namespace]], tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert main(["bench", "quantize", "linear", "quantize", "--families", "--json", str(path)]) == 0
    assert [len(runs[n]) for n in ("quantize", "linear", "families")] == [1, 1, 1]
    assert list(json.loads(path.read_text())["suites"]) == ["quantize", "linear", "families"]


@pytest.mark.parametrize("suite", ["quant", "qops", "families", "convert"])
def test_cuda_on_a_cpu_only_suite_is_said(suite: str, runs: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", suite, "quantize", "--device", "cuda"]) == 0
    err = capsys.readouterr().err
    assert f"bench: --device cuda: the {suite} suite runs on the CPU only\n" in err and "quantize" not in err
    assert runs[suite] and runs["quantize"]


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_plot_with_a_suite_that_cannot_is_said(
    runs: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from bitnet_go.bench import conv

    drawn: list[str] = []
    monkeypatch.setattr(conv, "plot", lambda rows, path: drawn.append(path))
    assert main(["bench", "quantize", "conv", "--plot", str(tmp_path / "c.png")]) == 0
    assert "bench: --plot draws the conv suite only; quantize draw no plot" in capsys.readouterr().err
    assert drawn == [str(tmp_path / "c.png")]


def _stop_in_linear(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """linear's run: one row measured (its table not printed yet), then ``error``."""
    from bitnet_go.bench import linear

    def run(args: argparse.Namespace) -> list[dict[str, Any]]:
        table = _common.Table("linear so far", [("n", "N", "d")], total=4)
        table.add({"n": 1})
        raise error

    monkeypatch.setattr(linear, "run", run)


def test_ctrl_c_keeps_what_finished(
    runs: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _stop_in_linear(monkeypatch, KeyboardInterrupt())
    path = tmp_path / "r.json"
    assert main(["bench", "quantize", "linear", "conv", "--json", str(path)]) == 130
    out, err = capsys.readouterr()
    assert "Traceback" not in err and err.endswith(
        f"\nbench: interrupted in linear; {path} holds the suites that finished (quantize) and 1 row of linear\n"
    )
    assert "linear so far" in out and "stopped early (Ctrl-C): 1 of 4 rows" in out  # the rows so far, printed
    doc = json.loads(path.read_text())
    assert doc["suites"] == {"quantize": [{"suite": "quantize"}]}
    assert doc["unfinished"] == {"suite": "linear", "reason": "interrupted", "rows": [{"n": 1}]}
    assert not runs["conv"]


def test_ctrl_c_with_nothing_finished_writes_nothing(
    runs: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from bitnet_go.bench import quantize

    def interrupted(args: argparse.Namespace) -> list[dict[str, Any]]:
        raise KeyboardInterrupt

    monkeypatch.setattr(quantize, "run", interrupted)
    path = tmp_path / "r.json"
    assert main(["bench", "quantize", "--json", str(path)]) == 130
    assert capsys.readouterr().err == f"bench: interrupted in quantize; nothing finished, {path} not written\n"
    assert not path.exists()
    assert main(["bench", "quantize"]) == 130 and capsys.readouterr().err == "bench: interrupted in quantize\n"


def test_an_error_in_a_later_suite_keeps_the_json(
    runs: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _stop_in_linear(monkeypatch, RuntimeError("boom\nsecond line"))
    path = tmp_path / "r.json"
    with pytest.raises(RuntimeError, match="boom"):  # a suite's error keeps its traceback
        main(["bench", "quantize", "linear", "--json", str(path)])
    assert f"bench: stopped by an error in linear; {path} holds the suites that finished (quantize)" in (
        capsys.readouterr().err
    )
    doc = json.loads(path.read_text())
    assert list(doc["suites"]) == ["quantize"] and doc["unfinished"]["reason"] == "RuntimeError: boom"
    assert _common.MIN_TIME == 0.0  # restored


def test_demo_ctrl_c_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import bitnet_go.demo

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(bitnet_go.demo, "main", interrupted)
    assert main(["demo", "--shape", "8,8"]) == 130
    assert capsys.readouterr().err == "demo: interrupted\n"


def test_demo_without_torch_says_demo(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import bitnet_go.demo

    said: list[str] = []
    monkeypatch.setattr(bitnet_go.demo, "torch_or_none", lambda missing: said.append(missing))
    assert main(["demo", "--shape", "16,16"]) == 0
    assert len(said) == 1 and said[0].startswith("demo: torch is not installed") and "columns" not in said[0]
    assert "weight: 16x16 float32" in capsys.readouterr().out
