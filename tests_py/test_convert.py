"""``bitnet-go convert``: safetensors checkpoints to ternary safetensors and GGUF, and back.

Checkpoints are built in tmp_path with the safetensors package (a LLaMA-like
model with config.json, a sharded one, a transformers-packed BitNet one);
nothing is downloaded. Every round trip compares with quantizing the same
float tensors directly, on fresh random data per case (seed in the test id).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go import _hfpack
from bitnet_go.__main__ import main
from bitnet_go.convert import ConfigError, _gguf, convert_checkpoint, load_checkpoint
from bitnet_go.convert._reader import read_header
from bitnet_go.convert._writer import write_safetensors_header

PY_SRC = str(Path(bitnet_go.__file__).resolve().parent.parent)

H, FF, HEADS, KV, LAYERS, VOCAB = 256, 512, 4, 2, 2, 48
PROJ = {
    "self_attn.q_proj": (H, H),
    "self_attn.k_proj": (H * KV // HEADS, H),
    "self_attn.v_proj": (H * KV // HEADS, H),
    "self_attn.o_proj": (H, H),
    "mlp.gate_proj": (FF, H),
    "mlp.up_proj": (FF, H),
    "mlp.down_proj": (H, FF),
}
GGUF_PROJ = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def config(arch: str = "LlamaForCausalLM", **extra: object) -> dict[str, object]:
    c: dict[str, object] = {
        "architectures": [arch],
        "hidden_size": H,
        "intermediate_size": FF,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "num_hidden_layers": LAYERS,
        "vocab_size": VOCAB,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
    }
    c.update(extra)
    return c


def model_tensors(seed: int, bitnet: bool = False) -> dict[str, np.ndarray]:
    """A LLaMA-like (or BitNet b1.58) state dict, float32, fresh random values."""
    rng = np.random.default_rng(seed)
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": rng.standard_normal((VOCAB, H)).astype(np.float32)}
    for i in range(LAYERS):
        for proj, shape in PROJ.items():
            t[f"model.layers.{i}.{proj}.weight"] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        t[f"model.layers.{i}.input_layernorm.weight"] = rng.random(H).astype(np.float32)
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = rng.random(H).astype(np.float32)
        if bitnet:
            t[f"model.layers.{i}.self_attn.attn_sub_norm.weight"] = rng.random(H).astype(np.float32)
            t[f"model.layers.{i}.mlp.ffn_sub_norm.weight"] = rng.random(FF).astype(np.float32)
        else:
            t[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = rng.random(H // HEADS // 2).astype(np.float32)
    t["model.norm.weight"] = rng.random(H).astype(np.float32)
    if not bitnet:
        t["lm_head.weight"] = rng.standard_normal((VOCAB, H)).astype(np.float32)
    return t


def save_model(d: Path, tensors: dict[str, np.ndarray], cfg: dict[str, object] | None, tokenizer: bool = True) -> Path:
    """The checkpoint directory: model.safetensors, config.json (unless ``cfg`` is None) and, with a config and
    ``tokenizer``, a small byte-level BPE tokenizer (tokenizer.json, tokenizer_config.json)."""
    from safetensors.numpy import save_file

    d.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(d / "model.safetensors"))
    if cfg is not None:
        (d / "config.json").write_text(json.dumps(cfg))
        if tokenizer:
            write_bpe_tokenizer(d, WORDS)
    return d


# ------------------------------------------------------------------ a small byte-level BPE tokenizer

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
WORDS = ("hello", " world")
SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>", "<|reserved|>")


def byte_chars() -> list[str]:
    """GPT-2's printable stand-in of each byte value 0..255 (bytes outside the printable ranges move to 256+)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def write_bpe_tokenizer(
    d: Path, words: tuple[str, ...], all_bytes: bool = False, pre: dict[str, object] | None = None
) -> dict[str, object]:
    """A Llama 3-style tokenizer.json whose merges build each word left to right; returns its vocab, merges
    and added tokens (ids after the vocab; the first two are bos and eos)."""
    chars = byte_chars()
    enc = ["".join(chars[b] for b in w.encode()) for w in words]
    base = list(chars) if all_bytes else sorted({c for w in enc for c in w})
    vocab: dict[str, int] = {c: i for i, c in enumerate(base)}
    merges: list[str] = []
    for w in enc:
        cur = w[0]
        for c in w[1:]:
            if cur + c not in vocab:
                merges.append(f"{cur} {c}")
                vocab[cur + c] = len(vocab)
            cur += c
    added = [{"id": len(vocab) + i, "content": t, "special": i < 2, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False} for i, t in enumerate(SPECIALS)]  # fmt: skip
    tok = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre if pre is not None else {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False, "vocab": vocab,
                  "merges": merges},
    }  # fmt: skip
    (d / "tokenizer.json").write_text(json.dumps(tok))
    cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": SPECIALS[0], "eos_token": SPECIALS[1]}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    return {"vocab": vocab, "merges": merges, "added": added}


QUANTIZED = {f"model.layers.{i}.{p}.weight" for i in range(LAYERS) for p in PROJ}


