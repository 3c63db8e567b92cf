"""GGUF output: architectures, tensor names, tensor types, metadata and file types.

What is written follows the converters inference engines ship with:

- I2_S, TL1, TL2: bitnet.cpp's ``utils/convert-hf-to-gguf-bitnet.py``.
  ``BitnetForCausalLM``/``BitNetForCausalLM`` become architecture
  ``bitnet-b1.58``, ``LlamaForCausalLM``/``MistralForCausalLM`` ``llama``
  (whose q/k projection rows are permuted as llama.cpp's rotary embedding
  expects). Quantized weights get GGML type I2_S (36), TL1 (38) or TL2 (39),
  with the value shape; TL1/TL2 weights get a float32 ``<name>_scale`` tensor
  of shape (1,) beside them. Other 2-D tensors are F16, 1-D tensors and norms
  F32. ``general.file_type`` is 40 (``LLAMA_FTYPE_MOSTLY_I2_S``) for I2_S and
  the type id itself (38, 39) for TL1/TL2, as that converter writes.
- TQ1_0, TQ2_0: llama.cpp's ``convert_hf_to_gguf.py --outtype tq1_0|tq2_0``:
  architecture ``bitnet`` or ``llama``, types TQ1_0 (34) / TQ2_0 (35), file
  types 36 / 37, token embedding and output F16, a tensor whose last dimension
  is not a multiple of 256 F16 (llama.cpp's fallback).

upstream ``gguf`` has no I2_S/TL1/TL2 members: they are written as their
plain type ids (the writer stores the number), and :func:`bitnet_cpp_types`
lets ``gguf.GGUFReader`` read them back for the length of a ``with`` block.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ._formats import BITNET_CPP_FORMATS, TQ_BLOCK

TYPE_IDS = {"F32": 0, "F16": 1, "TQ1_0": 34, "TQ2_0": 35, "I2_S": 36, "TL1": 38, "TL2": 39}
"""GGML tensor type ids (ggml.h; I2_S/TL1/TL2 as bitnet.cpp's ggml defines them)."""

FILE_TYPES = {"i2_s": 40, "tl1": 38, "tl2": 39, "tq1_0": 36, "tq2_0": 37}
"""``general.file_type`` per format: bitnet.cpp's converter writes 40 for I2_S and the GGML type id for TL1/TL2;
llama.cpp's writes ``LLAMA_FTYPE_MOSTLY_TQ1_0`` (36) / ``TQ2_0`` (37)."""

BITNET_CPP_SIZES = {36: ("I2_S", 4, 1), 38: ("TL1", 4, 1), 39: ("TL2", 8, 1)}
"""(name, block size, type size) of bitnet.cpp's types for ``gguf.GGUFReader``: as its gguf-py fork declares
I2_S and TL1; TL2 as 8 values per byte, fewer bytes than a TL2 tensor holds (about 5/24 of a byte per value,
``_tl_gguf.gguf_len``), where the fork's 4 would read past the end of a file whose last tensors are TL2."""

BITNET_ARCHS = ("BitnetForCausalLM", "BitNetForCausalLM")
LLAMA_ARCHS = ("LlamaForCausalLM", "LLaMAForCausalLM", "MistralForCausalLM")

TQ_F16 = ("token_embd.weight", "output.weight")
"""llama.cpp's converter stores these F16 under TQ1_0/TQ2_0 (its "TODO: use Q4_K and Q6_K")."""

SKIP_SUFFIXES = (".rotary_emb.inv_freq", ".attention.masked_bias", ".attention.bias")
"""Tensors both converters leave out."""

_GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
_BLOCK = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.inner_attn_ln": "attn_sub_norm",
    "self_attn.attn_sub_norm": "attn_sub_norm",
    "mlp.ffn_layernorm": "ffn_sub_norm",
    "mlp.ffn_sub_norm": "ffn_sub_norm",
}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")


class ConfigError(ValueError):
    """``config.json`` lacks what the GGUF metadata needs (the message names the key)."""


def arch_of(config: dict[str, Any] | None, qtype: str) -> str:
    """The GGUF architecture of a Hugging Face ``config.json`` for output format ``qtype``.

    Example:
        >>> cfg = {"architectures": ["BitNetForCausalLM"]}
        >>> arch_of(cfg, "i2_s"), arch_of(cfg, "tq2_0")
        ('bitnet-b1.58', 'bitnet')
        >>> arch_of({}, "i2_s")
        Traceback (most recent call last):
        bitnet_go.convert._gguf.ConfigError: config.json has no 'architectures' (needed for general.architecture)
    """
    if config is None:
        raise ConfigError("GGUF output needs the checkpoint's config.json (none found beside the input)")
    archs = config.get("architectures")
    if not archs or not isinstance(archs, list):
        raise ConfigError("config.json has no 'architectures' (needed for general.architecture)")
    a = archs[0]
    if a in BITNET_ARCHS:
        return "bitnet-b1.58" if qtype in BITNET_CPP_FORMATS else "bitnet"
    if a in LLAMA_ARCHS:
        return "llama"
    raise ConfigError(
        f"config.json: architectures[0] = {a!r} has no GGUF mapping here "
        f"(supported: {', '.join(BITNET_ARCHS + LLAMA_ARCHS)})"
    )


