"""``bench convert``: checkpoint conversion against ``gguf.quants.quantize``, ``cat`` and bitnet.cpp's converter.

Two tables, side by side in one process:

1. **TQ quantizers**: ``quantize_tq2_0`` / ``quantize_tq1_0`` against the ``gguf``
   package's numpy quantizers (``gguf.quants.quantize``, the reference our TQ bytes
   equal) on the same float32 input (``--convert-floats``, default 16M, as a
   (n/4096, 4096) matrix), per thread count (numpy's is single-threaded whatever the
   count). The bytes are compared once per format (``same``).
2. **a generated checkpoint**: a LLaMA-shaped ``BitnetForCausalLM`` in bf16 of
   about ``--convert-size`` bytes (default 1G) in a temporary directory, and on it:
   ``cat IN > /dev/null`` (a subprocess; run once unmeasured first, so every timed
   read finds the file in the page cache, as the conversions after it do), our
   ``convert_checkpoint`` to I2_S GGUF and to TQ2_0 GGUF per thread count and, with
   ``--bitnet-converter PATH``, bitnet.cpp's ``utils/convert-hf-to-gguf-bitnet.py
   --outtype i2_s`` in a subprocess through ``tools/bitnet_cpp_convert/run_converter.py``
   (see there: its ``gguf-py`` and what the wrapper adapts). Like with like: the same
   checkpoint, the same tensor types out (I2_S projections, F16 embedding, F32 norms),
   the same hyperparameter keys, no vocabulary on either side (``--no-tokenizer`` /
   the wrapper's ``--no-vocab``: a generated checkpoint has no tokenizer bitnet.cpp's
   vocabulary code accepts). Its I2_S tensors are compared with ours (``same``:
   equal packed values; the scale: largest relative difference).

Reported: median seconds with the min-max range, input GB/s, time over ``cat``'s and
bitnet.cpp's time over ours.

Example:
    $ python -m bitnet_go bench convert --threads 1,2 --convert-size 1G \\
        --bitnet-converter ~/BitNet/utils/convert-hf-to-gguf-bitnet.py \\
        --bitnet-pythonpath ~/BitNet/3rdparty/llama.cpp/gguf-py:/tmp/deps
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import bitnet_go

from ._common import (
    Table,
    cli_type,
    median,
    parse_size,
    parse_threads,
    positive_int,
    put_timings,
    restored_threads,
    size_text,
    spread_text,
    timeit,
)

QUICK: dict[str, object] = {"convert_floats": "1M", "convert_size": "4M", "convert_repeat": 1}
"""``bench --quick``: this suite's options for a few seconds on tiny inputs."""

WRAPPER = Path(__file__).resolve().parents[3] / "tools" / "bitnet_cpp_convert" / "run_converter.py"
"""``tools/bitnet_cpp_convert/run_converter.py`` of a source checkout (``--bitnet-wrapper`` elsewhere)."""


MAX_CHECKPOINT_BYTES = 16 << 30
"""The largest ``--convert-size``: 16G bytes of bf16 (a 7B-parameter model's size) on disk, read and converted."""

TQ_ROW = 256
"""``--convert-floats`` is a multiple of this (a TQ row holds whole 256-value blocks), or 0."""


def parse_floats(s: str) -> int:
    """``--convert-floats``: 0 (skip), or a multiple of :data:`TQ_ROW` up to ``MAX_ELEMENTS``.

    Example:
        >>> parse_floats("16M"), parse_floats("0")
        (16777216, 0)
        >>> parse_floats("1000")
        Traceback (most recent call last):
        ValueError: '1000' is not a multiple of 256 (TQ quantizes whole blocks of 256 values)
    """
    n = parse_size(s, minimum=0)
    if n % TQ_ROW:
        raise ValueError(f"{s!r} is not a multiple of {TQ_ROW} (TQ quantizes whole blocks of {TQ_ROW} values)")
    return n


def parse_checkpoint_size(s: str) -> int:
    """``--convert-size``: bytes, 0 (skip) to :data:`MAX_CHECKPOINT_BYTES`.

    Example:
        >>> parse_checkpoint_size("1G")
        1073741824
    """
    return parse_size(s, minimum=0, maximum=MAX_CHECKPOINT_BYTES, unit="bytes")


