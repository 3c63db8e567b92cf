"""GGUF tokenizer metadata (``tokenizer.ggml.*``): what llama.cpp needs to load a model.

The keys follow llama.cpp's ``convert_hf_to_gguf.py`` for the families mapped
here (LLaMA, Mistral, BitNet):

- ``tokenizer.model`` (SentencePiece) beside the checkpoint: tokenizer model
  ``"llama"``, pre-tokenizer ``"default"``, the pieces with their scores and
  types, padded to the model's vocabulary size with ``[PAD<i>]`` (type
  UNUSED), ``added_tokens.json`` and ``tokenizer_config.json``'s
  ``added_tokens_decoder`` applied. Needs the ``sentencepiece`` package.
- else ``tokenizer.json`` of a byte-level BPE tokenizer (GPT-2, Llama 3):
  tokenizer model ``"gpt2"``, the tokens (ids with no token become
  ``[PAD<i>]``, type UNUSED; added tokens CONTROL when special or shaped like
  ``<|...|>``, else USER_DEFINED), the merges, and the pre-tokenizer name
  llama.cpp knows it by. The converter finds that name by hashing what the
  tokenizer makes of a test string (which needs ``transformers``); here it is
  read from ``tokenizer.json``'s pre-tokenizer itself (:data:`PRE_TOKENIZERS`),
  or given (``--tokenizer-pre``).

Both then add what ``gguf.SpecialVocab`` reads (bos/eos/unk/pad ids from
``tokenizer_config.json``/``config.json``, ``add_bos_token``/``add_eos_token``,
the chat template; the merges for BPE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6
"""llama.cpp's token types (``llama_token_type``; gguf's ``TokenType``)."""

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

PRE_TOKENIZERS: dict[str, str] = {
    "split:" + _LLAMA3_SPLIT: "llama-bpe",
    "bytelevel": "gpt-2",
}
"""A byte-level BPE tokenizer's pre-tokenizer (as :func:`pre_tokenizer_key` describes it) -> llama.cpp's
``tokenizer.ggml.pre`` name: Llama 3's regex split (Llama 3, BitNet b1.58 2B4T) and GPT-2's own."""


class TokenizerError(ValueError):
    """The checkpoint's tokenizer files cannot be written as GGUF metadata (the message says why)."""


@dataclass(frozen=True)
class Vocab:
    """What :func:`add_to_gguf` writes: the tokenizer model, pre-tokenizer and one entry per token id."""

    model: str  # "gpt2" or "llama"
    pre: str
    tokens: list[str]
    types: list[int]
    scores: list[float] | None  # SentencePiece only
    special: Any  # gguf.SpecialVocab: merges, special token ids, add_bos/add_eos, chat template


def pre_tokenizer_key(tok: dict[str, Any]) -> str:
    """A byte-level BPE ``tokenizer.json``'s pre-tokenizer as one string: ``"split:<regex>"`` for a
    regex split followed by a byte-level step, ``"bytelevel"`` for GPT-2's byte-level step alone.

    Example:
        >>> pre_tokenizer_key({"pre_tokenizer": {"type": "ByteLevel", "use_regex": True}})
        'bytelevel'
        >>> pre_tokenizer_key({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        ...     {"type": "Split", "pattern": {"Regex": "a|b"}}, {"type": "ByteLevel", "use_regex": False}]}})
        'split:a|b'
    """
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps if isinstance(s, dict)]
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        return "bytelevel"
    if kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True):
        pattern = steps[0].get("pattern") or {}
        if isinstance(pattern.get("Regex"), str):
            return "split:" + pattern["Regex"]
    return json.dumps(pre, sort_keys=True)


def looks_special(token: str) -> bool:
    """Whether an added token not marked special is still a control token, as llama.cpp's converter
    decides (``<|...|>``, ``<｜...｜>``, ``<unused...>``, ``<pad>``, ``<mask>``, ``<2mass>``, ``[@BOS@]``).

    Example:
        >>> looks_special("<|eot_id|>"), looks_special("hello")
        (True, False)
    """
    return (
        token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (token.startswith("<|") and token.endswith("|>"))
        or (token.startswith("<\uff5c") and token.endswith("\uff5c>"))
        or (token.startswith("<unused") and token.endswith(">"))
    )


def read_vocab(root: Path, n_vocab: int, pre: str | None = None) -> Vocab:
    """The vocabulary of the checkpoint in ``root`` for a model of ``n_vocab`` token ids.

    ``pre`` overrides the pre-tokenizer name of a BPE tokenizer. A missing
    tokenizer, an unknown kind or pre-tokenizer, or more tokens than
    ``n_vocab`` is a :class:`TokenizerError`; a ``tokenizer.model`` without the
    ``sentencepiece`` package an ``ImportError``.

    Example:
        >>> import tempfile
        >>> read_vocab(Path(tempfile.mkdtemp()), 8)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        bitnet_go.convert._tokenizer.TokenizerError: GGUF output needs the tokenizer: no tokenizer.model ...
    """
    spm, tj = root / "tokenizer.model", root / "tokenizer.json"
    if spm.is_file():
        return _sentencepiece(root, spm, n_vocab)
    if tj.is_file():
        return _bpe(root, tj, n_vocab, pre)
    raise TokenizerError(
        f"GGUF output needs the tokenizer: no tokenizer.model or tokenizer.json in {root} "
        "(llama.cpp refuses a model without tokenizer.ggml.* keys); give --no-tokenizer to write the file "
        "without them"
    )


