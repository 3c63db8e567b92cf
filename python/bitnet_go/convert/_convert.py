"""``convert_checkpoint``: plan which tensors become which format, then write them one at a time."""

from __future__ import annotations

import fnmatch
import io
import json
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._core.arrays import MAX_ELEMENTS, check_bool, check_int
from .._core.ops import num_blocks, packed_len, quantize
from .._core.runtime import cpu_features, get_num_threads, set_num_threads
from .._core.types import Method
from .._hfpack import ScaleMode, scale_from_hf, ternary_from_values, unpack_hf
from .._progress import progress as _progress
from .._ternary import TernaryTensor, _check_method, quantize_i2s
from . import _gguf, _tl_gguf, _tokenizer
from ._formats import TQ_BLOCK, TQ_FORMATS, Parts, check_format, check_gguf_format, gguf_payload, layout, pack_as
from ._gguf import ConfigError
from ._reader import FLOAT_DTYPES, Checkpoint, PathLike, is_json_int, to_float16, to_float32
from ._writer import atomic_output, write_safetensors_header

Target = Literal["safetensors", "gguf"]

PACKED_SUFFIX = "_packed"
SCALE_SUFFIX = "_scale"
"""A quantized tensor ``N`` is stored as ``N_packed`` (uint8) and ``N_scale`` (float32): for ``x.weight``,
``x.weight_packed`` and ``x.weight_scale``, the buffer names of a frozen ``bitnet_go.nn`` layer."""

META_KEY = "bitnet_go.quantized"
"""safetensors metadata key: JSON ``{name: {"qtype", "shape", "block_size", "method"}}`` of the quantized tensors."""

META_VERSION_KEY = "bitnet_go.checkpoint"
META_VERSION = "1"


