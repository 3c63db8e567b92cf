"""``bitnet-go convert`` (``python -m bitnet_go convert``): the arguments and the run."""

from __future__ import annotations

import argparse
import sys
import warnings

from ._convert import convert_checkpoint
from ._formats import FORMATS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``convert`` subcommand's arguments.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_arguments(p)
        >>> a = p.parse_args(["ckpt", "-o", "out.gguf", "--format", "tl2", "--to", "gguf", "--exclude", "*.o_proj.*"])
        >>> a.format, a.to, a.exclude, a.include
        ('tl2', 'gguf', ['*.o_proj.*'], [])
    """
    p.add_argument("input", metavar="IN", help="a .safetensors file, a sharded checkpoint directory "
                   "(model.safetensors.index.json) or a Hugging Face model directory (config.json)")  # fmt: skip
    p.add_argument("-o", "--output", metavar="OUT", help="the file to write (not needed with --dry-run)")
    p.add_argument("--format", choices=FORMATS, default="i2_s", help="ternary format (default i2_s)")
    p.add_argument("--to", choices=("safetensors", "gguf"), default=None,
                   help="output kind (default: gguf when OUT ends in .gguf, else safetensors)")  # fmt: skip
    p.add_argument("--include", action="append", default=[], metavar="GLOB",
                   help="quantize exactly the tensors matching (repeatable; default: every 2-D+ *.weight "
                   "except lm_head, norms and embed_tokens)")  # fmt: skip
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave tensors matching as they are (repeatable)")  # fmt: skip
    p.add_argument("--method", choices=("absmean", "absmax"), default="absmean", help="scale rule (default absmean)")
    p.add_argument("--block-size", type=int, default=None, metavar="N",
                   help="elements per scale (safetensors output; default one scale per tensor)")  # fmt: skip
    p.add_argument("--threads", type=int, default=None, metavar="N", help="Go threads for the quantizer")
    p.add_argument("--dry-run", action="store_true",
                   help="list what would be converted and the output's size; write nothing")  # fmt: skip
    p.add_argument("-f", "--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--kernel-config", default=None, metavar="PATH",
                   help="GGUF tl1/tl2: the model's kernel_config.ini (bitnet.cpp's include/)")  # fmt: skip
    p.add_argument("--no-tokenizer", dest="tokenizer", action="store_false",
                   help="GGUF: write no tokenizer.ggml.* keys (llama.cpp will not load the file)")  # fmt: skip
    p.add_argument("--tokenizer-pre", default=None, metavar="NAME",
                   help="GGUF: llama.cpp's pre-tokenizer name for a BPE tokenizer.json it does not recognise "
                   "(e.g. llama-bpe, gpt-2)")  # fmt: skip
    p.set_defaults(func=run)


def _one_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    """A warning as the CLI prints it: ``bitnet-go convert: warning: <message>`` (no source line).

    Example:
        >>> _one_line(UserWarning("include pattern 'x' matches no tensor"), UserWarning, "f.py", 1)
        "bitnet-go convert: warning: include pattern 'x' matches no tensor\\n"
    """
    return f"bitnet-go convert: warning: {message}\n"


def run(args: argparse.Namespace) -> int:
    """Run ``convert`` with parsed arguments; errors are one line on stderr and exit status 1 (130 for Ctrl-C),
    warnings (an ``--include`` pattern that matches no tensor, ``--no-tokenizer``) one line on stderr each."""
    to = args.to or ("gguf" if (args.output or "").endswith(".gguf") else "safetensors")
    if not args.dry_run and not args.output:
        print("bitnet-go convert: -o OUT is required (or --dry-run)", file=sys.stderr)
        return 2
    old_format, warnings.formatwarning = warnings.formatwarning, _one_line  # type: ignore[assignment]
    try:
        return _run(args, to)
    finally:
        warnings.formatwarning = old_format


def _run(args: argparse.Namespace, to: str) -> int:
    try:
        items = convert_checkpoint(
            args.input,
            args.output,
            qtype=args.format,
            to=to,
            include=args.include,
            exclude=args.exclude,
            method=args.method,
            block_size=args.block_size,
            threads=args.threads,
            dry_run=args.dry_run,
            progress=None if args.dry_run else True,
            tokenizer=args.tokenizer,
            tokenizer_pre=args.tokenizer_pre,
            kernel_config=args.kernel_config,
            force=args.force,
        )
    except (ValueError, TypeError, OSError, NotImplementedError, ImportError) as e:
        print(f"bitnet-go convert: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"bitnet-go convert: interrupted; {args.output} not written", file=sys.stderr)
        return 130
    if args.dry_run:
        for p in items:
            print(p.line())
        print(items.summary(dry_run=True))
    else:
        print(f"wrote {args.output}: {items.summary()}")
    return 0
