"""GGUF files written by ``bitnet-go convert`` load and run in llama.cpp.

A tiny BitNet b1.58 checkpoint (hidden 256, 2 layers, a byte-level BPE
tokenizer) is built in tmp_path, converted to TQ2_0 and TQ1_0 GGUF, and
loaded by ``tools/llama_cpp/harness.cpp`` (llama.cpp's own loader, tokenizer
and BitNet graph), which prints the logits of every position. They are
compared with a NumPy forward pass of llama.cpp's BitNet graph over the
weights read back from the file with the ``gguf`` package (its own TQ
dequantizer), which rounds where llama.cpp rounds (activations to Q8_K blocks
before a ternary product, to float16 before a float16 product and in the KV
cache).

Needs the harness: build it with ``tools/llama_cpp/build.sh LLAMA_SRC`` (a
ggml-org/llama.cpp checkout; CPU only) and set
``LLAMA_CPP_HARNESS=build/llama_cpp/llama_harness``; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bitnet_go.convert import convert_checkpoint
from test_convert import WORDS, byte_chars, config, model_tensors, save_model, write_bpe_tokenizer

HARNESS = os.environ.get("LLAMA_CPP_HARNESS", "")
BITNET_HARNESS = os.environ.get("BITNET_CPP_HARNESS", "")
pytestmark = pytest.mark.needs("safetensors", "gguf")
needs_llama_cpp = pytest.mark.skipif(
    not (HARNESS and os.access(HARNESS, os.X_OK)),
    reason="set LLAMA_CPP_HARNESS to the llama_harness binary built by "
    "`tools/llama_cpp/build.sh LLAMA_SRC` (LLAMA_SRC: a ggml-org/llama.cpp checkout)",
)
needs_bitnet_cpp = pytest.mark.skipif(
    not (BITNET_HARNESS and os.access(BITNET_HARNESS, os.X_OK)),
    reason="set BITNET_CPP_HARNESS to the llama_harness binary built by `tools/llama_cpp/build.sh "
    "BITNET/3rdparty/llama.cpp build/bitnet_llama_cpp` (BITNET: a microsoft/BitNet checkout with its "
    "llama.cpp submodule and include/bitnet-lut-kernels.h; see tools/llama_cpp/build.sh)",
)

VOCAB = 272  # 256 byte tokens, the merges of WORDS, 3 added tokens, padding
HEADS, KV, H, FF = 4, 2, 256, 512
EPS = 1e-5

TOLERANCE = 1e-5
"""Largest |llama.cpp - reference| allowed, relative to the largest |reference logit|: float32 summation order
(measured: about 2e-7; the same reference without llama.cpp's roundings is about 3e-3 away)."""


def run_harness(
    path: Path, tokens: list[int] | None = None, text: str | None = None, harness: str = HARNESS
) -> dict[str, object]:
    cmd = [harness, str(path), "--threads", "2"]
    if tokens is not None:
        cmd += ["--tokens", ",".join(map(str, tokens))]
    if text is not None:
        cmd += ["--text", text]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300)
    assert r.returncode == 0, f"llama.cpp could not run {path}:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout)


# ------------------------------------------------------------------ the reference: llama.cpp's BitNet graph


def f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float64)


def q8_k(x: np.ndarray) -> np.ndarray:
    """``x`` (rows of a multiple of 256) as ggml's Q8_K holds it: per 256 values, ``d = max / -127`` for the
    value of largest magnitude ``max``, codes ``min(127, round_half_even(x / d))``; returned as ``codes * d``."""
    x32 = x.astype(np.float32).reshape(*x.shape[:-1], -1, 256)
    idx = np.abs(x32).argmax(axis=-1)[..., None]
    mx = np.take_along_axis(x32, idx, axis=-1)
    with np.errstate(divide="ignore"):
        iscale = np.where(mx == 0, np.float32(0), np.float32(-127.0) / mx).astype(np.float32)
    q = np.minimum(np.float32(127), np.rint(iscale * x32))
    d = np.where(mx == 0, np.float32(0), np.float32(1) / iscale).astype(np.float32)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def i8_s(x: np.ndarray) -> np.ndarray:
    """``x`` as bitnet.cpp quantizes activations for an I2_S product: per row, ``s = 127 / max(max|x|, 1e-5)``
    (double, stored as float), codes ``clamp(round_half_even(x * s), -128, 127)``; returned as ``codes / s``."""
    x32 = x.astype(np.float32)
    s = (127.0 / np.maximum(np.abs(x32).max(axis=-1, keepdims=True).astype(np.float64), 1e-5)).astype(np.float32)
    q = np.clip(np.rint(x32 * s), -128, 127)
    return q.astype(np.float64) / s.astype(np.float64)


