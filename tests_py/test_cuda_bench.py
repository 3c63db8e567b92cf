"""``bench conv --device cuda`` and ``bench linear --device cuda``: arguments, the refusal without a GPU, a GPU run."""

from __future__ import annotations

import argparse

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
    run = conv_cuda.run_conv if suite == "conv" else conv_cuda.run_linear
    assert run(argparse.Namespace(repeat=1)) == []


def test_layers_and_bytes() -> None:
    quick = conv_cuda.conv_layers(argparse.Namespace(conv_quick=True, conv_layers=""))
    assert [ly[0] for ly in quick] == ["quick3x3 8->8 @12", "quick1x1 16->8 @10", "quickgemv 256->256 @1"]
    assert conv_cuda.conv_layers(argparse.Namespace(conv_quick=False, conv_layers="conv1x1,gemv1x1 1024"))[0][0] == (
        "conv1x1 256->64 @56"
    )
    # 4096x4096 at batch 1: 4 MiB of codes, one scale per row, x 4096 float32 read twice and int8 once, a bias
    assert conv_cuda.read_bytes(1, 4096, 1, 1, 4096, 1, 1, 4096, True) == (
        4096 * 4096 // 4 + 4 * 4096 + 8 * 4096 + 4096 + 4 * 4096
    )
    # a 3x3 convolution with groups: the weight is O x C/groups x 3 x 3, packed in groups of 128
    assert conv_cuda.read_bytes(2, 8, 5, 5, 6, 3, 2, 1, False) == 32 * 2 + 4 + 9 * 2 * 8 * 25


@gpu
@pytest.mark.needs("torch")
@pytest.mark.parametrize("suite", ["conv", "linear"])
def test_runs_on_gpu(suite: str, capsys: pytest.CaptureFixture[str]) -> None:
    a = build_parser().parse_args(["bench", suite, "--device", "cuda", "--repeat", "3", "--conv-quick",
                                   "--linear-shapes", "256x512", "--linear-batches", "1,3"])  # fmt: skip
    rows = conv_cuda.run_conv(a) if suite == "conv" else conv_cuda.run_linear(a)
    assert len(rows) == (3 if suite == "conv" else 2)
    for r in rows:
        assert r["a8_ms"] > 0 and r["f32_ms"] > 0 and r["fp16_ms"] > 0 and r["copy_gbs"] > 0
    assert "target >=" in capsys.readouterr().out