def skipped(name: str) -> bool:
    """Whether the converters leave tensor ``name`` out of a GGUF file.

    Example:
        >>> skipped("model.layers.0.self_attn.rotary_emb.inv_freq")
        True
    """
    return name.endswith(SKIP_SUFFIXES)


def tensor_name(name: str) -> str:
    """The GGUF name of Hugging Face tensor ``name`` (llama.cpp's names for LLaMA-like models).

    Example:
        >>> tensor_name("model.layers.3.self_attn.o_proj.weight"), tensor_name("model.embed_tokens.weight")
        ('blk.3.attn_output.weight', 'token_embd.weight')
        >>> tensor_name("encoder.foo.weight")
        Traceback (most recent call last):
        ValueError: cannot map tensor 'encoder.foo.weight' to a GGUF name (LLaMA/BitNet layout expected)
    """
    base, dot, suffix = name.rpartition(".")
    if suffix not in ("weight", "bias") or not dot:
        base, suffix = name, ""
    mapped = _GLOBAL.get(base)
    if mapped is None:
        m = _LAYER.fullmatch(base)
        if m and m.group(2) in _BLOCK:
            mapped = f"blk.{m.group(1)}.{_BLOCK[m.group(2)]}"
    if mapped is None:
        raise ValueError(f"cannot map tensor {name!r} to a GGUF name (LLaMA/BitNet layout expected)")
    return f"{mapped}.{suffix}" if suffix else mapped


def float_type(gguf_name: str, shape: tuple[int, ...]) -> str:
    """``"F32"`` or ``"F16"`` for a tensor that is not quantized: 1-D tensors, norms and biases F32,
    other 2-D+ weights F16 (embeddings included).

    Example:
        >>> float_type("token_embd.weight", (10, 4)), float_type("blk.0.attn_norm.weight", (4,))
        ('F16', 'F32')
    """
    if len(shape) <= 1 or gguf_name.endswith("_norm.weight") or not gguf_name.endswith(".weight"):
        return "F32"
    return "F16"


def tq_fits(shape: tuple[int, ...]) -> bool:
    """Whether TQ1_0/TQ2_0 can hold a tensor: its last dimension a multiple of 256.

    Example:
        >>> tq_fits((8, 512)), tq_fits((8, 100))
        (True, False)
    """
    return len(shape) >= 1 and shape[-1] % TQ_BLOCK == 0


def permutation(name: str, arch: str, config: dict[str, Any]) -> tuple[int, int] | None:
    """``(n_head, n_head_kv)`` for the q/k projections whose rows a ``llama`` GGUF stores permuted
    (llama.cpp's rotary embedding pairs a head's first and second halves differently); None otherwise.

    Example:
        >>> cfg = {"num_attention_heads": 4, "num_key_value_heads": 2}
        >>> permutation("model.layers.0.self_attn.k_proj.weight", "llama", cfg)
        (4, 2)
        >>> permutation("model.layers.0.self_attn.v_proj.weight", "llama", cfg) is None
        True
    """
    if arch != "llama" or not name.endswith(("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias")):
        return None
    n_head = int(_find(config, ["num_attention_heads"], f"{arch}.attention.head_count"))
    kv = config.get("num_key_value_heads")
    return (n_head, n_head) if "q_proj" in name else (n_head, int(kv) if kv is not None else n_head)