def rms_norm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * w


def rope_neox(x: np.ndarray, base: float) -> np.ndarray:
    """x: (tokens, heads, head_dim); positions 0..tokens-1; the halves of each head rotate together."""
    t, _, hd = x.shape
    half = hd // 2
    theta = np.arange(t)[:, None] * base ** (-np.arange(half) * 2.0 / hd)[None, :]
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def reference_logits(
    w: dict[str, np.ndarray], tokens: list[int], base: float, act: str | None = "q8_k", f16_inputs: bool = True
) -> np.ndarray:
    """llama.cpp's ``build_bitnet`` in float64 over the GGUF's dequantized weights ``w`` (GGUF names, rows
    first), rounding where llama.cpp rounds: ``act`` the activations of a ternary product, to Q8_K blocks
    (``"q8_k"``, TQ1_0/TQ2_0) or to bitnet.cpp's per-row int8 (``"i8_s"``, I2_S); the KV cache and the queries
    to float16; with ``f16_inputs`` also the inputs of the other float16 products (the attention weights, the
    output's activations), which bitnet.cpp's older ggml multiplies in float32 for a batch of tokens.
    ``act=None``: no rounding at all."""
    q8 = {"q8_k": q8_k, "i8_s": i8_s, None: lambda a: a}[act]
    h16 = f16 if act else (lambda a: a)
    in16 = h16 if f16_inputs else (lambda a: a)
    x = w["token_embd.weight"][tokens]
    n, hd = len(tokens), H // HEADS
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(2):
        b = f"blk.{i}."
        cur = q8(rms_norm(x, w[b + "attn_norm.weight"]))
        q = (cur @ w[b + "attn_q.weight"].T).reshape(n, HEADS, hd)
        k = (cur @ w[b + "attn_k.weight"].T).reshape(n, KV, hd)
        v = h16((cur @ w[b + "attn_v.weight"].T).reshape(n, KV, hd))
        q, k = h16(rope_neox(q, base)), h16(rope_neox(k, base))
        out = np.empty((n, HEADS, hd))
        for hh in range(HEADS):
            kv = hh // (HEADS // KV)
            s = q[:, hh] @ k[:, kv].T / np.sqrt(hd) + mask
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hh] = in16(p / p.sum(axis=1, keepdims=True)) @ v[:, kv]
        cur = q8(rms_norm(out.reshape(n, H), w[b + "attn_sub_norm.weight"]))
        x = x + cur @ w[b + "attn_output.weight"].T
        cur = q8(rms_norm(x, w[b + "ffn_norm.weight"]))
        gate, up = cur @ w[b + "ffn_gate.weight"].T, cur @ w[b + "ffn_up.weight"].T
        cur = q8(rms_norm(gate / (1 + np.exp(-gate)) * up, w[b + "ffn_sub_norm.weight"]))
        x = x + cur @ w[b + "ffn_down.weight"].T
    return in16(rms_norm(x, w["output_norm.weight"])) @ w["token_embd.weight"].T