@dataclass(frozen=True)
class Planned:
    """One tensor of the conversion: what it is and what it becomes.

    ``to`` is a ternary format (``quantized``) or the dtype it is stored in;
    ``out_name`` its name in the output; ``scale_of`` the ``weight_scale``
    tensor of a transformers-packed weight, whose values are kept as they are.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    to: str
    out_name: str
    quantized: bool
    scale_of: str | None = None
    note: str = ""

    def line(self) -> str:
        """The dry-run line: name, shape, from-dtype, to-format (and the output name when it differs)."""
        out = "" if self.out_name == self.name else f"  as {self.out_name}"
        note = f"  ({self.note})" if self.note else ""
        return f"{self.name}  {list(self.shape)}  {self.dtype} -> {self.to}{out}{note}"


def default_quantized(name: str, shape: tuple[int, ...]) -> bool:
    """bitnet.cpp's choice: every ``*.weight`` of 2 or more dimensions except ``lm_head``, norms and
    ``embed_tokens`` (conv weights, 4-D, included).

    Example:
        >>> [default_quantized(n, (4, 4)) for n in ("a.q_proj.weight", "lm_head.weight", "model.norm.weight")]
        [True, False, False]
    """
    if not name.endswith(".weight") or len(shape) < 2:
        return False
    if name.endswith(("lm_head.weight", "embed_tokens.weight")):
        return False
    module = name[: -len(".weight")].rpartition(".")[2]
    return "norm" not in module


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def hf_scale_mode(config: dict[str, Any] | None) -> ScaleMode:
    """How a transformers-packed checkpoint's ``weight_scale`` is used: ``"divide"`` for
    ``quantization_config.linear_class == "bitlinear"`` (online BitLinear), else ``"multiply"``
    (``AutoBitLinear``, and what bitnet.cpp's converter assumes).

    Example:
        >>> hf_scale_mode({"quantization_config": {"linear_class": "bitlinear"}}), hf_scale_mode(None)
        ('divide', 'multiply')
    """
    qc = (config or {}).get("quantization_config") or {}
    return "divide" if isinstance(qc, dict) and qc.get("linear_class") == "bitlinear" else "multiply"


def plan(
    ck: Checkpoint,
    qtype: str,
    to: Target,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> list[Planned]:
    """What each tensor of ``ck`` becomes (see :func:`convert_checkpoint`), in the checkpoint's order."""
    entries = ck.entries
    scale_names = {n for n in entries if n.endswith(".weight_scale") and n[: -len("_scale")] in entries}
    arch = ""
    if to == "gguf":  # a config it cannot map fails here, before any tensor
        arch = _gguf.arch_of(ck.config, qtype)
        _gguf.heads(ck.config or {}, arch)
    out: list[Planned] = []
    for name, e in entries.items():
        if name in scale_names and entries[name[: -len("_scale")]].dtype == "U8":
            continue  # a transformers weight_scale: goes with its packed weight
        if to == "gguf" and _gguf.skipped(name):
            continue
        packed_hf = e.dtype == "U8" and name.endswith(".weight") and name + SCALE_SUFFIX in scale_names
        shape = (e.shape[0] * 4, *e.shape[1:]) if packed_hf and e.shape else e.shape
        chosen = _matches(name, include) if include else default_quantized(name, shape)
        chosen = chosen and not _matches(name, exclude)
        if chosen and not packed_hf and e.dtype not in FLOAT_DTYPES:
            how = "matches --include" if include else "is a weight the default rule quantizes"
            raise ValueError(
                f"{e.file}: tensor {name!r} {how}, but its dtype {e.dtype} cannot be quantized (float tensors only: "
                f"{', '.join(FLOAT_DTYPES)}); leave it as it is with --exclude (exclude=[...])"
            )
        note = ""
        if chosen and math.prod(shape) == 0:
            if include:  # as for a TQ shape below: asked for by name an error, by the default rule left as it is
                raise ValueError(
                    f"{e.file}: tensor {name!r} of shape {list(shape)} matches --include, but it is empty: "
                    "there are no values to quantize; exclude it (--exclude, exclude=[...]) to copy it as it is"
                )
            chosen, note = False, "empty: no values to quantize"
        if chosen and qtype in TQ_FORMATS and not _gguf.tq_fits(shape):
            if include:  # asked for by name: an error; by the default rule: left as it is, as llama.cpp does
                raise ValueError(
                    f"{e.file}: tensor {name!r} of shape {list(shape)} cannot be stored as {qtype}: {qtype} packs "
                    f"each row in blocks of {TQ_BLOCK} values, and its last dimension, {shape[-1] if shape else 0}, "
                    f"is not a multiple of {TQ_BLOCK}; exclude it or use i2_s, tl1 or tl2"
                )
            chosen, note = False, f"{qtype} needs the last dimension a multiple of {TQ_BLOCK}"
        dtype = "U8 (transformers-packed ternary)" if packed_hf else e.dtype
        out_name = _gguf.tensor_name(name) if to == "gguf" else name
        if to == "gguf" and (perm := _gguf.permutation(name, arch, ck.config or {})) is not None:
            _gguf.check_permutable(shape, perm[1], f"{e.file}: tensor {name!r} of shape {list(shape)}")
        if chosen and to == "gguf" and qtype in TQ_FORMATS and out_name in _gguf.TQ_F16:
            chosen, note = False, "llama.cpp keeps it F16 under TQ formats"
        if chosen:
            scale_of = name + SCALE_SUFFIX if packed_hf else None
            out.append(Planned(name, shape, dtype, qtype, out_name, True, scale_of, note))
            continue
        if packed_hf:  # kept as it is: its weight_scale too
            out.append(Planned(name, e.shape, e.dtype, e.dtype, out_name, False, None, "packed, not selected"))
            if to == "safetensors":
                s = entries[name + SCALE_SUFFIX]
                out.append(Planned(s.name, s.shape, s.dtype, s.dtype, s.name, False))
            elif to == "gguf":
                raise ValueError(f"{name}: a transformers-packed weight must be converted for GGUF, but it is excluded")
            continue
        if to == "gguf":
            if e.dtype not in FLOAT_DTYPES:
                raise ValueError(f"{name}: dtype {e.dtype} has no GGUF float type here")
            keep = _gguf.float_type(out_name, e.shape)
        else:
            keep = e.dtype
        out.append(Planned(name, e.shape, e.dtype, keep, out_name, False, None, note))
    return out


def _ternary(
    ck: Checkpoint,
    p: Planned,
    method: Method,
    block_size: int | None,
    mode: ScaleMode,
    perm: tuple[int, int] | None,
) -> TernaryTensor:
    """Planned tensor ``p`` quantized (or, packed by transformers, unpacked) and packed as ``p.to``; a value the
    quantizer refuses (NaN, Inf) or any other ``ValueError`` is a ValueError naming the file and tensor."""
    where = f"{ck.entries[p.name].file}: tensor {p.name!r}"
    try:
        return _ternary_of(ck, p, method, block_size, mode, perm)
    except ValueError as err:
        bad = None if p.scale_of is not None else _non_finite(ck, p.name)
        if bad is None:
            raise ValueError(f"{where}: {err}") from err
        raise ValueError(
            f"{where}: x contains {bad}; only finite values can be quantized: fix the checkpoint, or leave the "
            "tensor as it is with --exclude (exclude=[...])"
        ) from err


def _non_finite(ck: Checkpoint, name: str) -> str | None:
    """The first value of float tensor ``name`` that is not finite as float32 (what the quantizer reads),
    described with its flat index (C order, as stored), or None if every value is finite.

    Only called once quantizing failed: the tensor is read again, not checked on the way.
    """
    dtype = ck.entries[name].dtype
    stored = ck.array(name).reshape(-1)
    with np.errstate(over="ignore"):  # F64 beyond float32's range: Inf, as the quantizer reads it
        values = to_float32(stored, dtype)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size == 0:
        return None
    i = int(bad[0])
    if dtype == "F64" and math.isfinite(stored[i]):
        return f"a value ({float(stored[i])!r}) beyond float32's range at flat index {i}"
    v = float(values[i])
    return f"a non-finite value ({'NaN' if math.isnan(v) else '+Inf' if v > 0 else '-Inf'}) at flat index {i}"


def _ternary_of(
    ck: Checkpoint,
    p: Planned,
    method: Method,
    block_size: int | None,
    mode: ScaleMode,
    perm: tuple[int, int] | None,
) -> TernaryTensor:
    if p.scale_of is not None:
        values = unpack_hf(ck.array(p.name), p.shape[0])
        if perm:
            values = _gguf.permute_rows(values, *perm)
        e = ck.entries[p.scale_of]
        t = ternary_from_values(values, scale_from_hf(to_float32(ck.array(p.scale_of), e.dtype), mode))
        del values
    else:
        a = ck.array(p.name)
        if perm:
            a = _gguf.permute_rows(a, *perm)
        dtype = ck.entries[p.name].dtype
        if dtype == "BF16":
            t = _quantize_bf16(np.ascontiguousarray(a), block_size, method)
        else:
            t = quantize_i2s(to_float32(a, dtype), block_size=block_size, method=method, device="cpu")
        del a
    return pack_as(t, p.to)


def _quantize_bf16(bits: np.ndarray, block_size: int | None, method: Method) -> TernaryTensor:
    """:func:`quantize_i2s` of the float32 values of bfloat16 ``bits`` (uint16, C-contiguous), widened in Go
    (no float32 copy here): the same tensor, bit for bit."""
    if bits.size == 0:
        raise ValueError(f"x must have at least one element, got shape {bits.shape}")
    m = _check_method(method)
    packed = np.empty(packed_len("i2_s", bits.size, 1), np.uint8)
    scales = np.empty(num_blocks(bits.size, block_size), np.float32)
    quantize(bits, "i2_s", block_size, m, True, packed, scales, x_dtype="bfloat16")
    return TernaryTensor._trusted("i2_s", bits.shape, block_size, m, packed, scales)


def _safetensors_header(
    ck: Checkpoint, items: list[Planned], method: Method, block_size: int | None
) -> tuple[list[tuple[str, str, tuple[int, ...], int]], dict[str, str]]:
    """The output's tensors ``(name, dtype, shape, nbytes)`` in the order written, and its metadata."""
    header: list[tuple[str, str, tuple[int, ...], int]] = []
    quantized: dict[str, dict[str, Any]] = {}
    for p in items:
        if p.quantized:
            lay = layout(p.to, p.shape, block_size if p.scale_of is None else None)
            header.append((p.name + PACKED_SUFFIX, "U8", (lay.packed,), lay.packed))
            header.append((p.name + SCALE_SUFFIX, "F32", (lay.scales,), 4 * lay.scales))
            bs = TQ_BLOCK if p.to in TQ_FORMATS else block_size if p.scale_of is None else None
            quantized[p.name] = {"qtype": p.to, "shape": list(p.shape), "block_size": bs,
                                 "method": method if p.scale_of is None else "absmean"}  # fmt: skip
        else:
            header.append((p.name, p.dtype, p.shape, ck.entries[p.name].nbytes))
    meta = {k: v for k, v in ck.metadata.items() if not k.startswith("bitnet_go.")}
    meta[META_VERSION_KEY] = META_VERSION
    meta[META_KEY] = json.dumps(quantized, separators=(",", ":"))
    return header, meta


def _safetensors_size(header: list[tuple[str, str, tuple[int, ...], int]], meta: dict[str, str]) -> int:
    return write_safetensors_header(io.BytesIO(), header, meta) + sum(h[3] for h in header)


def _write_safetensors(
    ck: Checkpoint,
    items: list[Planned],
    path: Path,
    method: Method,
    block_size: int | None,
    mode: ScaleMode,
    show: bool | None,
) -> None:
    header, meta = _safetensors_header(ck, items, method, block_size)
    sizes = {h[0]: h[3] for h in header}
    with open(path, "wb") as f:
        write_safetensors_header(f, header, meta)
        for p in _items(ck, items, show):
            if p.quantized:
                t = _ternary(ck, p, method, block_size, mode, None)
                _expect(f, t.packed, p.name + PACKED_SUFFIX, sizes)
                _expect(f, t.scales, p.name + SCALE_SUFFIX, sizes)
                del t
                if p.scale_of:
                    ck.release(p.scale_of)
            else:
                _expect(f, ck.array(p.name), p.name, sizes)
            ck.release(p.name)


def _expect(f: Any, a: np.ndarray, name: str, sizes: dict[str, int]) -> None:  # noqa: ANN401
    want = sizes[name]
    if a.nbytes != want:  # the layout the header promised: a mismatch would corrupt every later offset
        raise RuntimeError(f"{name}: {a.nbytes} bytes, but the header reserved {want}")
    f.write(np.ascontiguousarray(a).data)


def _items(ck: Checkpoint, items: list[Planned], show: bool | None) -> Iterator[Planned]:
    """``items`` one at a time, the progress bar counting the input bytes of each (with its scale tensor)."""
    sizes = [ck.entries[p.name].nbytes + (ck.entries[p.scale_of].nbytes if p.scale_of else 0) for p in items]
    for _, p in _progress([(p.name, p) for p in items], show, "bitnet_go convert", "tensor", sizes):
        yield p


def _gguf_writer(ck: Checkpoint, items: list[Planned], qtype: str, vocab: _tokenizer.Vocab | None) -> tuple[Any, str]:
    """A ``gguf.GGUFWriter`` (no file yet) with the metadata and every tensor's info, and the architecture."""
    import gguf

    config = ck.config or {}
    arch = _gguf.arch_of(ck.config, qtype)
    writer = gguf.GGUFWriter(None, arch)
    _gguf.add_metadata(writer, config, arch, qtype, ck.root)
    if vocab is not None:
        _tokenizer.add_to_gguf(writer, vocab)
    tl_scale = qtype in ("tl1", "tl2")
    for p in items:
        if p.quantized:
            writer.add_tensor_info(p.out_name, p.shape, np.dtype(np.int8), layout(p.to, p.shape, None, True).gguf,
                                   raw_dtype=_gguf.TYPE_IDS[p.to.upper()])  # fmt: skip
            if tl_scale:
                writer.add_tensor_info(p.out_name + "_scale", (1,), np.dtype(np.float32), 4)
        else:
            dt = np.dtype(np.float16 if p.to == "F16" else np.float32)
            writer.add_tensor_info(p.out_name, p.shape, dt, math.prod(p.shape) * dt.itemsize)
    return writer, arch


def _gguf_size(writer: Any) -> int:  # noqa: ANN401
    """The size of the file ``writer`` would write: its header, metadata and tensor infos measured by writing
    them to a scratch file, then each tensor's data padded to the alignment, as ``write_tensor_data`` pads it."""
    pad = writer.ggml_pad
    data = sum(pad(ti.nbytes, writer.data_alignment) for ti in writer.tensors[0].values())
    with tempfile.TemporaryDirectory() as d:
        scratch = Path(d) / "header.gguf"
        writer.write_header_to_file(path=scratch)
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        writer.close()
        head = scratch.stat().st_size
    return pad(head, writer.data_alignment) + data


def _write_gguf(
    ck: Checkpoint,
    items: list[Planned],
    path: Path,
    qtype: str,
    method: Method,
    mode: ScaleMode,
    show: bool | None,
    vocab: _tokenizer.Vocab | None,
    tilings: dict[tuple[int, int], _tl_gguf.Tiling],
) -> None:
    config = ck.config or {}
    writer, arch = _gguf_writer(ck, items, qtype, vocab)
    writer.write_header_to_file(path=path)
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    tl_scale = qtype in ("tl1", "tl2")
    try:
        for p in _items(ck, items, show):
            perm = _gguf.permutation(p.name, arch, config)
            if p.quantized:
                t = _ternary(ck, p, method, None, mode, perm)
                writer.write_tensor_data(gguf_payload(t, tilings.get(tuple(p.shape)) if tl_scale else None))
                if tl_scale:
                    writer.write_tensor_data(np.asarray(t.scales[:1], np.float32))
                del t
                if p.scale_of:
                    ck.release(p.scale_of)
            else:
                a = ck.array(p.name)
                if perm:
                    a = _gguf.permute_rows(a, *perm)  # the stored values: the same rows whatever their dtype
                writer.write_tensor_data(_by_rows(a, p.dtype, p.to == "F16"))
                del a
            ck.release(p.name)
    finally:
        writer.close()


CHUNK_BYTES = 16 << 20
"""A float tensor larger than this (output bytes) is converted and written a slice of rows at a time."""


def _by_rows(a: np.ndarray, dtype: str, f16: bool) -> np.ndarray | Parts:
    """``to_float16(a, dtype)`` (``f16``) or ``to_float32(a, dtype)``: whole for a small tensor, else as
    :class:`Parts` converting about :data:`CHUNK_BYTES` of output at a time, so that a large embedding needs no
    output-sized array (fresh pages to fault in) and the memory stays bounded.

    Example:
        >>> a = np.arange(6, dtype=np.float32).reshape(3, 2)
        >>> _by_rows(a, "F32", True).tobytes() == a.astype(np.float16).tobytes()
        True
    """
    convert = to_float16 if f16 else to_float32
    row = math.prod(a.shape[1:]) * (2 if f16 else 4)
    if a.ndim < 2 or row * a.shape[0] <= CHUNK_BYTES:
        return convert(a, dtype)
    step = max(1, CHUNK_BYTES // max(row, 1))
    return Parts(row * a.shape[0], lambda: (convert(a[i : i + step], dtype) for i in range(0, a.shape[0], step)))


class Conversion(list[Planned]):
    """What :func:`convert_checkpoint` returns: one :class:`Planned` per tensor (a list), and the output's
    ``size`` in bytes (exact: a dry run's is the size the file would have), format ``qtype`` and kind ``to``.

    Example:
        >>> c = Conversion([], size=8, qtype="i2_s", to="safetensors")
        >>> c.summary(dry_run=True)
        '0 of 0 tensors would become i2_s (safetensors), 8 bytes (0.0 MiB); nothing written'
    """

    def __init__(self, items: list[Planned], *, size: int, qtype: str, to: str) -> None:
        super().__init__(items)
        self.size, self.qtype, self.to = size, qtype, to

    def summary(self, dry_run: bool = False) -> str:
        """One line: how many tensors become the format, and the output's size."""
        n = sum(p.quantized for p in self)
        size = f"{self.size} bytes ({self.size / 2**20:.1f} MiB)"
        if dry_run:
            return f"{n} of {len(self)} tensors would become {self.qtype} ({self.to}), {size}; nothing written"
        return f"{n} of {len(self)} tensors as {self.qtype} ({self.to}), {size}"


def convert_checkpoint(
    src: PathLike,
    out: PathLike | None = None,
    *,
    qtype: str = "i2_s",
    to: Target = "safetensors",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    method: Method = "absmean",
    block_size: int | None = None,
    threads: int | None = None,
    dry_run: bool = False,
    progress: bool | None = None,
    tokenizer: bool = True,
    tokenizer_pre: str | None = None,
    kernel_config: PathLike | None = None,
    force: bool = False,
) -> Conversion:
    """Convert a safetensors checkpoint's linear and conv weights to ternary; write safetensors or GGUF.

    Args:
        src: a ``.safetensors`` file, a sharded checkpoint directory (with
            ``model.safetensors.index.json``), or a Hugging Face model directory
            (``config.json`` and its safetensors files).
        out: the output file (written to a temporary file beside it, renamed
            when complete: an error or Ctrl-C leaves no partial file). Not
            needed with ``dry_run``. An existing file is an error unless
            ``force``; an input file of the checkpoint is never replaced.
        qtype: ``"i2_s"``, ``"tl1"``, ``"tl2"``, ``"tq1_0"`` or ``"tq2_0"``.
        to: ``"safetensors"`` (see the package docstring for the names and
            metadata; read back with :func:`load_checkpoint`) or ``"gguf"``
            (what bitnet.cpp's / llama.cpp's converters write; needs
            ``config.json`` and the ``gguf`` package).
        include: glob patterns: quantize exactly the float tensors whose
            whole name matches one (default: every 2-D+ ``*.weight`` except
            ``lm_head``, norms and ``embed_tokens``). A pattern that matches no
            tensor is a ``UserWarning`` (the conversion goes on without it).
        exclude: glob patterns of tensors then left as they are.
        method: ``"absmean"`` or ``"absmax"`` (see ``quantize_i2s``).
        block_size: elements per scale, an int from 1 to 2**60 (NumPy integers
            too; safetensors output only; GGUF formats have their own scales:
            one per tensor, TQ one per 256 values).
        threads: Go threads for the quantizer, an int from 1 to
            ``cpu_features()["max_threads"]`` (default: as set).
        dry_run: only plan: return what would be converted and the output's
            size, write nothing.
        progress: None: a tqdm bar where tqdm is installed; True: the bar or
            a line per tensor on stderr; False: nothing. The bar counts the
            input bytes converted (rate, ETA) and shows tensors done.
        tokenizer: GGUF output: write the ``tokenizer.ggml.*`` keys from the
            checkpoint's ``tokenizer.model`` or ``tokenizer.json`` (see
            ``bitnet_go.convert._tokenizer``; their absence is an error).
            False writes none, with a warning: llama.cpp will not load the file.
        tokenizer_pre: GGUF output: llama.cpp's pre-tokenizer name for a BPE
            tokenizer whose pre-tokenizer is not recognised (e.g. ``"llama-bpe"``).
        kernel_config: TL1/TL2 GGUF output: bitnet.cpp's ``kernel_config.ini``
            for the model (the tiling of each weight shape; see
            ``bitnet_go.convert._tl_gguf``). Needed for those, ignored otherwise.
        force: replace an existing ``out``.

    ``dry_run``, ``tokenizer``, ``force`` and ``progress`` (unless None) must be
    bools: a string such as ``"no"`` is a ``TypeError``, as is an argument of
    the wrong type; a number out of range is a ``ValueError`` naming the
    argument (and its CLI option).

    Returns:
        A :class:`Conversion`: one :class:`Planned` per tensor, in the
        checkpoint's order (those a GGUF file leaves out are not listed), with
        the output's size in bytes (``.size``, also for a dry run).

    Bad input is a ``ValueError`` naming the file and tensor, raised before
    anything is written: a truncated file, a header that is not JSON, a
    tensor entry whose dtype, shape or data_offsets are malformed (not a
    dtype name, not lists of ints), offsets outside the file or overlapping,
    a dtype that cannot be read or, for a tensor selected for quantization,
    is not a float, a shape the format cannot hold (TQ1_0/TQ2_0: the last
    dimension a multiple of 256) or an empty tensor (no values to quantize);
    for the last two, a tensor that the default rule selects is left as it is
    instead, as llama.cpp's converter does, and the dry run says so. A
    ``model.safetensors.index.json`` whose ``weight_map`` is not an object of
    file names is a ``ValueError`` naming it; for GGUF, a ``config.json`` key
    the metadata needs that is missing or out of range (a count that is not an
    integer >= 1, heads that do not divide ``hidden_size`` or that key/value
    heads do not divide) a :class:`ConfigError` naming the key. A NaN or Inf
    in a weight is found while quantizing: a ``ValueError`` naming the file,
    tensor and index, the output not written (the temporary file removed).

    Transformers-packed BitNet weights (uint8, four values per byte along
    dim 0, with a ``weight_scale``) are unpacked, not re-quantized: their
    values and scale are kept exactly (``"multiply"`` or ``"divide"`` per
    ``quantization_config.linear_class``, see :func:`hf_scale_mode`).

    Example:
        >>> import numpy as np, os, tempfile, bitnet_go
        >>> from bitnet_go.convert import convert_checkpoint, load_checkpoint
        >>> from bitnet_go.convert._writer import write_safetensors_header
        >>> d = tempfile.mkdtemp()
        >>> w = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
        >>> with open(os.path.join(d, "in.safetensors"), "wb") as f:
        ...     _ = write_safetensors_header(f, [("fc.weight", "F32", w.shape, w.nbytes)], {})
        ...     _ = f.write(w.tobytes())
        >>> plan = convert_checkpoint(os.path.join(d, "in.safetensors"), dry_run=True)
        >>> [p.line() for p in plan], plan.size
        (['fc.weight  [8, 128]  F32 -> i2_s'], 580)
        >>> src, dst = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        >>> _ = convert_checkpoint(src, dst, progress=False)
        >>> t = load_checkpoint(dst)["fc.weight"]
        >>> t.packed.tobytes() == bitnet_go.quantize_i2s(w).packed.tobytes()
        True
    """
    _check_path(src, "src")
    if out is not None:
        _check_path(out, "out")
    fmt = check_format(qtype)
    if to not in ("safetensors", "gguf"):
        raise ValueError(f"to must be 'safetensors' or 'gguf', got {to!r}")
    m = _check_method(method)
    block_size = _check_count_option(block_size, "block_size", MAX_ELEMENTS)
    if block_size is not None and to == "gguf":
        raise ValueError(
            "block_size applies to safetensors output: GGUF formats have their own scales "
            "(I2_S/TL1/TL2 one per tensor, TQ1_0/TQ2_0 one per 256 values)"
        )
    threads = _check_count_option(threads, "threads", cpu_features()["max_threads"])
    dry_run = check_bool(dry_run, "dry_run")
    tokenizer = check_bool(tokenizer, "tokenizer")
    force = check_bool(force, "force")
    if progress is not None:
        progress = check_bool(progress, "progress")
    include, exclude = _check_patterns(include, "include"), _check_patterns(exclude, "exclude")
    if tokenizer_pre is not None and not isinstance(tokenizer_pre, str):
        raise TypeError(f"tokenizer_pre must be None or a str, got {type(tokenizer_pre).__name__} {tokenizer_pre!r}")
    if kernel_config is not None:
        _check_path(kernel_config, "kernel_config")
    if to == "gguf":
        check_gguf_format(fmt, kernel_config)
        try:
            import gguf  # noqa: F401
        except ImportError:
            raise ImportError("GGUF output needs the gguf package (pip install 'bitnet_go[convert]')") from None
    if not dry_run:
        if out is None:
            raise ValueError("out is needed unless dry_run=True")
        if Path(out).is_dir():
            raise IsADirectoryError(f"{out}: the output is a directory; give a file name")
        if Path(out).exists() and not force:
            raise FileExistsError(f"{out} exists: pass force=True (--force) to replace it")
    old_threads = get_num_threads()
    if threads is not None:
        set_num_threads(threads)
    try:
        with Checkpoint.open(src) as ck:
            _warn_unmatched(ck, include)
            items = plan(ck, fmt, to, include, exclude)
            if not dry_run:
                _check_not_an_input(ck, Path(out))  # type: ignore[arg-type]
            tl = to == "gguf" and fmt in ("tl1", "tl2")
            tilings = _tl_gguf.read_kernel_config(kernel_config) if tl else {}  # type: ignore[arg-type]
            for p in items:  # every size known, and every format writable, before a byte is written
                if p.quantized and tl:
                    _tl_gguf.check(fmt, p.shape, tilings, p.name)
                if p.quantized:
                    layout(p.to, p.shape, block_size if to == "safetensors" and p.scale_of is None else None,
                           to == "gguf")  # fmt: skip
            mode = hf_scale_mode(ck.config)
            vocab = _vocab(ck, tokenizer, tokenizer_pre) if to == "gguf" else None
            if to == "gguf":
                size = _gguf_size(_gguf_writer(ck, items, fmt, vocab)[0])
            else:
                size = _safetensors_size(*_safetensors_header(ck, items, m, block_size))
            done = Conversion(items, size=size, qtype=fmt, to=to)
            if dry_run:
                return done
            with atomic_output(out) as tmp:  # type: ignore[arg-type]
                if to == "gguf":
                    _write_gguf(ck, items, tmp, fmt, m, mode, progress, vocab, tilings)
                else:
                    _write_safetensors(ck, items, tmp, m, block_size, mode, progress)
                if tmp.stat().st_size != size:  # the planned size is what a dry run reports: it must be exact
                    raise RuntimeError(f"{out}: wrote {tmp.stat().st_size} bytes, planned {size}")
            return done
    finally:
        set_num_threads(old_threads)


def _check_path(v: object, name: str) -> None:
    """Refuse argument ``name`` unless it is a path (a ``str`` or ``os.PathLike``): a TypeError naming it.

    Example:
        >>> _check_path(None, "src")
        Traceback (most recent call last):
        TypeError: src must be a path (str or os.PathLike), got NoneType None
    """
    if not isinstance(v, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {type(v).__name__} {v!r}")


def _check_count_option(v: object, name: str, hi: int) -> int | None:
    """Argument ``name`` (the CLI's ``--name``, dashed): None, or an int (NumPy integers too, not a bool) from 1 to
    ``hi``, as a Python int; else a TypeError (the type) or ValueError (the range) naming both.

    Example:
        >>> _check_count_option(np.int64(4), "block_size", 2**60)
        4
        >>> _check_count_option(0, "threads", 1024)
        Traceback (most recent call last):
        ValueError: threads (--threads) must be between 1 and 1024, got 0
    """
    if v is None:
        return None
    what = f"{name} (--{name.replace('_', '-')})"
    n = check_int(v, what, or_none=True)
    if not 1 <= n <= hi:
        raise ValueError(f"{what} must be between 1 and {hi}, got {n}")
    return n


def _check_patterns(v: object, name: str) -> tuple[str, ...]:
    """Argument ``name`` (``include``/``exclude``) as a tuple of glob patterns: an iterable of ``str``, not one
    ``str``; else a TypeError naming it.

    Example:
        >>> _check_patterns(["*.q_proj.*"], "include")
        ('*.q_proj.*',)
        >>> _check_patterns("*.weight", "include")
        Traceback (most recent call last):
        TypeError: include must be a sequence of glob patterns (str), got '*.weight'
    """
    pats = None if isinstance(v, str) or not isinstance(v, Iterable) else tuple(v)
    if pats is None or not all(isinstance(p, str) for p in pats):
        raise TypeError(f"{name} must be a sequence of glob patterns (str), got {v!r}")
    return pats


def _warn_unmatched(ck: Checkpoint, include: Sequence[str]) -> None:
    """A ``UserWarning`` for each ``include`` pattern that matches no tensor name of ``ck`` (a typo would
    otherwise quietly quantize nothing)."""
    names = list(ck.entries)
    for pat in include:
        if not any(fnmatch.fnmatchcase(n, pat) for n in names):
            such = f", such as {names[0]!r}" if names else ""
            warnings.warn(
                f"include pattern {pat!r} (--include) matches no tensor of the checkpoint ({len(names)} tensors"
                f"{such}); a pattern matches whole names, e.g. '*.q_proj.weight'",
                stacklevel=3,
            )


def _check_not_an_input(ck: Checkpoint, out: Path) -> None:
    target = out.resolve()
    for f in {e.file for e in ck.entries.values()}:
        if f.resolve() == target:
            raise ValueError(f"{out} is an input file of the checkpoint: write the output elsewhere")


def _vocab(ck: Checkpoint, tokenizer: bool, pre: str | None) -> _tokenizer.Vocab | None:
    """The checkpoint's vocabulary for GGUF output, sized to the model (None, with a warning, if not wanted)."""
    if not tokenizer:
        warnings.warn(
            "GGUF output without tokenizer metadata (tokenizer=False / --no-tokenizer): llama.cpp and bitnet.cpp "
            "will not load the file",
            stacklevel=3,
        )
        return None
    embed = ck.entries.get("model.embed_tokens.weight")
    rows = embed.shape[0] if embed is not None and embed.shape else None
    n = (ck.config or {}).get("vocab_size", rows)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"config.json vocab_size must be an int >= 1 (the tokenizer's size), got {n!r}")
    if rows is not None and rows != n:
        raise ConfigError(f"config.json vocab_size is {n}, but model.embed_tokens.weight has {rows} rows")
    return _tokenizer.read_vocab(ck.root, n, pre)


def load_checkpoint(path: PathLike) -> dict[str, TernaryTensor | np.ndarray]:
    """Read a safetensors file written by :func:`convert_checkpoint` (``to="safetensors"``).

    Returns every tensor under its original name: the quantized ones as
    :class:`~bitnet_go.TernaryTensor` (format, shape, block size and method
    from the file's metadata; bit-identical to quantizing the same float
    tensors directly), the others as numpy arrays (BF16 as float32, exactly).
    A file with no bitnet_go metadata is read as plain arrays. Arrays view the
    memory-mapped file where their alignment allows (read-only).

    Example:
        >>> import numpy as np, os, tempfile, bitnet_go
        >>> from bitnet_go.convert import convert_checkpoint
        >>> from bitnet_go.convert._writer import write_safetensors_header
        >>> d = tempfile.mkdtemp()
        >>> w = np.ones((4, 8), np.float32)
        >>> with open(os.path.join(d, "in.safetensors"), "wb") as f:
        ...     _ = write_safetensors_header(f, [("fc.weight", "F32", w.shape, w.nbytes)], {})
        ...     _ = f.write(w.tobytes())
        >>> _ = convert_checkpoint(os.path.join(d, "in.safetensors"), os.path.join(d, "o.safetensors"), progress=False)
        >>> bitnet_go.load_checkpoint(os.path.join(d, "o.safetensors"))["fc.weight"]
        TernaryTensor(qtype='i2_s', shape=(4, 8), block_size=None, method='absmean', scales=1, nbytes=36, ...)
    """
    _check_path(path, "path")
    ck = Checkpoint.open(path)
    try:
        quantized = _quantized_metadata(path, ck.metadata.get(META_KEY, "{}"))
        out: dict[str, TernaryTensor | np.ndarray] = {}
        parts = set()
        for name, info in quantized.items():
            pk, sc = name + PACKED_SUFFIX, name + SCALE_SUFFIX
            for n in (pk, sc):
                if n not in ck.entries:
                    raise ValueError(f"{path}: quantized tensor {name!r} has no {n!r}")
            try:
                out[name] = TernaryTensor._make(
                    info["qtype"], tuple(info["shape"]), info.get("block_size"), info.get("method"),
                    _aligned(ck.array(pk)), _aligned(ck.array(sc)),
                )  # fmt: skip
            except (TypeError, ValueError) as err:
                raise ValueError(f"{path}: quantized tensor {name!r} ({pk!r}, {sc!r}): {err}") from err
            parts.update((pk, sc))
        for name, e in ck.entries.items():
            if name not in parts:
                a = ck.array(name)
                out[name] = to_float32(a, "BF16") if e.dtype == "BF16" else a
        return out
    finally:
        ck.close()


_META_FIELDS: dict[str, tuple[bool, Callable[[Any], bool], str]] = {
    "qtype": (True, lambda v: isinstance(v, str), "a string"),
    "shape": (True, lambda v: isinstance(v, list) and all(is_json_int(d) and d >= 0 for d in v), "a list of ints >= 0"),
    "block_size": (False, lambda v: v is None or (is_json_int(v) and v >= 1), "an int >= 1 or null"),
    "method": (False, lambda v: v is None or isinstance(v, str), "a string or null"),
}
"""Each key of a quantized tensor's entry in :data:`META_KEY`: (required, check, what the check wants)."""


def _quantized_metadata(path: PathLike, text: str) -> dict[str, dict[str, Any]]:
    """The metadata :data:`META_KEY` of file ``path`` (JSON ``text``), checked: an object mapping each quantized
    tensor's name to an object with ``qtype`` (a str), ``shape`` (a list of ints >= 0) and, optionally,
    ``block_size`` (an int >= 1 or null) and ``method`` (a str or null); else a ValueError naming the file, the
    tensor and the key.

    Example:
        >>> _quantized_metadata("x.safetensors", '{"w": {"qtype": "i2_s", "shape": [4, 8]}}')
        {'w': {'qtype': 'i2_s', 'shape': [4, 8]}}
        >>> _quantized_metadata("x.safetensors", '{"w": {"shape": [4, 8]}}')
        Traceback (most recent call last):
        ValueError: x.safetensors: metadata bitnet_go.quantized: tensor 'w' has no 'qtype'
    """
    where = f"{path}: metadata {META_KEY}"
    try:
        quantized = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} is not JSON ({e})") from None
    if not isinstance(quantized, dict):
        kind = type(quantized).__name__
        raise ValueError(f"{where} must be a JSON object mapping tensor names to their format, got {kind}")
    for name, info in quantized.items():
        if not isinstance(info, dict):
            raise ValueError(f"{where}: tensor {name!r} must map to an object (qtype, shape, ...), got {info!r}")
        for key, (required, ok, what) in _META_FIELDS.items():
            if key not in info:
                if required:
                    raise ValueError(f"{where}: tensor {name!r} has no {key!r}")
            elif not ok(info[key]):
                raise ValueError(f"{where}: tensor {name!r}: {key!r} must be {what}, got {info[key]!r}")
    return quantized


def _aligned(a: np.ndarray) -> np.ndarray:
    return a if a.flags.aligned else a.copy()
