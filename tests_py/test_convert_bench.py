"""The ``bench convert`` suite at tiny sizes: its rows, the generated checkpoint, and bitnet.cpp's converter
through ``tools/bitnet_cpp_convert/run_converter.py`` when ``BITNET_CONVERTER`` names it (not timings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go.__main__ import apply_quick, build_parser
from bitnet_go.bench import SUITES
from bitnet_go.bench import convert as bench_convert
from bitnet_go.convert import convert_checkpoint, load_checkpoint
from bitnet_go.convert._reader import read_header


def test_suite_is_registered_with_quick_options() -> None:
    assert SUITES["convert"] == "bitnet_go.bench.convert"
    args = build_parser().parse_args(["bench", "convert", "--quick"])
    apply_quick(args, ["convert"])
    assert (args.convert_floats, args.convert_size, args.convert_repeat, args.threads) == ("1M", "4M", 1, "1")


@pytest.mark.parametrize("size", [1 << 20, 5 << 20])
def test_generated_checkpoint(tmp_path: Path, size: int) -> None:
    nbytes = bench_convert.make_checkpoint(tmp_path, size, seed=3)
    entries, _ = read_header(tmp_path / "model.safetensors")
    assert nbytes == (tmp_path / "model.safetensors").stat().st_size
    h, ff, heads, vocab, layers = bench_convert._dims(size)
    layer = 2 * (4 * h * h + 3 * h * ff + 2 * h + ff)
    assert abs(nbytes - size) <= layer  # the size asked, to a whole layer (at least one)
    assert {e.dtype for e in entries.values()} == {"BF16"}
    assert entries["model.embed_tokens.weight"].shape == (vocab, h)
    assert entries[f"model.layers.{layers - 1}.mlp.down_proj.weight"].shape == (h, ff)
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["BitnetForCausalLM"] and cfg["num_hidden_layers"] == layers
    out = tmp_path / "o.safetensors"
    convert_checkpoint(tmp_path, out, progress=False)
    got = load_checkpoint(out)
    raw = np.memmap(tmp_path / "model.safetensors", np.uint16, mode="r")
    e = entries["model.layers.0.self_attn.q_proj.weight"]
    w = (raw[e.begin // 2 : e.end // 2].astype(np.uint32) << 16).view(np.float32).reshape(e.shape)
    assert np.all(np.isfinite(w)) and 0.01 < float(np.abs(w).mean()) < 0.03  # scaled like a trained weight
    want = bitnet_go.quantize_i2s(w)
    assert got["model.layers.0.self_attn.q_proj.weight"].packed.tobytes() == want.packed.tobytes()


@pytest.mark.needs("gguf")
def test_quick_run_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["bench", "convert", "--quick", "--convert-dir", str(tmp_path)])
    apply_quick(args, ["convert"])
    args.convert_floats = "64K"
    rows = bench_convert.run(args)
    tq = [r for r in rows if r["part"] == "tq"]
    assert [(r["format"], r["threads"]) for r in tq] == [("tq2_0", 1), ("tq1_0", 1)]
    assert all(r["same"] is True and r["ours_ms"] > 0 and r["gguf_ms"] > 0 for r in tq)
    steps = [r["step"] for r in rows if r["part"] == "checkpoint"]
    assert steps == ["cat IN > /dev/null", "bitnet_go i2_s gguf", "bitnet_go tq2_0 gguf"]
    ck = {r["step"]: r for r in rows if r["part"] == "checkpoint"}
    assert ck["bitnet_go i2_s gguf"]["out_bytes"] < ck["cat IN > /dev/null"]["bytes"]
    assert os.listdir(tmp_path) == []  # the checkpoint and outputs are removed
    out = capsys.readouterr().out
    assert "converting a generated bf16 checkpoint to GGUF" in out and "gguf.quants.quantize" in out


@pytest.mark.needs("gguf", "torch")
def test_bitnet_cpp_converter_row(tmp_path: Path) -> None:
    """bitnet.cpp's converter on the generated checkpoint: its I2_S bytes against ours. Set BITNET_CONVERTER to
    a microsoft/BitNet checkout's utils/convert-hf-to-gguf-bitnet.py and BITNET_PYTHONPATH to its gguf-py and a
    directory with sentencepiece (see tools/bitnet_cpp_convert/run_converter.py)."""
    conv = os.environ.get("BITNET_CONVERTER")
    if not conv:
        pytest.skip("set BITNET_CONVERTER (and BITNET_PYTHONPATH) to run bitnet.cpp's converter")
    argv = ["bench", "convert", "--quick", "--convert-floats", "0", "--convert-dir", str(tmp_path),
            "--bitnet-converter", conv]  # fmt: skip
    if os.environ.get("BITNET_PYTHONPATH"):
        argv += ["--bitnet-pythonpath", os.environ["BITNET_PYTHONPATH"]]
    args = build_parser().parse_args(argv)
    apply_quick(args, ["convert"])
    args.convert_floats = "0"
    rows = {r["step"]: r for r in bench_convert.run(args)}
    theirs, ours = rows["bitnet.cpp i2_s gguf"], rows["bitnet_go i2_s gguf"]
    n, total = (int(v) for v in theirs["same"].split("/"))
    assert n == total == 7 * bench_convert._dims(4 << 20)[4]  # every projection: the same ternary values
    assert theirs["scale_diff"] < 1e-6  # the scale: mean |w|, rounded through 1/mean by bitnet.cpp
    assert theirs["out_bytes"] == ours["out_bytes"]