def _bpe(root: Path, path: Path, n_vocab: int, pre: str | None) -> Vocab:
    try:
        tok = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerError(f"{path}: not valid JSON ({e})") from None
    model = tok.get("model") if isinstance(tok, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
        raise TokenizerError(f"{path}: expected a tokenizer.json with a 'model' object holding a 'vocab'")
    decoder = (tok.get("decoder") or {}).get("type")
    if model.get("type") != "BPE" or model.get("byte_fallback") or decoder != "ByteLevel":
        raise TokenizerError(
            f"{path}: a byte-level BPE tokenizer was expected (model type BPE without byte_fallback, decoder "
            f"ByteLevel), got model type {model.get('type')!r}, byte_fallback {model.get('byte_fallback')!r}, "
            f"decoder {decoder!r}; a SentencePiece model needs its tokenizer.model"
        )
    if pre is None:
        key = pre_tokenizer_key(tok)
        pre = PRE_TOKENIZERS.get(key)
        if pre is None:
            raise TokenizerError(
                f"{path}: pre-tokenizer not recognised ({key[:200]}); known: Llama 3's regex split (llama-bpe) "
                "and GPT-2's byte-level step (gpt-2); give its llama.cpp name with --tokenizer-pre"
            )
    tokens: list[str | None] = [None] * n_vocab
    types = [TOKEN_UNUSED] * n_vocab
    for text, i in model["vocab"].items():
        _place(path, tokens, types, i, text, TOKEN_NORMAL)
    for a in tok.get("added_tokens") or []:
        text = a.get("content")
        if not isinstance(text, str):
            continue
        kind = TOKEN_CONTROL if a.get("special") or looks_special(text) else TOKEN_USER_DEFINED
        _place(path, tokens, types, a.get("id"), text, kind)
    special = _special(root, n_vocab, merges=True)
    if not special.merges:
        raise TokenizerError(f"{path}: the BPE tokenizer has no merges (llama.cpp needs them)")
    return Vocab("gpt2", pre, [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)], types, None, special)


def _place(path: Path, tokens: list[str | None], types: list[int], i: object, text: str, kind: int) -> None:
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise TokenizerError(f"{path}: token {text!r} has id {i!r}; expected an int >= 0")
    if i >= len(tokens):
        raise TokenizerError(
            f"{path}: token {text!r} has id {i}, but the model has {len(tokens)} token ids "
            "(config.json vocab_size / the embedding's rows)"
        )
    tokens[i], types[i] = text, kind


def _sentencepiece(root: Path, path: Path, n_vocab: int) -> Vocab:
    try:
        from sentencepiece import SentencePieceProcessor
    except ImportError:
        raise ImportError(
            f"{path} is a SentencePiece model: reading it needs the sentencepiece package "
            "(pip install sentencepiece), or give --no-tokenizer"
        ) from None
    sp = SentencePieceProcessor()
    sp.LoadFromFile(str(path))
    n = sp.vocab_size()
    if n > n_vocab:
        raise TokenizerError(f"{path} has {n} pieces, but the model has {n_vocab} token ids")
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    scores = [-10000.0] * n_vocab
    types = [TOKEN_UNUSED] * n_vocab
    for i in range(n):
        tokens[i], scores[i] = sp.IdToPiece(i), float(sp.GetScore(i))
        if sp.IsUnknown(i):
            types[i] = TOKEN_UNKNOWN
        elif sp.IsControl(i):
            types[i] = TOKEN_CONTROL
        elif sp.IsUnused(i):
            types[i] = TOKEN_UNUSED
        elif sp.IsByte(i):
            types[i] = TOKEN_BYTE
        else:
            types[i] = TOKEN_NORMAL
    added = root / "added_tokens.json"
    if added.is_file():
        for text, i in json.loads(added.read_text(encoding="utf-8")).items():
            if isinstance(i, int) and 0 <= i < n_vocab:
                tokens[i], scores[i], types[i] = text, -1000.0, TOKEN_USER_DEFINED
    tc = root / "tokenizer_config.json"
    if tc.is_file():
        decoder = json.loads(tc.read_text(encoding="utf-8")).get("added_tokens_decoder") or {}
        for key, data in decoder.items():
            i, text = int(key), data.get("content")
            if not isinstance(text, str) or not 0 <= i < n_vocab:
                continue
            if data.get("special") or looks_special(text):
                types[i] = TOKEN_CONTROL
            else:
                text = text.replace("\u2581", " ")  # user-defined spaces pre-normalised, as llama.cpp expects
                types[i] = TOKEN_USER_DEFINED
            tokens[i], scores[i] = text, -1000.0
    return Vocab("llama", "default", tokens, types, scores, _special(root, n_vocab, merges=False))


def _special(root: Path, n_vocab: int, merges: bool) -> Any:  # noqa: ANN401
    import gguf

    return gguf.SpecialVocab(root, load_merges=merges, n_vocab=n_vocab)


def add_to_gguf(writer: Any, vocab: Vocab) -> None:  # noqa: ANN401
    """Write ``vocab`` (its tokens, and what ``gguf.SpecialVocab`` found beside them) into a ``gguf.GGUFWriter``."""
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    if vocab.scores is not None:
        writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    vocab.special.add_to_gguf(writer, quiet=True)