def check_args(args: argparse.Namespace) -> None:
    """Refuse (ValueError, ``--option: why``) paths that would fail only after our measurements:
    ``--convert-dir`` not a writable directory, and with ``--bitnet-converter`` that file, the
    wrapper's and the Python that runs them.

    Example:
        >>> import argparse
        >>> check_args(argparse.Namespace(convert_size="4M", convert_dir=None, bitnet_converter="/nonexistent.py"))
        Traceback (most recent call last):
        ValueError: --bitnet-converter: '/nonexistent.py' is not a file
    """
    if parse_checkpoint_size(args.convert_size) == 0:
        return
    d = args.convert_dir
    if d is not None and not (os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)):
        raise ValueError(f"--convert-dir: {d!r} is not a writable directory")
    if args.bitnet_converter is None:
        return
    for option in ("--bitnet-converter", "--bitnet-wrapper"):
        path = getattr(args, option[2:].replace("-", "_"))
        if not Path(path).expanduser().is_file():
            raise ValueError(f"{option}: {path!r} is not a file")
    if shutil.which(args.bitnet_python) is None:
        raise ValueError(f"--bitnet-python: {args.bitnet_python!r} is not an executable")


def add_arguments(g: argparse._ArgumentGroup) -> None:
    """Options of the convert suite."""
    g.add_argument(
        "--convert-floats",
        type=cli_type(parse_floats),
        default="16M",
        help="floats quantized by the TQ rows, a multiple of 256 (default 16M; 0: skip)",
    )
    g.add_argument(
        "--convert-size",
        type=cli_type(parse_checkpoint_size),
        default="1G",
        help=f"bytes of the generated bf16 checkpoint (default 1G, at most {size_text(MAX_CHECKPOINT_BYTES)}; 0: skip)",
    )
    g.add_argument(
        "--convert-repeat", type=positive_int, default=3, help="timed runs of each checkpoint step (default 3)"
    )
    g.add_argument("--convert-dir", default=None, metavar="DIR", help="where to generate it (default: a temp dir)")
    g.add_argument("--bitnet-converter", default=None, metavar="PATH",
                   help="bitnet.cpp's utils/convert-hf-to-gguf-bitnet.py: time it on the same checkpoint")  # fmt: skip
    g.add_argument("--bitnet-pythonpath", default=None, metavar="PATHS",
                   help="PYTHONPATH for that converter only (its gguf-py, sentencepiece; default: the checkout's "
                   "3rdparty/llama.cpp/gguf-py when present)")  # fmt: skip
    g.add_argument("--bitnet-python", default=sys.executable, metavar="PY", help="the Python that runs it (torch)")
    g.add_argument("--bitnet-wrapper", default=str(WRAPPER), metavar="PATH", help="run_converter.py")


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the suite and print its tables; returns the rows (``part``: ``"tq"`` or ``"checkpoint"``)."""
    threads = parse_threads(args.threads)
    n = parse_floats(args.convert_floats)
    rows = _tq_rows(n, threads, args.repeat) if n > 0 else []
    if parse_checkpoint_size(args.convert_size) > 0:
        rows += _checkpoint_rows(args, threads)
    return rows


# ------------------------------------------------------------------ TQ quantizers


def _tq_rows(n: int, threads: list[int], repeat: int) -> list[dict[str, Any]]:
    try:
        import gguf
    except ImportError:
        print("bench convert: the gguf package is not installed; the TQ table is skipped")
        return []
    cols = 4096 if n % 4096 == 0 else 256
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32).reshape(-1, cols)
    table = Table(_TQ_TITLE, _TQ_COLUMNS, total=2 * len(threads), notes=_TQ_NOTES)
    out: list[dict[str, Any]] = []
    with restored_threads(None):
        for fmt, ours in (("tq2_0", bitnet_go.quantize_tq2_0), ("tq1_0", bitnet_go.quantize_tq1_0)):
            qt = getattr(gguf.GGMLQuantizationType, fmt.upper())
            ts_ref = timeit(lambda qt=qt: gguf.quants.quantize(x, qt), repeat=max(1, min(repeat, 3)), min_time=0)
            same = ours(x).to_gguf_bytes() == gguf.quants.quantize(x, qt).tobytes()
            for th in threads:
                table.start(f"{fmt} of {n} floats, {th} thread(s)")
                bitnet_go.set_num_threads(th)
                ts = timeit(lambda ours=ours: ours(x), repeat=repeat)
                row = {"part": "tq", "format": fmt, "n": n, "threads": th, "same": same,
                       "speedup": median(ts_ref) / median(ts)}  # fmt: skip
                put_timings(row, "ours", ts)
                put_timings(row, "gguf", ts_ref)
                table.add(row)
                out.append(row)
    table.done()
    return out


_TQ_TITLE = "quantize_tq2_0 / quantize_tq1_0 vs gguf.quants.quantize (median ms, range = min-max of the calls)"
_TQ_COLUMNS = [
    ("format", "format", "s", ""),
    ("n", "floats", "d", "float32 values quantized in one call (a (n/4096, 4096) matrix)"),
    ("threads", "thr", "d", "bitnet_go threads (gguf.quants is numpy: one thread)"),
    ("ours_ms", "ours ms", ".1f", "bitnet_go.quantize_tq2_0 / quantize_tq1_0"),
    ("ours_spread", "range", "s", ""),
    ("gguf_ms", "gguf ms", ".1f", "gguf.quants.quantize(x, TQ2_0 / TQ1_0), timed once per format"),
    ("gguf_spread", "range", "s", ""),
    ("speedup", "x faster", ".1f", "gguf ms / ours ms"),
    ("same", "same", "", "our GGUF bytes (to_gguf_bytes) equal gguf's"),
]
_TQ_NOTES = ["the issue asks for at least 20x on 16M floats"]


# ------------------------------------------------------------------ the checkpoint


def _dims(size: int) -> tuple[int, int, int, int, int]:
    """(hidden, intermediate, heads, vocab, layers) of a LLaMA-shaped model of about ``size`` bf16 bytes."""
    h, ff, heads, vocab = (2048, 5632, 16, 32000) if size >= 64 << 20 else (256, 768, 4, 1024)
    layer = 2 * (4 * h * h + 3 * h * ff + 2 * h + ff)
    return h, ff, heads, vocab, max(1, round((size - 2 * vocab * h) / layer))


def make_checkpoint(d: Path, size: int, seed: int = 0) -> int:
    """Write a bf16 ``BitnetForCausalLM`` checkpoint of about ``size`` bytes (``model.safetensors``,
    ``config.json``) into ``d``, one tensor at a time; returns the file's size.

    Example:
        >>> import tempfile
        >>> make_checkpoint(Path(tempfile.mkdtemp()), 1 << 20) > 1 << 20
        True
    """
    from ..convert._writer import write_safetensors_header

    h, ff, heads, vocab, layers = _dims(size)
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, h))]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
        shapes += [(p + f"self_attn.{n}_proj.weight", (h, h)) for n in "qkvo"]
        shapes += [(p + "self_attn.inner_attn_ln.weight", (h,)), (p + "mlp.ffn_layernorm.weight", (ff,))]
        shapes += [(p + "mlp.gate_proj.weight", (ff, h)), (p + "mlp.up_proj.weight", (ff, h))]
        shapes += [(p + "mlp.down_proj.weight", (h, ff))]
    shapes.append(("model.norm.weight", (h,)))
    config = {"architectures": ["BitnetForCausalLM"], "model_type": "bitnet", "hidden_size": h,
              "intermediate_size": ff, "num_attention_heads": heads, "num_key_value_heads": heads,
              "num_hidden_layers": layers, "vocab_size": vocab, "max_position_embeddings": 2048,
              "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}  # fmt: skip
    (d / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(seed)
    path = d / "model.safetensors"
    with open(path, "wb") as f:
        write_safetensors_header(f, [(n, "BF16", s, 2 * math.prod(s)) for n, s in shapes], {"format": "pt"})
        for _, s in shapes:
            a = rng.standard_normal(math.prod(s), dtype=np.float32)
            a *= 1.0 if len(s) == 1 else 0.02
            f.write((a.view(np.uint32) >> 16).astype(np.uint16).tobytes())  # bf16: the top half of each float32
    return path.stat().st_size


def _time_runs(fn: Any, repeat: int, before: Any = None) -> list[float]:  # noqa: ANN401
    """Seconds of ``repeat`` calls of ``fn``, each after ``before()`` (untimed) when given."""
    out = []
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _ours(d: Path, out: Path, fmt: str, th: int) -> None:
    from ..convert import convert_checkpoint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "without tokenizer metadata": as the comparison wants
        convert_checkpoint(d, out, qtype=fmt, to="gguf", threads=th, progress=False, tokenizer=False, force=True)


def _bitnet_cmd(args: argparse.Namespace, d: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    conv = Path(args.bitnet_converter).expanduser().resolve()
    pp = args.bitnet_pythonpath
    if pp is None:
        guess = conv.parent.parent / "3rdparty" / "llama.cpp" / "gguf-py"
        pp = str(guess) if guess.is_dir() else ""
    env = dict(os.environ, PYTHONPATH=pp, NO_LOCAL_GGUF="1")
    cmd = [args.bitnet_python, args.bitnet_wrapper, "--no-vocab", str(conv), str(d), "--outfile", str(out),
           "--outtype", "i2_s"]  # fmt: skip
    return cmd, env


def _compare_i2s(ours: Path, theirs: Path) -> tuple[str, float]:
    """How many I2_S tensors of the two files have equal packed values, and the largest relative scale difference."""
    import gguf

    from ..convert import bitnet_cpp_types

    with bitnet_cpp_types():
        a = {t.name: t for t in gguf.GGUFReader(ours).tensors if int(t.tensor_type) == 36}
        b = {t.name: t for t in gguf.GGUFReader(theirs).tensors if int(t.tensor_type) == 36}
        raw_a, raw_b = np.memmap(ours, np.uint8, mode="r"), np.memmap(theirs, np.uint8, mode="r")
        same, worst = 0, 0.0
        for name, t in a.items():
            u = b.get(name)
            if u is None:
                continue
            n = math.prod(int(v) for v in t.shape) // 4
            pa = raw_a[t.data_offset : t.data_offset + n + 4]
            pb = raw_b[u.data_offset : u.data_offset + n + 4]
            same += bool(np.array_equal(pa[:n], pb[:n]))
            sa, sb = pa[n:].view(np.float32)[0], pb[n:].view(np.float32)[0]
            worst = max(worst, abs(float(sa) - float(sb)) / max(abs(float(sa)), 1e-30))
        return f"{same}/{len(a)}" + ("" if len(a) == len(b) else f" (theirs: {len(b)})"), worst


def _checkpoint_rows(args: argparse.Namespace, threads: list[int]) -> list[dict[str, Any]]:
    try:
        import gguf  # noqa: F401
    except ImportError:
        print("bench convert: the gguf package is not installed; the checkpoint table is skipped")
        return []
    size = parse_checkpoint_size(args.convert_size)
    repeat = max(1, args.convert_repeat)
    base = Path(tempfile.mkdtemp(prefix="bitnet_go_bench_convert_", dir=args.convert_dir))
    rows: list[dict[str, Any]] = []
    n_steps = 1 + 2 * len(threads) + (1 if args.bitnet_converter else 0)
    table = Table(_CK_TITLE, _CK_COLUMNS, total=n_steps, notes=list(_CK_NOTES))
    try:
        d = base / "model"
        d.mkdir()
        t0 = time.perf_counter()
        nbytes = make_checkpoint(d, size)
        table.notes.insert(0, f"checkpoint: {nbytes / 1e9:.3f} GB bf16, {_dims(size)[4]} layers, generated in "
                              f"{time.perf_counter() - t0:.1f} s in {base}")  # fmt: skip
        src = d / "model.safetensors"

        def add(step: str, th: int | None, ts: list[float], **extra: Any) -> dict[str, Any]:  # noqa: ANN401
            row = {"part": "checkpoint", "step": step, "threads": th, "s": median(ts), "range": spread_text(ts),
                   "gbs": nbytes / 1e9 / median(ts), "bytes": nbytes, **extra}  # fmt: skip
            table.add(row)
            rows.append(row)
            return row

        table.start("cat IN > /dev/null")
        subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        read = lambda: subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # noqa: E731
        cat = add("cat IN > /dev/null", None, _time_runs(read, max(repeat, 3)))
        ours_i2s: dict[int, float] = {}
        with restored_threads(None):
            for fmt in ("i2_s", "tq2_0"):
                for th in threads:
                    table.start(f"bitnet_go convert to {fmt} GGUF, {th} thread(s)")
                    out = base / f"ours-{fmt}.gguf"
                    _ours(d, out, fmt, th)  # once unmeasured: imports, first allocations
                    # each run writes a new file, as `convert IN -o OUT` does without --force
                    ts = _time_runs(lambda out=out, fmt=fmt, th=th: _ours(d, out, fmt, th), repeat,
                                    before=lambda out=out: out.unlink(missing_ok=True))  # fmt: skip
                    if fmt == "i2_s":
                        ours_i2s[th] = median(ts)
                    add(f"bitnet_go {fmt} gguf", th, ts, vs_cat=median(ts) / cat["s"], out_bytes=out.stat().st_size)
        if args.bitnet_converter:
            table.start("bitnet.cpp convert-hf-to-gguf-bitnet.py --outtype i2_s")
            theirs = base / "bitnet-cpp-i2_s.gguf"
            cmd, env = _bitnet_cmd(args, d, theirs)
            log = base / "bitnet_converter.log"

            def once() -> None:
                with open(log, "w") as f:
                    r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
                if r.returncode != 0:
                    tail = log.read_text()[-3000:]
                    raise RuntimeError(f"bitnet.cpp's converter failed ({r.returncode}): {' '.join(cmd)}\n{tail}")

            ts = _time_runs(once, repeat, before=lambda: theirs.unlink(missing_ok=True))
            same, scale = _compare_i2s(base / "ours-i2_s.gguf", theirs)
            best = min(ours_i2s.values())
            add("bitnet.cpp i2_s gguf", None, ts, vs_cat=median(ts) / cat["s"], out_bytes=theirs.stat().st_size,
                vs_ours=median(ts) / best, same=same, scale_diff=scale)  # fmt: skip
            for r in rows:
                if r["step"] == "bitnet_go i2_s gguf":
                    r["vs_bitnet"] = median(ts) / r["s"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table.done()
    return rows


_CK_TITLE = "converting a generated bf16 checkpoint to GGUF (median s of the runs, range = min-max)"
_CK_COLUMNS = [
    ("step", "step", "s", ""),
    ("threads", "thr", "d", "bitnet_go threads (bitnet.cpp's converter: torch's default, numpy one)"),
    ("s", "s", ".2f", "seconds, median"),
    ("range", "range ms", "s", "min-max of the runs, ms"),
    ("gbs", "in GB/s", ".2f", "checkpoint bytes / seconds"),
    ("vs_cat", "x cat", ".2f", "seconds / cat's seconds (the issue: within 2x)"),
    ("vs_bitnet", "bitnet.cpp/ours", ".1f", "bitnet.cpp's converter's seconds / ours (the issue: at least 5x)"),
    ("out_bytes", "out bytes", "d", "the GGUF file's size"),
    ("same", "same", "s", "bitnet.cpp's row: its I2_S tensors whose packed values equal ours"),
    ("scale_diff", "scale rel diff", ".1e", "bitnet.cpp's row: largest relative difference of an I2_S scale"),
]
_CK_NOTES = [
    "cat runs once unmeasured first: every timed step reads the checkpoint from the page cache",
    "ours: bitnet_go.convert.convert_checkpoint(..., to='gguf', tokenizer=False), in this process, after one "
    "unmeasured run; bitnet.cpp's: a new Python process each run (imports torch: part of its time)",
    "each run writes a new output file (the last run's is removed before the clock starts), as a conversion "
    "without --force does; replacing an existing file adds ext4's flush of the new file at the rename",
]
