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

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ._formats import BITNET_CPP_FORMATS, TQ_BLOCK
from ._reader import is_json_int, load_json_object

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


UINT32_MAX = 2**32 - 1
"""GGUF stores the model's sizes and counts as uint32."""

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""GGUF stores rope_theta, the norm epsilons and the rope scaling factor as float32."""


class ConfigError(ValueError):
    """``config.json`` lacks what the GGUF metadata needs, or holds a value it cannot use (the message names
    the key)."""


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
    (llama.cpp's rotary embedding pairs a head's first and second halves differently); None otherwise. The
    config's heads are checked by :func:`heads` (a :class:`ConfigError` naming the key).

    Example:
        >>> cfg = {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2}
        >>> permutation("model.layers.0.self_attn.k_proj.weight", "llama", cfg)
        (4, 2)
        >>> permutation("model.layers.0.self_attn.v_proj.weight", "llama", cfg) is None
        True
    """
    if arch != "llama" or not name.endswith(("q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias")):
        return None
    n_head, kv = heads(config, arch)
    return (n_head, n_head) if "q_proj" in name else (n_head, kv if kv is not None else n_head)


def check_permutable(shape: Sequence[int], n_head_kv: int, where: str) -> None:
    """Refuse a q/k projection of ``shape`` whose rows do not split into ``n_head_kv`` heads of two equal
    halves (what :func:`permute_rows` needs): a ``ValueError`` starting with ``where``.

    Example:
        >>> check_permutable((8, 4), 2, "w")
        >>> check_permutable((6, 4), 2, "w")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: w: its 6 rows do not split into 2 heads of two equal halves...
    """
    if not shape or shape[0] % (2 * n_head_kv):
        rows = shape[0] if shape else 0
        raise ValueError(
            f"{where}: its {rows} rows do not split into {n_head_kv} heads of two equal halves, as llama.cpp's "
            "rotary embedding reorders them (config.json num_attention_heads / num_key_value_heads)"
        )


def permute_rows(w: np.ndarray, n_head: int, n_head_kv: int) -> np.ndarray:
    """Reorder the rows of a q/k projection as llama.cpp's converter does: within each head,
    rows (0, h, 1, h+1, ...) of the two halves of size h interleave.

    Example:
        >>> permute_rows(np.arange(4), 1, 1).tolist()
        [0, 2, 1, 3]
    """
    check_permutable(w.shape, n_head_kv, "cannot permute")
    rows = w.shape[0]
    out = w.reshape(n_head_kv, 2, rows // n_head_kv // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    return np.ascontiguousarray(out)


def heads(config: dict[str, Any], arch: str) -> tuple[int, int | None]:
    """``config.json``'s attention heads and key/value heads (None when it has no ``num_key_value_heads``),
    checked: counts (see :func:`_check_count`); the key/value heads dividing the heads (grouped-query
    attention shares each among an equal number of heads); and, without a ``head_dim``, the heads dividing
    ``hidden_size`` (the head size derived from them). A :class:`ConfigError` naming the key otherwise.

    Example:
        >>> heads({"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2}, "llama")
        (8, 2)
        >>> heads({"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 3}, "llama")
        Traceback (most recent call last):
        bitnet_go.convert._gguf.ConfigError: config.json: 'num_key_value_heads' (3) must divide the number of \
attention heads (8): each key/value head serves an equal group of heads
    """
    n_head = _count(config, ["num_attention_heads", "n_head"], f"{arch}.attention.head_count")
    kv = _count_or_none(config, ["num_key_value_heads"], f"{arch}.attention.head_count_kv")
    if kv is not None and n_head % kv:
        raise ConfigError(
            f"config.json: 'num_key_value_heads' ({kv}) must divide the number of attention heads ({n_head}): "
            "each key/value head serves an equal group of heads"
        )
    if _count_or_none(config, ["head_dim"], f"{arch}.attention.key_length") is None:
        embd_key, v = _require(config, ["hidden_size", "n_embd"], f"{arch}.embedding_length")
        n_embd = _check_count(embd_key, v, f"{arch}.embedding_length")
        if n_embd % n_head:
            raise ConfigError(
                f"config.json: {embd_key!r} ({n_embd}) is not a multiple of the number of attention heads "
                f"({n_head}), so the head size is not whole (a model whose heads have another size gives 'head_dim')"
            )
    return n_head, kv


def _find(config: dict[str, Any], keys: list[str]) -> tuple[str, Any] | None:
    """The first of ``keys`` that ``config`` has, and its value (None if it has none)."""
    for k in keys:
        if k in config:
            return k, config[k]
    return None


def _require(config: dict[str, Any], keys: list[str], what: str) -> tuple[str, Any]:
    """:func:`_find`, a missing key a :class:`ConfigError` naming the keys and the GGUF key ``what`` that needs one."""
    found = _find(config, keys)
    if found is None:
        names = " or ".join(repr(k) for k in keys)
        raise ConfigError(f"config.json has no {names} (needed for GGUF key {what})")
    return found


def _count(config: dict[str, Any], keys: list[str], what: str) -> int:
    """The first of ``keys`` in ``config`` (required), checked by :func:`_check_count`."""
    return _check_count(*_require(config, keys, what), what)


def _count_or_none(config: dict[str, Any], keys: list[str], what: str) -> int | None:
    """The first of ``keys`` in ``config``, checked by :func:`_check_count`; None if none is there or it is null."""
    found = _find(config, keys)
    return None if found is None or found[1] is None else _check_count(*found, what)


def _check_count(key: str, v: object, what: str) -> int:
    """``v``, the value of ``config.json``'s ``key``, checked as a size or count: a JSON integer from 1 to
    :data:`UINT32_MAX` (GGUF key ``what`` stores it as uint32); ``4.5``, ``0``, ``-4``, ``null`` or ``true``
    is a :class:`ConfigError` naming the key.

    Example:
        >>> _check_count("n_head", 4, "llama.attention.head_count")
        4
        >>> _check_count("n_head", 4.5, "llama.attention.head_count")
        Traceback (most recent call last):
        bitnet_go.convert._gguf.ConfigError: config.json: 'n_head' must be an integer from 1 to 4294967295 \
(for GGUF key llama.attention.head_count), got 4.5
    """
    if not is_json_int(v) or not 1 <= v <= UINT32_MAX:  # type: ignore[operator]
        raise ConfigError(f"config.json: {key!r} must be an integer from 1 to {UINT32_MAX} (for GGUF key {what}), "
                          f"got {v!r}")  # fmt: skip
    return v  # type: ignore[return-value]


def _number(v: object, key: str, what: str, positive: bool) -> float:
    """``v``, the value of ``config.json``'s ``key``, checked as a real number GGUF key ``what`` can store as
    float32: finite, at most :data:`FLOAT32_MAX` in size, and > 0 (``positive``) or >= 0; a
    :class:`ConfigError` naming the key otherwise.

    Example:
        >>> _number(1e-5, "rms_norm_eps", "llama.attention.layer_norm_rms_epsilon", positive=False)
        1e-05
        >>> _number("1e4", "rope_theta", "llama.rope.freq_base", positive=True)
        Traceback (most recent call last):
        bitnet_go.convert._gguf.ConfigError: config.json: 'rope_theta' must be a number > 0 \
(for GGUF key llama.rope.freq_base, a float32), got '1e4'
    """
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) <= FLOAT32_MAX
    if not ok or v < 0 or (positive and v == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"config.json: {key!r} must be a number {bound} (for GGUF key {what}, a float32), got {v!r}")
    return float(v)  # type: ignore[arg-type]


