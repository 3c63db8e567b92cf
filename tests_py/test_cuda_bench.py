"""``bench conv --device cuda`` and ``bench linear --device cuda``: arguments, the refusal without a GPU, a GPU run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import bitnet_go.cuda as cuda
from bitnet_go.__main__ import build_parser, main
from bitnet_go.bench import conv_cuda

REASON = cuda.unavailable_reason()
gpu = pytest.mark.skipif(REASON is not None, reason=f"no CUDA GPU found, GPU test not run: {REASON}")


def test_arguments() -> None:
    a = build_parser().parse_args(["bench", "conv", "--device", "cuda", "--cuda-batches", "1,32"])
    assert a.device == "cuda" and a.cuda_batches == "1,32" and a.suites == ["conv"]
    assert build_parser().parse_args(["bench", "conv"]).cuda_batches == conv_cuda.DEFAULT_BATCHES == "1,32"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "linear", "--device", "tpu"])


@pytest.mark.parametrize("suite", ["conv", "linear"])
def test_refuses_without_gpu(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], suite: str) -> None:
    monkeypatch.setattr(conv_cuda.cuda, "unavailable_reason", lambda: "cuda: no NVIDIA driver (test)")
    assert main(["bench", suite, "--device", "cuda", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert f"bench {suite} --device cuda: no CUDA GPU found, nothing measured (cuda: no NVIDIA driver (test))" in out
    rows = (
        conv_cuda.run_conv(argparse.Namespace(repeat=1), [])
        if suite == "conv"
        else (conv_cuda.run_linear(argparse.Namespace(repeat=1), [(8, 128)], [1]))
    )
    assert rows == []


def test_read_bytes() -> None:
    # 4096x4096 at batch 1: 4 MiB of codes, one scale per row, x 4096 float32 read twice and int8 once, a bias
    assert conv_cuda.read_bytes(1, 4096, 1, 1, 4096, 1, 1, 4096, True) == (
        4096 * 4096 // 4 + 4 * 4096 + 8 * 4096 + 4096 + 4 * 4096
    )
    # a 3x3 convolution with groups: the weight is O x C/groups x 3 x 3, packed in groups of 128
    assert conv_cuda.read_bytes(2, 8, 5, 5, 6, 3, 2, 1, False) == 32 * 2 + 4 + 9 * 2 * 8 * 25


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("suite", ["conv", "linear"])
def test_runs_on_gpu(suite: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["bench", suite, "--device", "cuda", "--repeat", "3", "--conv-quick", "--conv-layers", "quick"]
    argv += ["--linear-shapes", "256x512,100x37", "--linear-batches", "1,3", "--json", str(tmp_path / "r.json")]
    assert main(argv) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["suites"][suite]
    assert len(rows) == (3 if suite == "conv" else 4)
    for r in rows:
        assert r["a8_ms"] > 0 and r["f32_ms"] > 0 and r["fp16_ms"] > 0 and r["copy_gbs"] > 0
    assert "target >=" in capsys.readouterr().out