# ------------------------------------------------------------------ planning and the CLI


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("seed", [11])
def test_dry_run_lists_what_would_be_converted(tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
    d = save_model(tmp_path / "m", model_tensors(seed), config())
    assert main(["convert", str(d), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    quantized = {ln.split()[0] for ln in lines if ln.endswith("-> i2_s")}
    assert quantized == QUANTIZED  # every projection; not lm_head, embeddings, norms
    assert any(ln.startswith("lm_head.weight  [48, 256]  F32 -> F32") for ln in lines)
    n = len(model_tensors(seed))
    m = re.fullmatch(rf"{len(QUANTIZED)} of {n} tensors would become i2_s \(safetensors\), (\d+) bytes "
                     r"\((\d+\.\d) MiB\); nothing written", lines[-1])  # fmt: skip
    assert m is not None, lines[-1]
    assert sorted(os.listdir(d)) == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]
    out = tmp_path / "o.safetensors"
    assert main(["convert", str(d), "-o", str(out)]) == 0
    assert out.stat().st_size == int(m[1]) and m[2] == f"{int(m[1]) / 2**20:.1f}"  # the size it said
    said = lines[-1][: m.end(2) + 5].replace(" would become", " as")
    assert capsys.readouterr().out.strip() == f"wrote {out}: {said}"

    assert main(["convert", str(d), "--dry-run", "--include", "*.q_proj.weight", "--exclude", "*.1.*"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {ln.split()[0] for ln in out if ln.endswith("-> i2_s")} == {"model.layers.0.self_attn.q_proj.weight"}


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize("seed", [12])
def test_dry_run_gguf_names_and_types(tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
    d = save_model(tmp_path / "m", model_tensors(seed), config())
    assert main(["convert", str(d), "-o", str(tmp_path / "x.gguf"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "model.embed_tokens.weight  [48, 256]  F32 -> F16  as token_embd.weight" in lines
    assert "model.layers.1.mlp.down_proj.weight  [256, 512]  F32 -> i2_s  as blk.1.ffn_down.weight" in lines
    assert "model.norm.weight  [256]  F32 -> F32  as output_norm.weight" in lines
    assert not any("inv_freq" in ln for ln in lines)  # left out of GGUF files
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(
    ("seed", "qtype", "to", "block_size"),
    [(14, "i2_s", "gguf", None), (15, "tq1_0", "gguf", None), (16, "tq2_0", "gguf", None),
     (17, "tl1", "safetensors", 100), (18, "tq1_0", "safetensors", None), (19, "i2_s", "safetensors", 7)],
)  # fmt: skip
def test_dry_run_size_is_the_written_size(
    tmp_path: Path, seed: int, qtype: str, to: str, block_size: int | None
) -> None:
    tensors = model_tensors(seed, bitnet=qtype.startswith("tq"))
    tensors["model.layers.0.mlp.odd_proj.weight"] = np.ones((3, 100), np.float32)  # a TQ misfit: kept as it is
    d = save_model(tmp_path / "m", tensors, config("BitnetForCausalLM") if to == "gguf" else config())
    out = tmp_path / f"o.{to}"
    if to == "gguf":
        del tensors["model.layers.0.mlp.odd_proj.weight"]  # no GGUF name for it
        save_model(d, tensors, config("BitnetForCausalLM"))
    kw: dict[str, object] = {"qtype": qtype, "to": to, "block_size": block_size}
    planned = convert_checkpoint(d, out, dry_run=True, **kw)  # type: ignore[arg-type]
    assert not out.exists()
    written = convert_checkpoint(d, out, progress=False, **kw)  # type: ignore[arg-type]
    assert out.stat().st_size == planned.size == written.size
    assert [p.line() for p in planned] == [p.line() for p in written]


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("seed", [13])
def test_cli_subprocess(tmp_path: Path, seed: int) -> None:
    d = save_model(tmp_path / "m", model_tensors(seed), config())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PY_SRC, os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "o.safetensors"
    r = subprocess.run([sys.executable, "-m", "bitnet_go", "convert", str(d), "-o", str(out), "--format", "tl2",
                        "--threads", "1"], capture_output=True, text=True, env=env, cwd="/")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}: {len(QUANTIZED)} of" in r.stdout
    w = model_tensors(seed)["model.layers.0.mlp.up_proj.weight"]
    t = load_checkpoint(out)["model.layers.0.mlp.up_proj.weight"]
    assert t.packed.tobytes() == bitnet_go.quantize_tl2(w).packed.tobytes()
    r = subprocess.run([sys.executable, "-m", "bitnet_go", "convert", str(tmp_path / "nope"), "-o", str(out), "-f"],
                       capture_output=True, text=True, env=env, cwd="/")  # fmt: skip
    assert r.returncode == 1 and "FileNotFoundError" in r.stderr and "nope" in r.stderr


def test_import_bitnet_go_loads_neither_gguf_nor_safetensors() -> None:
    code = "import sys, bitnet_go; print(sorted(m for m in ('gguf', 'safetensors', 'torch') if m in sys.modules))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PY_SRC, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    assert callable(bitnet_go.load_checkpoint)


# ------------------------------------------------------------------ safetensors output


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize(
    ("seed", "qtype", "method", "block_size"),
    [(21, "i2_s", "absmean", None), (22, "tl1", "absmax", None), (23, "tl2", "absmean", None),
     (24, "i2_s", "absmax", 128), (25, "tl1", "absmean", 100)],
)  # fmt: skip
def test_safetensors_round_trip_is_bit_identical(
    tmp_path: Path, seed: int, qtype: str, method: str, block_size: int | None
) -> None:
    from safetensors import safe_open

    tensors = model_tensors(seed)
    d = save_model(tmp_path / "m", tensors, config())
    out = tmp_path / "o.safetensors"
    args = ["convert", str(d), "-o", str(out), "--format", qtype, "--method", method]
    assert main(args + (["--block-size", str(block_size)] if block_size else [])) == 0
    got = load_checkpoint(out)
    assert set(got) == set(tensors)
    for name, w in tensors.items():
        t = got[name]
        if name in QUANTIZED:
            assert isinstance(t, bitnet_go.TernaryTensor)
            want = bitnet_go.quantize_i2s(w, block_size=block_size, method=method).to(qtype)  # type: ignore[arg-type]
            assert (t.qtype, t.shape, t.block_size, t.method) == (qtype, w.shape, block_size, method)
            assert t.packed.tobytes() == want.packed.tobytes(), name
            assert t.scales.tobytes() == want.scales.tobytes(), name
        else:
            assert isinstance(t, np.ndarray) and t.dtype == w.dtype and np.array_equal(t, w), name
    with safe_open(str(out), "numpy") as f:  # the safetensors package reads the file as it is
        meta = f.metadata()
        assert meta["bitnet_go.checkpoint"] == "1"
        assert set(json.loads(meta["bitnet_go.quantized"])) == QUANTIZED
        name = "model.layers.1.self_attn.k_proj.weight"
        assert f.get_tensor(name + "_packed").tobytes() == got[name].packed.tobytes()
        assert f.get_tensor(name + "_scale").tobytes() == got[name].scales.tobytes()
        assert np.array_equal(f.get_tensor("lm_head.weight"), tensors["lm_head.weight"])


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("seed", [31])
def test_sharded_checkpoint_matches_single_file(tmp_path: Path, seed: int) -> None:
    from safetensors.numpy import save_file

    tensors = model_tensors(seed)
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    d = tmp_path / "sharded"
    d.mkdir()
    for fname, part in shards.items():
        save_file({n: tensors[n] for n in part}, str(d / fname))
    index = {"metadata": {}, "weight_map": {n: f for f, part in shards.items() for n in part}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    single = save_model(tmp_path / "single", tensors, None) / "model.safetensors"
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    convert_checkpoint(d, a, progress=False)
    convert_checkpoint(single, b, progress=False)
    ga, gb = load_checkpoint(a), load_checkpoint(b)
    assert set(ga) == set(gb) == set(tensors)
    for n in tensors:
        x, y = ga[n], gb[n]
        if isinstance(x, bitnet_go.TernaryTensor):
            assert x.packed.tobytes() == y.packed.tobytes() and x.scales.tobytes() == y.scales.tobytes()  # type: ignore[union-attr]
        else:
            assert np.array_equal(x, y)  # type: ignore[arg-type]


@pytest.mark.needs("safetensors", "torch")
@pytest.mark.parametrize("seed", [32])
def test_bf16_input_and_loading_into_nn_layers(tmp_path: Path, seed: int) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from bitnet_go import nn as bnn

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).to(torch.bfloat16)
    save_file(model.state_dict(), str(tmp_path / "in.safetensors"))
    out = tmp_path / "out.safetensors"
    convert_checkpoint(tmp_path / "in.safetensors", out, progress=False)
    got = load_checkpoint(out)
    assert isinstance(got["0.bias"], np.ndarray) and got["0.bias"].dtype == np.float32  # BF16 read exactly
    assert np.array_equal(got["0.bias"], model[0].bias.detach().float().numpy())
    frozen, _ = bnn.convert(model.float(), progress=False)
    for i in (0, 2):
        t = got[f"{i}.weight"]
        want = frozen[i].ternary_weight()
        assert t.packed.tobytes() == want.packed.tobytes() and t.scales.tobytes() == want.scales.tobytes()
    # the file's names are the frozen layers' buffers: it loads as a state dict
    target, _ = bnn.convert(torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)),
                            progress=False)  # fmt: skip
    sd = {k: (v.float() if v.dtype == torch.bfloat16 else v) for k, v in load_file(str(out)).items()}
    target.load_state_dict(sd)
    x = torch.randn(5, 64)
    assert torch.equal(target(x), frozen(x))


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize(("seed", "linear_class"), [(41, "autobitlinear"), (42, "bitlinear")])
def test_hf_packed_checkpoint_keeps_values(tmp_path: Path, seed: int, linear_class: str) -> None:
    rng = np.random.default_rng(seed)
    tensors = model_tensors(seed, bitnet=True)
    values: dict[str, np.ndarray] = {}
    scales: dict[str, np.float32] = {}
    for name in QUANTIZED:
        v = rng.integers(-1, 2, tensors[name].shape).astype(np.int8)
        values[name] = v
        scales[name] = np.float32(rng.random() + 0.1)
        tensors[name] = _hfpack.pack_hf(v)
        tensors[name + "_scale"] = np.array([scales[name]], np.float32)
    cfg = config("BitNetForCausalLM", quantization_config={"quant_method": "bitnet", "linear_class": linear_class})
    d = save_model(tmp_path / "m", tensors, cfg)
    out = tmp_path / "o.safetensors"
    items = convert_checkpoint(d, out, progress=False)
    assert {p.name for p in items if p.quantized} == QUANTIZED
    got = load_checkpoint(out)
    assert not any(n.endswith("weight_scale") for n in got)  # consumed by their weights
    for name in QUANTIZED:
        t = got[name]
        assert np.array_equal(t.values(), values[name]), name  # not re-quantized
        s = scales[name] if linear_class == "autobitlinear" else np.float32(1.0 / np.float64(scales[name]))
        assert t.scales.tobytes() == np.array([s], np.float32).tobytes()


# ------------------------------------------------------------------ GGUF output


def _gguf_read(path: Path):  # noqa: ANN202
    import gguf

    with _gguf.bitnet_cpp_types():
        r = gguf.GGUFReader(path)
        tensors = {t.name: t for t in r.tensors}
        fields = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    raw = np.memmap(path, np.uint8, mode="r")
    return tensors, fields, raw


def _permuted(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order, by explicit indices: head h's row 2i+j is the HF row j*half+i."""
    rows = w.shape[0]
    hd = rows // n_head
    half = hd // 2
    order = [h * hd + j * half + i for h in range(n_head) for i in range(half) for j in range(2)]
    return w[order]


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(("seed", "arch"), [(51, "BitNetForCausalLM"), (52, "LlamaForCausalLM")])
def test_gguf_i2s_round_trip(tmp_path: Path, seed: int, arch: str) -> None:
    bitnet = arch.startswith("Bit")
    tensors = model_tensors(seed, bitnet=bitnet)
    d = save_model(tmp_path / "m", tensors, config(arch))
    out = tmp_path / "model.gguf"
    assert main(["convert", str(d), "-o", str(out), "--format", "i2_s"]) == 0
    got, fields, raw = _gguf_read(out)
    a = "bitnet-b1.58" if bitnet else "llama"
    assert fields["general.architecture"] == a
    assert fields["general.file_type"] == 40
    assert fields["general.name"] == "m"
    assert fields[f"{a}.block_count"] == LAYERS and fields[f"{a}.embedding_length"] == H
    assert fields[f"{a}.attention.head_count"] == HEADS and fields[f"{a}.attention.head_count_kv"] == KV
    assert fields[f"{a}.feed_forward_length"] == FF and fields[f"{a}.vocab_size"] == VOCAB
    assert fields[f"{a}.rope.dimension_count"] == H // HEADS and fields[f"{a}.context_length"] == 128
    assert math.isclose(fields[f"{a}.attention.layer_norm_rms_epsilon"], 1e-5, rel_tol=1e-6)
    expected = {_gguf.tensor_name(n) for n in tensors if not _gguf.skipped(n)}
    assert set(got) == expected
    for name, w in tensors.items():
        if _gguf.skipped(name):
            continue
        g = got[_gguf.tensor_name(name)]
        assert list(g.shape) == list(reversed(w.shape)), name  # GGUF stores ne, innermost first
        if name in QUANTIZED:
            ww = _permuted(w, HEADS if "q_proj" in name else KV) if not bitnet and "_proj" in name and (
                "q_proj" in name or "k_proj" in name) else w  # fmt: skip
            want = bitnet_go.quantize_i2s(ww).to_bitnet_cpp_bytes()
            assert int(g.tensor_type) == 36
            assert raw[g.data_offset : g.data_offset + len(want)].tobytes() == want, name
        elif w.ndim == 2:
            assert int(g.tensor_type) == 1 and np.array_equal(g.data, w.astype(np.float16)), name
        else:
            assert int(g.tensor_type) == 0 and np.array_equal(g.data, w), name


def test_llama_permutation_matches_explicit_indices() -> None:
    w = np.arange(16 * 3).reshape(16, 3)
    assert np.array_equal(_gguf.permute_rows(w, 4, 4), _permuted(w, 4))
    assert np.array_equal(_gguf.permute_rows(w, 8, 2), _permuted(w, 2))


def _tl1_reference(v: np.ndarray, BM: int, BK: int, bm: int) -> bytes:  # noqa: N803
    """bitnet.cpp's TL1 GGUF layout, one byte at a time: per tile (BM rows, BK columns), micro-tile (bm rows,
    by = 256/bm columns), 16-row group and 4 columns, for each of the 16 rows the code 3a + b + 4 of the pair
    at the 4 columns' start (high nibble) and of the next pair (low nibble)."""
    m, k = v.shape
    by = 256 // bm
    out = bytearray()
    for mb in range(m // BM):
        for kb in range(k // BK):
            for mi in range(BM // bm):
                for kj in range(BK // by):
                    for r16 in range(bm // 16):
                        for q in range(by // 4):
                            c = kb * BK + kj * by + 4 * q
                            rows = mb * BM + mi * bm + r16 * 16 + np.arange(16)
                            hi = 3 * v[rows, c] + v[rows, c + 1] + 4
                            lo = 3 * v[rows, c + 2] + v[rows, c + 3] + 4
                            out += bytes((hi << 4 | lo).astype(np.uint8))
    return bytes(out)


def _tl2_reference(v: np.ndarray, BM: int, BK: int, bm: int) -> bytes:  # noqa: N803
    """bitnet.cpp's TL2 GGUF layout, one byte at a time: the columns before K - K % BK in triplets t = 9a+3b+c
    (per tile and micro-tile of 6 columns, bm bytes |t0| << 4 | |t1|, 8-byte groups 1 and 2 traded), then
    their signs (per tile and 24 columns, bm/2 little-endian words, bit 15-i of word j the sign of triplet
    (16i + ... ) laid out as 8 triplets x bm rows read in rows of bm/2), then the other columns as TL1-coded
    pairs in 32 x 32 tiles of 4-column micro-tiles (groups traded as above), zero-padded to bitnet.cpp's size."""
    m, k = v.shape
    k3 = k - k % BK
    v = v.astype(np.int64)

    def tri(r: int, c: int) -> int:
        return int(9 * v[r, c] + 3 * v[r, c + 1] + v[r, c + 2])

    def traded(g: list[int]) -> list[int]:
        return g[0:8] + g[16:24] + g[8:16] + g[24:]

    out: list[int] = []
    for mb in range(m // BM):
        for kb in range(k3 // BK):
            for mi in range(BM // bm):
                for kj in range(BK // 6):
                    c = kb * BK + kj * 6
                    rows = [mb * BM + mi * bm + r for r in range(bm)]
                    out += traded([abs(tri(r, c)) << 4 | abs(tri(r, c + 3)) for r in rows])
    for mb in range(m // BM):
        for kb in range(k3 // BK):
            for mi in range(BM // bm):
                for g in range(BK // 24):
                    for j in range(bm // 2):
                        word = 0
                        for i in range(16):
                            s, r = divmod(i * (bm // 2) + j, bm)
                            neg = tri(mb * BM + mi * bm + r, kb * BK + g * 24 + 3 * s) < 0
                            word |= int(neg) << (15 - i)
                        out += [word & 0xFF, word >> 8]
    for mb in range(m // BM):
        for kb in range((k - k3) // 32):
            for mi in range(BM // 32):
                for kj in range(8):
                    c = k3 + kb * 32 + kj * 4
                    rows = [mb * BM + mi * 32 + r for r in range(32)]
                    out += traded([(3 * v[r, c] + v[r, c + 1] + 4) << 4 | (3 * v[r, c + 2] + v[r, c + 3] + 4)
                                   for r in rows])  # fmt: skip
    size = (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8
    return bytes(out) + bytes(size - len(out))


TILINGS = {
    "tl1": {
        (H, H): (128, 64, 32),
        (H * KV // HEADS, H): (64, 128, 64),
        (FF, H): (256, 32, 16),
        (H, FF): (256, 256, 32),
    },
    "tl2": {(H, H): (128, 96, 32), (H * KV // HEADS, H): (32, 192, 32), (FF, H): (256, 192, 32), (H, FF): (64, 96, 32)},
}
"""kernel_config.ini sections (m, k) -> (bm, bk, bmm) for the test model's shapes, several tilings per format."""


def write_kernel_config(path: Path, tilings: dict[tuple[int, int], tuple[int, int, int]]) -> Path:
    text = "".join(
        f"[Kernels_{i}]\nm = {m}\nk = {k}\nbm = {bm}\nbk = {bk}\nbmm = {bmm}\n\n"
        for i, ((m, k), (bm, bk, bmm)) in enumerate(tilings.items())
    )
    path.write_text(text)
    return path


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(("seed", "qtype", "arch"), [(53, "tl1", "BitnetForCausalLM"), (54, "tl2", "BitNetForCausalLM"),
                                                     (56, "tl2", "LlamaForCausalLM")])  # fmt: skip
def test_gguf_tl(tmp_path: Path, seed: int, qtype: str, arch: str) -> None:
    bitnet = arch.startswith("Bit")
    tensors = model_tensors(seed, bitnet=bitnet)
    d = save_model(tmp_path / "m", tensors, config(arch))
    out = tmp_path / "model.gguf"
    # bitnet.cpp lays TL1/TL2 out by per-model kernel parameters: without them a clear error, and no file
    with pytest.raises(ValueError, match="needs the model's kernel config .*kernel_config.ini"):
        convert_checkpoint(d, out, qtype=qtype, to="gguf", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["m"]
    kc = write_kernel_config(tmp_path / "kernel_config.ini", TILINGS[qtype])
    assert main(["convert", str(d), "-o", str(out), "--format", qtype, "--kernel-config", str(kc)]) == 0
    got, fields, raw = _gguf_read(out)
    assert fields["general.file_type"] == {"tl1": 38, "tl2": 39}[qtype]
    reference = _tl1_reference if qtype == "tl1" else _tl2_reference
    for name in sorted(QUANTIZED):
        w = tensors[name]
        if not bitnet and ("q_proj" in name or "k_proj" in name):
            w = _permuted(w, HEADS if "q_proj" in name else KV)
        t = bitnet_go.quantize_i2s(w)
        want = reference(t.values(), *TILINGS[qtype][w.shape])
        g = got[_gguf.tensor_name(name)]
        assert int(g.tensor_type) == {"tl1": 38, "tl2": 39}[qtype] and list(g.shape) == list(reversed(w.shape))
        assert raw[g.data_offset : g.data_offset + len(want)].tobytes() == want, name
        sc = got[_gguf.tensor_name(name) + "_scale"]
        assert sc.data.tolist() == [float(t.scales[0])], name


@pytest.mark.needs("safetensors", "gguf")
def test_gguf_tl_kernel_config_errors(tmp_path: Path) -> None:
    d = save_model(tmp_path / "m", model_tensors(57, bitnet=True), config("BitnetForCausalLM"))
    out = tmp_path / "o.gguf"
    cases = [
        ("tl1", {k: v for k, v in TILINGS["tl1"].items() if k != (FF, H)}, r"mlp.gate_proj.weight: shape \(512, 256\) "
         "has no section with m = 512, k = 256"),
        ("tl1", {**TILINGS["tl1"], (H, H): (96, 64, 32)}, r"tiling .* cannot lay out shape \(256, 256\): needs m % bm"),
        ("tl2", {**TILINGS["tl2"], (H, H): (128, 96, 64)}, "needs bmm == 32"),
        ("tl2", {**TILINGS["tl2"], (H, H): (128, 48, 32)}, r"needs \(k % bk\) % 32 == 0"),
    ]  # fmt: skip
    for qtype, tilings, message in cases:
        kc = write_kernel_config(tmp_path / "kc.ini", tilings)
        with pytest.raises(ValueError, match=message):
            convert_checkpoint(d, out, qtype=qtype, to="gguf", progress=False, kernel_config=kc)
    (tmp_path / "kc.ini").write_text("[K]\nm = 1\n")
    with pytest.raises(ValueError, match=r"section \[K\] needs integer m, k, bm, bk and bmm"):
        convert_checkpoint(d, out, qtype="tl1", to="gguf", progress=False, kernel_config=tmp_path / "kc.ini")
    with pytest.raises(FileNotFoundError, match="no such kernel config"):
        convert_checkpoint(d, out, qtype="tl1", to="gguf", progress=False, kernel_config=tmp_path / "nope.ini")
    assert sorted(os.listdir(tmp_path)) == ["kc.ini", "m"]


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize("seed", [55])
def test_gguf_from_hf_packed(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tensors = model_tensors(seed, bitnet=True)
    want: dict[str, bytes] = {}
    for name in QUANTIZED:
        v = rng.integers(-1, 2, tensors[name].shape).astype(np.int8)
        s = np.array([rng.random() + 0.5], np.float32)
        tensors[name], tensors[name + "_scale"] = _hfpack.pack_hf(v), s
        want[name] = _hfpack.ternary_from_values(v, s).to_bitnet_cpp_bytes()  # bitnet.cpp: the scale as it is
    d = save_model(tmp_path / "m", tensors, config("BitNetForCausalLM"))
    convert_checkpoint(d, tmp_path / "o.gguf", to="gguf", progress=False)
    got, _, raw = _gguf_read(tmp_path / "o.gguf")
    for name, b in want.items():
        g = got[_gguf.tensor_name(name)]
        assert raw[g.data_offset : g.data_offset + len(b)].tobytes() == b, name


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(("seed", "qtype"), [(61, "tq1_0"), (62, "tq2_0")])
def test_gguf_tq(tmp_path: Path, seed: int, qtype: str) -> None:
    import gguf

    tensors = model_tensors(seed, bitnet=True)
    tensors[min(QUANTIZED)].reshape(-1)[:256] = 0  # a block of zeros: llama.cpp stores its scale as 0
    d = save_model(tmp_path / "m", tensors, config("BitNetForCausalLM"))
    out = tmp_path / "model.gguf"
    assert main(["convert", str(d), "-o", str(out), "--format", qtype]) == 0
    r = gguf.GGUFReader(out)  # TQ types are upstream's: no help needed
    got = {t.name: t for t in r.tensors}
    fields = {k: f.contents() for k, f in r.fields.items()}
    assert fields["general.architecture"] == "bitnet"
    assert fields["general.file_type"] == {"tq1_0": 36, "tq2_0": 37}[qtype]
    assert int(got["token_embd.weight"].tensor_type) == 1
    for name in QUANTIZED:
        g = got[_gguf.tensor_name(name)]
        assert g.tensor_type == getattr(gguf.GGMLQuantizationType, qtype.upper())
        assert list(g.shape) == list(reversed(tensors[name].shape))
        # llama.cpp's path: BitNet's weight_quant (the absmean ternarisation), then gguf's TQ quantizer
        ternarised = bitnet_go.quantize_i2s(tensors[name]).dequantize()
        want = gguf.quants.quantize(ternarised, getattr(gguf.GGMLQuantizationType, qtype.upper()))
        assert g.data.tobytes() == want.tobytes(), name
        back = bitnet_go.TernaryTensor.from_gguf_bytes(g.data.tobytes(), tensors[name].shape, qtype)
        assert np.array_equal(back.values(), bitnet_go.quantize_i2s(tensors[name]).values())


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize(("seed", "qtype"), [(63, "tq1_0"), (64, "tq2_0")])
def test_safetensors_tq(tmp_path: Path, seed: int, qtype: str) -> None:
    tensors = model_tensors(seed)
    d = save_model(tmp_path / "m", tensors, config())
    out = tmp_path / "o.safetensors"
    convert_checkpoint(d, out, qtype=qtype, progress=False)
    got = load_checkpoint(out)
    quantize_tq = {"tq1_0": bitnet_go.quantize_tq1_0, "tq2_0": bitnet_go.quantize_tq2_0}[qtype]
    for name in QUANTIZED:
        want = quantize_tq(bitnet_go.quantize_i2s(tensors[name]).dequantize())
        t = got[name]
        assert (t.qtype, t.shape, t.block_size) == (qtype, tensors[name].shape, 256)
        assert t.packed.tobytes() == want.packed.tobytes() and t.scales.tobytes() == want.scales.tobytes()


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_attention_heads": None}, "config.json has no 'num_attention_heads' or 'n_head'"),
        ({"num_hidden_layers": None}, "config.json has no 'n_layers' or 'num_hidden_layers' or 'n_layer'"),
        ({"vocab_size": None}, "config.json has no 'vocab_size'"),
        ({"architectures": None}, "config.json has no 'architectures'"),
        ({"architectures": ["GPT2LMHeadModel"]}, "'GPT2LMHeadModel' has no GGUF mapping"),
    ],
)
def test_gguf_config_it_cannot_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], message: str
) -> None:
    cfg = {k: v for k, v in {**config(), **change}.items() if v is not None}
    d = save_model(tmp_path / "m", model_tensors(0), cfg)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        convert_checkpoint(d, tmp_path / "o.gguf", to="gguf", progress=False)
    assert main(["convert", str(d), "-o", str(tmp_path / "o.gguf")]) == 1
    assert message in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["m"]


@pytest.mark.needs("safetensors")
def test_gguf_without_config_and_bad_arguments(tmp_path: Path) -> None:
    d = save_model(tmp_path / "m", model_tensors(0), None)
    pytest.importorskip("gguf")
    with pytest.raises(ConfigError, match="needs the checkpoint's config.json"):
        convert_checkpoint(d, tmp_path / "o.gguf", to="gguf")
    with pytest.raises(ValueError, match="block_size applies to safetensors output"):
        convert_checkpoint(d, tmp_path / "o.gguf", to="gguf", block_size=128)
    with pytest.raises(ValueError, match="format must be one of i2_s, tl1, tl2, tq1_0, tq2_0, got 'q4_0'"):
        convert_checkpoint(d, tmp_path / "o", qtype="q4_0")
    with pytest.raises(ValueError, match="method must be one of"):
        convert_checkpoint(d, tmp_path / "o", method="mean")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="include must be a sequence of glob patterns"):
        convert_checkpoint(d, tmp_path / "o", include="*.weight")
    assert sorted(os.listdir(tmp_path)) == ["m"]


# ------------------------------------------------------------------ tokenizer metadata


def _expected_tokens(tok: dict[str, object], n: int) -> tuple[list[str], list[int]]:
    """What llama.cpp's converter writes for a byte-level BPE tokenizer: every id's text, [PAD<i>] for ids
    with none; types NORMAL 1, CONTROL 3 (special, or shaped <|...|>), USER_DEFINED 4, UNUSED 5."""
    tokens, types = [f"[PAD{i}]" for i in range(n)], [5] * n
    for text, i in tok["vocab"].items():  # type: ignore[attr-defined]
        tokens[i], types[i] = text, 1
    for a in tok["added"]:  # type: ignore[attr-defined]
        c = a["content"]
        tokens[a["id"]] = c
        types[a["id"]] = 3 if a["special"] or (c.startswith("<|") and c.endswith("|>")) else 4
    return tokens, types


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.parametrize(
    ("seed", "arch", "qtype"), [(71, "BitNetForCausalLM", "tq2_0"), (72, "LlamaForCausalLM", "i2_s")]
)
def test_gguf_bpe_tokenizer_keys(tmp_path: Path, seed: int, arch: str, qtype: str) -> None:
    d = save_model(tmp_path / "m", model_tensors(seed, bitnet=arch.startswith("Bit")), config(arch), tokenizer=False)
    tok = write_bpe_tokenizer(d, ("hello", " world", " wide"))
    out = tmp_path / "o.gguf"
    assert main(["convert", str(d), "-o", str(out), "--format", qtype]) == 0
    _, fields, _ = _gguf_read(out)
    tokens, types = _expected_tokens(tok, VOCAB)
    assert fields["tokenizer.ggml.model"] == "gpt2"
    assert fields["tokenizer.ggml.pre"] == "llama-bpe"
    assert fields["tokenizer.ggml.tokens"] == tokens
    assert fields["tokenizer.ggml.token_type"] == types
    assert fields["tokenizer.ggml.merges"] == tok["merges"]
    assert "tokenizer.ggml.scores" not in fields
    bos, eos = (a["id"] for a in tok["added"][:2])  # type: ignore[index]
    assert fields["tokenizer.ggml.bos_token_id"] == bos and fields["tokenizer.ggml.eos_token_id"] == eos
    assert fields["tokenizer.ggml.add_bos_token"] is True and fields["tokenizer.ggml.add_eos_token"] is False


@pytest.mark.needs("safetensors", "gguf")
def test_gguf_tokenizer_missing_or_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bitnet_go.convert._tokenizer import TokenizerError

    d = save_model(tmp_path / "m", model_tensors(0), config(), tokenizer=False)
    out = tmp_path / "o.gguf"
    with pytest.raises(TokenizerError, match="no tokenizer.model or tokenizer.json in .*--no-tokenizer"):
        convert_checkpoint(d, out, to="gguf", progress=False)
    assert main(["convert", str(d), "-o", str(out)]) == 1
    assert "TokenizerError" in capsys.readouterr().err and not out.exists()
    with pytest.warns(UserWarning, match="llama.cpp and bitnet.cpp will not load the file"):
        assert main(["convert", str(d), "-o", str(out), "--no-tokenizer"]) == 0
    _, fields, _ = _gguf_read(out)
    assert not any(k.startswith("tokenizer.") for k in fields)

    # a pre-tokenizer it does not know: an error naming --tokenizer-pre, which then writes the name given
    write_bpe_tokenizer(d, WORDS, pre={"type": "Metaspace", "replacement": "x"})
    with pytest.raises(TokenizerError, match="pre-tokenizer not recognised .*Metaspace.*--tokenizer-pre"):
        convert_checkpoint(d, out, to="gguf", progress=False, force=True)
    assert main(["convert", str(d), "-o", str(out), "--tokenizer-pre", "gpt-2", "--force"]) == 0
    assert _gguf_read(out)[1]["tokenizer.ggml.pre"] == "gpt-2"
    write_bpe_tokenizer(d, WORDS, pre={"type": "ByteLevel", "add_prefix_space": False, "use_regex": True})
    convert_checkpoint(d, out, to="gguf", progress=False, force=True)
    assert _gguf_read(out)[1]["tokenizer.ggml.pre"] == "gpt-2"

    # not byte-level BPE; an id past the model's vocabulary; config and embedding disagreeing
    tj = json.loads((d / "tokenizer.json").read_text())
    (d / "tokenizer.json").write_text(json.dumps({**tj, "model": {**tj["model"], "byte_fallback": True}}))
    with pytest.raises(TokenizerError, match="byte-level BPE tokenizer was expected .*byte_fallback True"):
        convert_checkpoint(d, out, to="gguf", progress=False, force=True)
    (d / "tokenizer.json").write_text(json.dumps({**tj, "added_tokens": [{"id": VOCAB, "content": "<x>"}]}))
    with pytest.raises(TokenizerError, match=f"token '<x>' has id {VOCAB}, but the model has {VOCAB} token ids"):
        convert_checkpoint(d, out, to="gguf", progress=False, force=True)
    (d / "config.json").write_text(json.dumps(config(vocab_size=VOCAB + 1)))
    with pytest.raises(ConfigError, match=f"vocab_size is {VOCAB + 1}, but model.embed_tokens.weight has {VOCAB}"):
        convert_checkpoint(d, out, to="gguf", progress=False, force=True)


class _FakeSentencePiece:
    """A stand-in for sentencepiece.SentencePieceProcessor over a fixed piece list (the package is optional)."""

    PIECES = [("<unk>", 0.0, "unk"), ("<s>", 0.0, "control"), ("</s>", 0.0, "control"), ("<0x0A>", 0.0, "byte"),
              ("\u2581hello", -1.5, ""), ("\u2581world", -2.5, ""), ("<unused0>", 0.0, "unused")]  # fmt: skip

    def LoadFromFile(self, path: str) -> None:  # noqa: N802
        assert Path(path).name == "tokenizer.model"

    def vocab_size(self) -> int:
        return len(self.PIECES)

    def IdToPiece(self, i: int) -> str:  # noqa: N802
        return self.PIECES[i][0]

    def GetScore(self, i: int) -> float:  # noqa: N802
        return self.PIECES[i][1]

    def IsUnknown(self, i: int) -> bool:  # noqa: N802
        return self.PIECES[i][2] == "unk"

    def IsControl(self, i: int) -> bool:  # noqa: N802
        return self.PIECES[i][2] == "control"

    def IsUnused(self, i: int) -> bool:  # noqa: N802
        return self.PIECES[i][2] == "unused"

    def IsByte(self, i: int) -> bool:  # noqa: N802
        return self.PIECES[i][2] == "byte"


@pytest.mark.needs("safetensors", "gguf")
def test_gguf_sentencepiece_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    d = save_model(tmp_path / "m", model_tensors(1, bitnet=True), config("BitnetForCausalLM"), tokenizer=False)
    (d / "tokenizer.model").write_bytes(b"not read by the stand-in")
    (d / "added_tokens.json").write_text(json.dumps({"<pad>": 7}))
    added = {"8": {"content": "\u2581user", "special": False}, "9": {"content": "<|eot|>", "special": False}}
    (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added, "add_bos_token": True}))
    (d / "config.json").write_text(json.dumps(config("BitnetForCausalLM", bos_token_id=1, eos_token_id=2)))
    out = tmp_path / "o.gguf"
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # not installed: a clear error
    with pytest.raises(ImportError, match="SentencePiece model: reading it needs the sentencepiece package"):
        convert_checkpoint(d, out, qtype="tq2_0", to="gguf", progress=False)
    monkeypatch.setitem(sys.modules, "sentencepiece", types.SimpleNamespace(SentencePieceProcessor=_FakeSentencePiece))
    convert_checkpoint(d, out, qtype="tq2_0", to="gguf", progress=False)
    _, fields, _ = _gguf_read(out)
    p = _FakeSentencePiece.PIECES
    want = [t for t, _, _ in p] + ["<pad>", " user", "<|eot|>"] + [f"[PAD{i}]" for i in range(len(p) + 3, VOCAB)]
    kinds = {"unk": 2, "control": 3, "byte": 6, "unused": 5, "": 1}
    assert fields["tokenizer.ggml.model"] == "llama" and fields["tokenizer.ggml.pre"] == "default"
    assert fields["tokenizer.ggml.tokens"] == want
    assert fields["tokenizer.ggml.token_type"] == [kinds[k] for _, _, k in p] + [4, 4, 3] + [5] * (VOCAB - len(p) - 3)
    scores = [s for _, s, _ in p] + [-1000.0] * 3 + [-10000.0] * (VOCAB - len(p) - 3)
    assert np.allclose(fields["tokenizer.ggml.scores"], scores)
    assert fields["tokenizer.ggml.bos_token_id"] == 1 and fields["tokenizer.ggml.eos_token_id"] == 2
    assert "tokenizer.ggml.merges" not in fields


# ------------------------------------------------------------------ robustness


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("to", ["safetensors", "gguf"])
def test_interrupt_leaves_no_partial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], to: str
) -> None:
    from bitnet_go.convert import _convert

    if to == "gguf":
        pytest.importorskip("gguf")
    d = save_model(tmp_path / "m", model_tensors(1), config())
    out = tmp_path / f"o.{to}"
    out.write_bytes(b"previous")
    real, calls = _convert.quantize_i2s, []

    def interrupted(*a: object, **k: object) -> bitnet_go.TernaryTensor:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(_convert, "quantize_i2s", interrupted)
    with pytest.raises(KeyboardInterrupt):
        convert_checkpoint(d, out, to=to, progress=False, force=True)  # type: ignore[arg-type]
    assert len(calls) == 3
    assert sorted(os.listdir(tmp_path)) == ["m", out.name]  # no temporary file left
    assert out.read_bytes() == b"previous"
    calls.clear()
    assert main(["convert", str(d), "-o", str(out), "--to", to, "--force"]) == 130  # the CLI: a message, status 130
    assert f"interrupted; {out} not written" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["m", out.name] and out.read_bytes() == b"previous"


@pytest.mark.needs("safetensors")
def test_progress_lines_without_tqdm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors.numpy import save_file

    from bitnet_go.convert import _convert

    tensors = {
        "a.weight": np.ones((1000, 256), np.float32),
        "b": np.ones(3, np.float32),
        "c.weight": np.ones((500, 256), np.float32),
    }
    save_file(tensors, str(tmp_path / "x.safetensors"))
    real = _convert.quantize_i2s

    def noisy(*a: object, **k: object) -> bitnet_go.TernaryTensor:
        print("quantizing", file=sys.stderr)  # the lines come as the work goes, not all at the start
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(_convert, "quantize_i2s", noisy)
    for mod in ("tqdm.auto", "tqdm.std"):  # as if tqdm were not installed
        monkeypatch.setitem(sys.modules, mod, None)
    convert_checkpoint(tmp_path / "x.safetensors", tmp_path / "y.safetensors", progress=True)
    mb = [sum(a.nbytes for a in list(tensors.values())[:i]) / 1e6 for i in range(4)]  # done before each; total
    assert capsys.readouterr().err.splitlines() == [
        f"[1/3] a.weight  ({mb[0]:.1f} of {mb[3]:.1f} MB done)",
        "quantizing",
        f"[2/3] b  ({mb[1]:.1f} of {mb[3]:.1f} MB done)",
        f"[3/3] c.weight  ({mb[2]:.1f} of {mb[3]:.1f} MB done)",
        "quantizing",
    ]
    monkeypatch.undo()
    convert_checkpoint(tmp_path / "x.safetensors", tmp_path / "y.safetensors", progress=False, force=True)
    assert capsys.readouterr().err == ""


@pytest.mark.needs("safetensors", "tqdm")
def test_progress_bar_counts_bytes_and_tensors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors.numpy import save_file

    tensors = {"a.weight": np.ones((1024, 512), np.float32), "b": np.ones(3, np.float32)}
    save_file(tensors, str(tmp_path / "x.safetensors"))
    convert_checkpoint(tmp_path / "x.safetensors", tmp_path / "y.safetensors", progress=True)
    err = capsys.readouterr().err
    final = err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("bitnet_go convert: 100%") and "2/2 tensors" in final, final
    assert "2.00M/2.00M" in final and "B/s" in final, final  # bytes done/total (1024-based) and the rate


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01", "shorter than the 8-byte header length"),
        ((10**9).to_bytes(8, "little") + b"{}", "header length 1000000000"),
        ((4).to_bytes(8, "little") + b"nope", "the header is not JSON"),
        ((2).to_bytes(8, "little") + b"[]", "must be a JSON object"),
    ],
)
def test_reader_rejects_broken_files(tmp_path: Path, data: bytes, message: str) -> None:
    p = tmp_path / "bad.safetensors"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=message):
        read_header(p)


def test_reader_checks_offsets_and_dtypes(tmp_path: Path) -> None:
    p = tmp_path / "x.safetensors"
    for entry, message in [
        (("w", "F32", (4,), 12), r"expected 16 bytes"),
        (("w", "C64", (1,), 8), "dtype C64, which is not supported"),
    ]:
        with open(p, "wb") as f:
            write_safetensors_header(f, [entry], {})
            f.write(bytes(entry[3]))
        with pytest.raises(ValueError, match=message):
            read_header(p)
    with open(p, "wb") as f:  # data shorter than the header says
        write_safetensors_header(f, [("w", "F32", (4,), 16)], {})
        f.write(bytes(8))
    with pytest.raises(ValueError, match="within the file's 8 data bytes"):
        read_header(p)


def _raw_safetensors(path: Path, header: dict[str, object], data: bytes) -> Path:
    """A safetensors file with exactly this header (unchecked: for broken files) and data."""
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)
    return path


W_NAME, N_NAME = "model.layers.0.mlp.up_proj.weight", "model.norm.weight"


def _good_file(d: Path, seed: int) -> Path:
    d.mkdir()
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((8, 256)).astype(np.float32)
    n = rng.random(256).astype(np.float32)
    header = {W_NAME: {"dtype": "F32", "shape": [8, 256], "data_offsets": [0, w.nbytes]},
              N_NAME: {"dtype": "F32", "shape": [256], "data_offsets": [w.nbytes, w.nbytes + n.nbytes]}}  # fmt: skip
    return _raw_safetensors(d / "model.safetensors", header, w.tobytes() + n.tobytes())


def _break(f: Path, how: str) -> str:
    """Damage checkpoint file ``f`` as ``how`` says; returns the message the conversion must give."""
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8 : 8 + n]), raw[8 + n :]
    w, nrm = header[W_NAME], header[N_NAME]
    if how == "truncated data":
        f.write_bytes(raw[:-100])
        return f"'{N_NAME}' .* has data_offsets \\[8192, 9216\\]: expected 1024 bytes within the file's 9116 data"
    if how == "header not JSON":
        f.write_bytes(raw[:8] + b"{\xff" + raw[10:])
        return "not a safetensors file \\(the header is not JSON"
    if how == "header length past the end":
        f.write_bytes((len(raw) + 1).to_bytes(8, "little") + raw[8:])
        return f"not a safetensors file \\(header length {len(raw) + 1} for a file of {len(raw)} bytes\\)"
    if how == "header too large":
        f.write_bytes((200 << 20).to_bytes(8, "little") + raw[8:])
        return f"header length {200 << 20} for a file"
    if how == "offsets past the end":
        w["data_offsets"] = [len(data), len(data) + 8192]
        _raw_safetensors(f, header, data)
        return f"'{W_NAME}' .* data_offsets \\[{len(data)}, {len(data) + 8192}\\]: expected 8192 bytes within"
    if how == "overlapping offsets":
        nrm["data_offsets"] = [4096, 5120]
        _raw_safetensors(f, header, data)
        return f"tensors '{W_NAME}' \\(data_offsets \\[0, 8192\\]\\) and '{N_NAME}' \\(\\[4096, 5120\\]\\) overlap"
    if how == "F8 weight":
        w.update(dtype="F8_E4M3", data_offsets=[0, 2048])
        nrm["data_offsets"] = [2048, 3072]
        _raw_safetensors(f, header, data[:2048] + data[8192:])
        return f"tensor '{W_NAME}' has dtype F8_E4M3, which is not supported \\(supported: F64, F32"
    if how == "I64 weight":
        w.update(dtype="I64", shape=[8, 128])
        _raw_safetensors(f, header, data)
        return f"tensor '{W_NAME}' is a weight the default rule quantizes, but its dtype I64 cannot be quantized"
    if how == "NaN in a weight":
        a = np.frombuffer(data[:8192], np.float32).copy()
        a[300] = np.nan
        _raw_safetensors(f, header, a.tobytes() + data[8192:])
        return "tensor 'model.layers.0.mlp.up_proj.weight': x contains a non-finite value \\(NaN\\) at flat index 300"
    raise AssertionError(how)


BROKEN = ["truncated data", "header not JSON", "header length past the end", "header too large", "offsets past the end",
          "overlapping offsets", "F8 weight", "I64 weight", "NaN in a weight"]  # fmt: skip


@pytest.mark.filterwarnings("ignore:GGUF output without tokenizer metadata")
@pytest.mark.parametrize("to", ["safetensors", "gguf"])
@pytest.mark.parametrize("how", BROKEN)
def test_bad_input_is_a_clear_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, to: str
) -> None:
    if to == "gguf":
        pytest.importorskip("gguf")
    f = _good_file(tmp_path / "m", 81)
    out = tmp_path / f"o.{to}"
    kw: dict[str, object] = {"to": to, "progress": False}
    if to == "gguf":
        kw.update(qtype="tq2_0", tokenizer=False)
        (tmp_path / "m" / "config.json").write_text(json.dumps(config()))
    convert_checkpoint(f, tmp_path / "good", **kw) if to == "safetensors" else None  # type: ignore[arg-type]
    (tmp_path / "good").unlink(missing_ok=True)
    message = _break(f, how)
    with pytest.raises(ValueError, match=re.escape(str(f)) + ".*" + message):
        convert_checkpoint(f, out, **kw)  # type: ignore[arg-type]
    assert sorted(os.listdir(tmp_path)) == ["m"]  # no output, no temporary file
    argv = ["convert", str(f), "-o", str(out), "--to", to] + (
        ["--format", "tq2_0", "--no-tokenizer"] if to == "gguf" else []
    )
    assert main(argv) == 1
    err = capsys.readouterr().err
    last = err.splitlines()[-1]  # after the progress bar, if it started
    assert last.startswith("bitnet-go convert: ValueError: " + str(f)) and re.search(message, last), err
    assert sorted(os.listdir(tmp_path)) == ["m"]


@pytest.mark.needs("safetensors")
def test_non_float_weight_excluded_is_copied(tmp_path: Path) -> None:
    f = _good_file(tmp_path / "m", 82)
    _break(f, "I64 weight")
    out = tmp_path / "o.safetensors"
    done = convert_checkpoint(f, out, exclude=["*.up_proj.*"], progress=False)
    assert [p.line() for p in done] == [f"{W_NAME}  [8, 128]  I64 -> I64", f"{N_NAME}  [256]  F32 -> F32"]
    got = load_checkpoint(out)
    assert got[W_NAME].dtype == np.int64 and got[W_NAME].tobytes() == f.read_bytes()[-9216:-1024]


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("qtype", ["tq1_0", "tq2_0"])
def test_tq_shape_it_cannot_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str], qtype: str) -> None:
    rng = np.random.default_rng(83)
    tensors = {"a.weight": rng.standard_normal((4, 512)).astype(np.float32),
               "b.weight": rng.standard_normal((4, 300)).astype(np.float32)}  # fmt: skip
    d = save_model(tmp_path / "m", tensors, None)
    out = tmp_path / "o.safetensors"
    with pytest.raises(ValueError, match=re.escape(str(d / "model.safetensors")) + f": tensor 'b.weight' of shape "
                       rf"\[4, 300\] cannot be stored as {qtype}: {qtype} packs each row in blocks of 256 values, and "
                       "its last dimension, 300, is not a multiple of 256"):  # fmt: skip
        convert_checkpoint(d, out, qtype=qtype, include=["*.weight"], progress=False)
    assert sorted(os.listdir(tmp_path)) == ["m"]
    assert main(["convert", str(d), "-o", str(out), "--format", qtype, "--include", "b.*"]) == 1
    assert "cannot be stored as" in capsys.readouterr().err and not out.exists()
    # chosen by the default rule: left as it is (as llama.cpp's converter does), and the dry run says why
    assert main(["convert", str(d), "--dry-run", "--format", qtype]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"a.weight  [4, 512]  F32 -> {qtype}"
    assert lines[1] == f"b.weight  [4, 300]  F32 -> F32  ({qtype} needs the last dimension a multiple of 256)"


@pytest.mark.needs("safetensors")
def test_existing_output_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _good_file(tmp_path / "m", 84)
    out = tmp_path / "o.safetensors"
    out.write_bytes(b"previous")
    with pytest.raises(FileExistsError, match=f"{re.escape(str(out))} exists: pass force=True \\(--force\\)"):
        convert_checkpoint(f, out, progress=False)
    assert main(["convert", str(f), "-o", str(out)]) == 1
    assert "FileExistsError" in capsys.readouterr().err
    assert out.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["m", "o.safetensors"]
    assert main(["convert", str(f), "-o", str(out), "--force"]) == 0
    w = np.frombuffer(f.read_bytes()[-9216:-1024], np.float32).reshape(8, 256)
    assert load_checkpoint(out)[W_NAME].packed.tobytes() == bitnet_go.quantize_i2s(w).packed.tobytes()
    convert_checkpoint(f, out, progress=False, force=True)  # the API's spelling
    with pytest.raises(ValueError, match="is an input file of the checkpoint"):
        convert_checkpoint(f, f, progress=False, force=True)  # never over its own input
    with pytest.raises(IsADirectoryError, match="the output is a directory"):
        convert_checkpoint(f, tmp_path, progress=False, force=True)
    assert sorted(os.listdir(tmp_path)) == ["m", "o.safetensors"] and sorted(os.listdir(tmp_path / "m")) == [
        "model.safetensors"
    ]


def test_atomic_output_frees_the_replaced_file(tmp_path: Path) -> None:
    """Replacing a file: the new bytes in place, the old file's descriptor (held so that its pages are freed off the
    caller's time) closed afterwards; a FIFO in the way is replaced without being opened for long (no hang)."""
    import threading

    from bitnet_go.convert._writer import atomic_output

    out = tmp_path / "o.bin"
    out.write_bytes(b"old" * 1000)
    old = os.stat(out)

    def open_here() -> list[str]:
        """This process's descriptors on files under tmp_path or on the replaced file (by inode). Not a count of
        all descriptors: other threads of the process (an earlier test's, the runtime's) open and close theirs."""
        found = []
        for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
            try:
                target, st = os.readlink(f"/proc/self/fd/{fd}"), os.stat(f"/proc/self/fd/{fd}")
            except OSError:  # closed meanwhile, or not a file
                continue
            if target.startswith(str(tmp_path)) or (st.st_ino, st.st_dev) == (old.st_ino, old.st_dev):
                found.append(target)
        return found

    assert open_here() == []
    with atomic_output(out) as tmp:
        tmp.write_bytes(b"new")
    for t in threading.enumerate():
        if t.name == "bitnet_go-free-replaced":
            t.join(10)
    assert out.read_bytes() == b"new" and open_here() == [] and sorted(os.listdir(tmp_path)) == ["o.bin"]
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with atomic_output(fifo) as tmp:
            tmp.write_bytes(b"x")
        assert fifo.read_bytes() == b"x"


# ------------------------------------------------------------------ memory


MEM_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from bitnet_go.convert import convert_checkpoint

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

    src, warm, out, to = sys.argv[1:5]
    convert_checkpoint(warm, out, to=to, progress=False, force=True)  # library, imports, first allocations
    # ru_maxrss would not do: Linux carries it over from the forked parent (pytest, torch loaded) across exec
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) restarts from the current RSS
    before = status("VmRSS")
    convert_checkpoint(src, out, to=to, progress=False, force=True)
    print(json.dumps({"grew": status("VmHWM") - before}))
    """
)


@pytest.mark.needs("safetensors")
@pytest.mark.parametrize("to", ["safetensors", "gguf"])
def test_peak_memory_is_bounded_by_the_largest_tensor(tmp_path: Path, to: str) -> None:
    """Converting 12 tensors of 8 MiB (96 MiB) grows the peak RSS by at most 2.5x one tensor (its float32 copy,
    its mapped input pages, its packed bytes) plus 16 MiB: well under the checkpoint's size."""
    if to == "gguf":
        pytest.importorskip("gguf")
    rng = np.random.default_rng(71)
    shape = (1024, 2048)
    big = {f"model.layers.{i}.mlp.{p}.weight": rng.standard_normal(shape).astype(np.float32)
           for i in range(4) for p in ("gate_proj", "up_proj", "down_proj")}  # fmt: skip
    cfg = config(num_hidden_layers=4)
    save_model(tmp_path / "big", big, cfg)
    total = sum(a.nbytes for a in big.values())
    del big
    save_model(tmp_path / "warm", {"model.layers.0.mlp.up_proj.weight": np.ones((16, 256), np.float32)}, cfg)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PY_SRC, os.environ.get("PYTHONPATH", "")]))
    args = [str(tmp_path / "big"), str(tmp_path / "warm"), str(tmp_path / f"o.{to}"), to]
    r = subprocess.run([sys.executable, "-c", MEM_SCRIPT, *args], capture_output=True, text=True, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    grew = json.loads(r.stdout.strip().splitlines()[-1])["grew"]
    tensor = 4 * math.prod(shape)
    bound = int(2.5 * tensor) + (16 << 20)
    assert total == 12 * tensor and bound < total
    assert grew <= bound, f"peak RSS grew by {grew / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB"