def add_metadata(writer: Any, config: dict[str, Any], arch: str, qtype: str, root: Path) -> None:  # noqa: ANN401
    """The model's hyperparameters as GGUF keys, from ``config.json``, as the matching converter writes them.

    A required key missing from the config, or a value the key cannot hold (a
    size or count that is not an integer from 1 to 2**32 - 1, a float that is
    not a finite number in range, heads as :func:`heads` refuses them), is a
    :class:`ConfigError` naming it.
    """
    a = arch
    writer.add_name(root.name)
    if qtype not in BITNET_CPP_FORMATS:  # llama.cpp's converter also writes these
        writer.add_type("model")
        writer.add_quantization_version(2)
    writer.add_block_count(_count(config, ["n_layers", "num_hidden_layers", "n_layer"], f"{a}.block_count"))
    ctx_keys = ["max_position_embeddings", "n_ctx"] + ([] if qtype in BITNET_CPP_FORMATS else ["n_positions"])
    if (n_ctx := _count_or_none(config, ctx_keys, f"{a}.context_length")) is not None:
        writer.add_context_length(n_ctx)
    n_embd = _count(config, ["hidden_size", "n_embd"], f"{a}.embedding_length")
    writer.add_embedding_length(n_embd)
    if (n_ff := _count_or_none(config, ["intermediate_size", "n_inner"], f"{a}.feed_forward_length")) is not None:
        writer.add_feed_forward_length(n_ff)
    n_head, kv = heads(config, a)
    writer.add_head_count(n_head)
    if kv is not None:
        writer.add_head_count_kv(kv)
    if (theta := config.get("rope_theta")) is not None:
        writer.add_rope_freq_base(_number(theta, "rope_theta", f"{a}.rope.freq_base", positive=True))
    if (eps := config.get("rms_norm_eps")) is not None:
        rms = f"{a}.attention.layer_norm_rms_epsilon"
        writer.add_layer_norm_rms_eps(_number(eps, "rms_norm_eps", rms, positive=False))
    found = _find(config, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])
    if found is not None and found[1] is not None:
        writer.add_layer_norm_eps(_number(found[1], found[0], f"{a}.attention.layer_norm_epsilon", positive=False))
    if (n := _count_or_none(config, ["num_local_experts"], f"{a}.expert_count")) is not None:
        writer.add_expert_count(n)
    if (n := _count_or_none(config, ["num_experts_per_tok"], f"{a}.expert_used_count")) is not None:
        writer.add_expert_used_count(n)
    head_dim = _count_or_none(config, ["head_dim"], f"{a}.attention.key_length")
    if head_dim is not None and qtype not in BITNET_CPP_FORMATS:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_file_type(FILE_TYPES[qtype])
    if arch == "bitnet":  # llama.cpp's BitnetModel
        writer.add_rope_scaling_type(_rope_linear())
        writer.add_rope_scaling_factor(1.0)
        return
    writer.add_vocab_size(_count(config, ["vocab_size"], f"{a}.vocab_size"))
    writer.add_rope_dimension_count(head_dim if head_dim is not None else n_embd // n_head)
    if arch == "llama" and qtype in BITNET_CPP_FORMATS:
        rs = config.get("rope_scaling")
        if isinstance(rs, dict) and "factor" in rs and rs.get("type") == "linear":
            writer.add_rope_scaling_type(_rope_linear())
            factor = _number(rs["factor"], "rope_scaling.factor", f"{a}.rope.scaling.factor", positive=True)
            writer.add_rope_scaling_factor(factor)
        tc = root / "tokenizer_config.json"
        if tc.is_file():
            tok = load_json_object(tc)
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