def read_weights(path: Path) -> tuple[dict[str, np.ndarray], dict[str, object]]:
    """Every tensor of a GGUF file as float64 (rows first), dequantized by the gguf package, and its fields."""
    import gguf

    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        out[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
    return out, {k: f.contents() for k, f in r.fields.items()}


# ------------------------------------------------------------------ the tests


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    d = tmp_path_factory.mktemp("llama_cpp") / "bitnet"
    save_model(d, _tensors(seed=81), config("BitNetForCausalLM", vocab_size=VOCAB), tokenizer=False)
    tok = write_bpe_tokenizer(d, WORDS, all_bytes=True)
    return d, tok["vocab"]  # type: ignore[return-value]


def _tensors(seed: int) -> dict[str, np.ndarray]:
    import test_convert

    old = test_convert.VOCAB
    test_convert.VOCAB = VOCAB
    try:
        t = model_tensors(seed, bitnet=True)
    finally:
        test_convert.VOCAB = old
    t["model.embed_tokens.weight"] *= 0.5
    return t


@needs_llama_cpp
@pytest.mark.parametrize(("qtype", "seed"), [("tq2_0", 82), ("tq1_0", 83)])
def test_llama_cpp_loads_and_matches_reference(
    model: tuple[Path, dict[str, int]], tmp_path: Path, qtype: str, seed: int
) -> None:
    d, vocab = model
    out = tmp_path / f"bitnet-{qtype}.gguf"
    convert_checkpoint(d, out, qtype=qtype, to="gguf", progress=False)
    tokens = np.random.default_rng(seed).integers(0, VOCAB, 9).tolist()
    got = run_harness(out, tokens=tokens)
    assert got["n_vocab"] == VOCAB and got["tokens"] == tokens
    logits = np.array(got["logits"], np.float64)
    assert logits.shape == (len(tokens), VOCAB)
    assert np.isfinite(logits).all()

    w, fields = read_weights(out)
    assert int(w["blk.0.attn_q.weight"].size) == H * H
    ref = reference_logits(w, tokens, float(fields.get("bitnet.rope.freq_base", 10000.0)))  # type: ignore[arg-type]
    scale = np.abs(ref).max()
    err = np.abs(logits - ref).max() / scale
    plain = np.abs(logits - reference_logits(w, tokens, 10000.0, act=None)).max() / scale
    print(f"{qtype}: max |llama.cpp - reference| / max |reference| = {err:.2e} (without llama.cpp's roundings "
          f"{plain:.2e}); argmax agree {np.mean(logits.argmax(1) == ref.argmax(1)):.2f}")  # fmt: skip
    assert err < TOLERANCE, (err, plain)
    assert (logits.argmax(1) == ref.argmax(1)).all()


@needs_llama_cpp
def test_llama_cpp_tq1_0_and_tq2_0_agree(model: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    d, _ = model
    tokens = np.random.default_rng(84).integers(0, VOCAB, 6).tolist()
    got = {}
    for qtype in ("tq1_0", "tq2_0"):
        out = tmp_path / f"{qtype}.gguf"
        convert_checkpoint(d, out, qtype=qtype, to="gguf", progress=False)
        got[qtype] = np.array(run_harness(out, tokens=tokens)["logits"], np.float64)
    # the same ternary values and float16 scales in two layouts: the same products up to summation order
    assert np.abs(got["tq1_0"] - got["tq2_0"]).max() <= 1e-4 * np.abs(got["tq2_0"]).max()


@needs_llama_cpp
def test_llama_cpp_tokenizes_with_the_written_vocab(model: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    d, vocab = model
    out = tmp_path / "tq2_0.gguf"
    convert_checkpoint(d, out, qtype="tq2_0", to="gguf", progress=False)
    chars = byte_chars()
    # Llama 3's pre-tokenizer splits "hello world" into "hello" and " world"; the merges then build each whole
    want = [vocab["".join(chars[b] for b in w.encode())] for w in WORDS]
    got = run_harness(out, text="".join(WORDS))
    assert got["text_tokens"] == want
    # bytes with no merge stay single byte tokens, in GPT-2's byte order
    got = run_harness(out, text="ow!")
    assert got["text_tokens"] == [vocab[chars[b]] for b in b"ow!"]


def _renamed_arch(src: Path, dst: Path, old: str, new: str) -> None:
    """A copy of GGUF file ``src`` whose architecture ``old`` is ``new`` (its keys renamed too), tensors as they are."""
    import gguf

    from bitnet_go.convert import bitnet_cpp_types

    with bitnet_cpp_types():
        r = gguf.GGUFReader(src)
        w = gguf.GGUFWriter(None, new)
        for k, f in r.fields.items():
            if k.startswith("GGUF.") or k == "general.architecture":
                continue
            sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(k.replace(old + ".", new + ".", 1) if k.startswith(old + ".") else k, f.contents(),
                            f.types[0], sub_type=sub)  # fmt: skip
        raw = np.memmap(src, np.uint8, mode="r")
        ends = [int(t.data_offset) for t in r.tensors[1:]] + [len(raw)]
        parts = []
        for t, end in zip(r.tensors, ends, strict=True):
            shape = tuple(int(d) for d in reversed(t.shape))
            n = int(np.prod(shape)) // 4 + 32 if int(t.tensor_type) == 36 else int(t.n_bytes)
            assert int(t.data_offset) + n <= end
            parts.append(np.array(raw[t.data_offset : t.data_offset + n]))
            w.add_tensor_info(t.name, shape, np.dtype(np.int8), n, raw_dtype=t.tensor_type)
        w.write_header_to_file(path=dst)
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for a in parts:
            w.write_tensor_data(a)
        w.close()


@needs_bitnet_cpp
@pytest.mark.parametrize("seed", [85])
def test_bitnet_cpp_loads_i2_s_and_matches_reference(
    model: tuple[Path, dict[str, int]], tmp_path: Path, seed: int
) -> None:
    import bitnet_go
    from bitnet_go.convert import bitnet_cpp_types

    d, _ = model
    out = tmp_path / "bitnet-i2_s.gguf"
    convert_checkpoint(d, out, qtype="i2_s", to="gguf", progress=False)
    # bitnet.cpp's fork of October 2024 (the one buildable here) names the architecture "bitnet"; the converter
    # writes what bitnet.cpp's current converter writes, "bitnet-b1.58": the keys are renamed for this load
    old = tmp_path / "bitnet-i2_s-arch-bitnet.gguf"
    _renamed_arch(out, old, "bitnet-b1.58", "bitnet")
    tokens = np.random.default_rng(seed).integers(0, VOCAB, 9).tolist()
    got = run_harness(old, tokens=tokens, harness=BITNET_HARNESS)
    logits = np.array(got["logits"], np.float64)
    assert logits.shape == (len(tokens), VOCAB) and np.isfinite(logits).all()

    import gguf

    src = _tensors(81)
    raw = np.memmap(out, np.uint8, mode="r")
    w: dict[str, np.ndarray] = {}
    with bitnet_cpp_types():
        for t in gguf.GGUFReader(out).tensors:
            shape = tuple(int(x) for x in reversed(t.shape))
            if int(t.tensor_type) == 36:
                n = int(np.prod(shape)) // 4 + 32
                back = bitnet_go.TernaryTensor.from_gguf_bytes(raw[t.data_offset : t.data_offset + n], shape, "i2_s")
                w[t.name] = back.dequantize().astype(np.float64)
            else:
                w[t.name] = np.asarray(t.data, np.float64).reshape(shape)
    hf = {_gguf_name(n): a for n, a in src.items()}
    for name, a in w.items():  # the file holds the intended ternarisation of the checkpoint's weights
        if name.startswith("blk.") and name.endswith(("_q.weight", "_k.weight", "_v.weight", "output.weight",
                                                      "gate.weight", "up.weight", "down.weight")):  # fmt: skip
            assert np.array_equal(a, bitnet_go.quantize_i2s(hf[name]).dequantize()), name
    ref = reference_logits(w, tokens, 10000.0, act="i8_s", f16_inputs=False)
    scale = np.abs(ref).max()
    err = np.abs(logits - ref).max() / scale
    plain = np.abs(logits - reference_logits(w, tokens, 10000.0, act=None)).max() / scale
    print(f"i2_s (bitnet.cpp): max |bitnet.cpp - reference| / max |reference| = {err:.2e} (without its roundings "
          f"{plain:.2e})")  # fmt: skip
    assert err < TOLERANCE, (err, plain)
    assert (logits.argmax(1) == ref.argmax(1)).all()


def _gguf_name(name: str) -> str:
    from bitnet_go.convert._gguf import tensor_name

    return tensor_name(name)