def permute_rows(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """Reorder the rows of a q/k projection as llama.cpp's converter does: within each head,
    rows (0, h, 1, h+1, ...) of the two halves of size h interleave.

    Example:
        >>> permute_rows(np.arange(4), 1, 1).tolist()
        [0, 2, 1, 3]
    """
    heads = n_head_kv if n_head_kv != n_head else n_head
    rows = w.shape[0]
    if rows % (2 * heads):
        raise ValueError(f"cannot permute {rows} rows into {heads} heads of two halves")
    out = w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    return np.ascontiguousarray(out)


def _find(config: dict[str, Any], keys: list[str], what: str, optional: bool = False) -> Any:  # noqa: ANN401
    for k in keys:
        if k in config:
            return config[k]
    if optional:
        return None
    names = " or ".join(repr(k) for k in keys)
    raise ConfigError(f"config.json has no {names} (needed for GGUF key {what})")


def add_metadata(writer: Any, config: dict[str, Any], arch: str, qtype: str, root: Path) -> None:  # noqa: ANN401
    """The model's hyperparameters as GGUF keys, from ``config.json``, as the matching converter writes them.

    A required key missing from the config is a :class:`ConfigError` naming it.
    """
    a = arch
    writer.add_name(root.name)
    if qtype not in BITNET_CPP_FORMATS:  # llama.cpp's converter also writes these
        writer.add_type("model")
        writer.add_quantization_version(2)
    writer.add_block_count(int(_find(config, ["n_layers", "num_hidden_layers", "n_layer"], f"{a}.block_count")))
    ctx_keys = ["max_position_embeddings", "n_ctx"] + ([] if qtype in BITNET_CPP_FORMATS else ["n_positions"])
    if (n_ctx := _find(config, ctx_keys, "", optional=True)) is not None:
        writer.add_context_length(int(n_ctx))
    n_embd = int(_find(config, ["hidden_size", "n_embd"], f"{a}.embedding_length"))
    writer.add_embedding_length(n_embd)
    if (n_ff := _find(config, ["intermediate_size", "n_inner"], "", optional=True)) is not None:
        writer.add_feed_forward_length(int(n_ff))
    n_head = int(_find(config, ["num_attention_heads", "n_head"], f"{a}.attention.head_count"))
    writer.add_head_count(n_head)
    if (kv := config.get("num_key_value_heads")) is not None:
        writer.add_head_count_kv(int(kv))
    if (theta := config.get("rope_theta")) is not None:
        writer.add_rope_freq_base(float(theta))
    if (eps := config.get("rms_norm_eps")) is not None:
        writer.add_layer_norm_rms_eps(float(eps))
    if (eps := _find(config, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"], "", optional=True)) is not None:
        writer.add_layer_norm_eps(float(eps))
    if (n := config.get("num_local_experts")) is not None:
        writer.add_expert_count(int(n))
    if (n := config.get("num_experts_per_tok")) is not None:
        writer.add_expert_used_count(int(n))
    head_dim = config.get("head_dim")
    if head_dim is not None and qtype not in BITNET_CPP_FORMATS:
        writer.add_key_length(int(head_dim))
        writer.add_value_length(int(head_dim))
    writer.add_file_type(FILE_TYPES[qtype])
    if arch == "bitnet":  # llama.cpp's BitnetModel
        writer.add_rope_scaling_type(_rope_linear())
        writer.add_rope_scaling_factor(1.0)
        return
    writer.add_vocab_size(int(_find(config, ["vocab_size"], f"{a}.vocab_size")))
    writer.add_rope_dimension_count(int(head_dim) if head_dim is not None else n_embd // n_head)
    if arch == "llama" and qtype in BITNET_CPP_FORMATS:
        rs = config.get("rope_scaling")
        if isinstance(rs, dict) and "factor" in rs and rs.get("type") == "linear":
            writer.add_rope_scaling_type(_rope_linear())
            writer.add_rope_scaling_factor(float(rs["factor"]))
        tc = root / "tokenizer_config.json"
        if tc.is_file():
            tok = json.loads(tc.read_text())
            if "add_prefix_space" in tok:
                writer.add_add_space_prefix(bool(tok["add_prefix_space"]))


def _rope_linear() -> Any:  # noqa: ANN401
    import gguf

    return gguf.RopeScalingType.LINEAR


@contextmanager
def bitnet_cpp_types() -> Iterator[None]:
    """Within the block, ``gguf.GGMLQuantizationType`` and ``gguf.GGML_QUANT_SIZES`` know I2_S (36),
    TL1 (38) and TL2 (39) as bitnet.cpp's gguf-py fork does, so that ``gguf.GGUFReader`` opens the files
    written here; the package is as it was afterwards. Upstream ids that bitnet.cpp's types reuse (39 is
    MXFP4 in gguf >= 0.17) read as bitnet.cpp's within the block.

    A reader sizes an I2_S or TL1 tensor as ``n / 4`` bytes, without the 32-byte tail of an I2_S tensor
    (bitnet.cpp's own loader reads the scale right after those bytes), and a TL2 tensor as ``n / 8``
    bytes, a prefix of its data: its length is ``bitnet_go.convert._tl_gguf.gguf_len("tl2", shape)``.

    Example:
        >>> import gguf
        >>> with bitnet_cpp_types():
        ...     gguf.GGMLQuantizationType(36).name, gguf.GGMLQuantizationType(39).name
        ('I2_S', 'TL2')
        >>> 36 in gguf.GGMLQuantizationType._value2member_map_
        False
    """
    from gguf import constants

    cls = constants.GGMLQuantizationType
    replaced: list[tuple[int, Any, Any]] = []  # (id, the member it had or None, ours)
    for tid, (name, block, size) in BITNET_CPP_SIZES.items():
        old = cls._value2member_map_.get(tid)
        if old is not None and old.name == name:
            continue  # a gguf that has it (bitnet.cpp's fork): nothing to add
        member = int.__new__(cls, tid)
        member._name_ = name
        member._value_ = tid
        cls._value2member_map_[tid] = member
        constants.GGML_QUANT_SIZES[member] = (block, size)
        replaced.append((tid, old, member))
    try:
        yield
    finally:
        for tid, old, member in replaced:
            constants.GGML_QUANT_SIZES.pop(member, None)
            if old is None:
                cls._value2member_map_.pop(tid, None)
            else:
                cls._value2member_map_[tid] = old
