"""Run bitnet.cpp's checkpoint converter out of tree, for ``python -m bitnet_go bench convert --bitnet-converter``.

    python tools/bitnet_cpp_convert/run_converter.py [--no-vocab] CONVERTER MODEL_DIR --outfile OUT --outtype i2_s

CONVERTER: ``utils/convert-hf-to-gguf-bitnet.py`` of a microsoft/BitNet checkout (its ``utils/convert.py``
beside it); the arguments after it are the converter's own. Needs PyTorch, numpy, safetensors,
sentencepiece (``utils/convert.py`` imports it) and bitnet.cpp's ``gguf-py`` on PYTHONPATH
(``3rdparty/llama.cpp/gguf-py`` of the checkout). Nothing of bitnet.cpp is copied here: this script
loads the converter where it lies and calls its ``main()``.

Two adaptations, both printed on stderr when made:

- a ``gguf-py`` older than the converter (the BitNet checkout's submodule at an earlier commit) lacks
  ``GGMLQuantizationType.I2_S`` (36 in bitnet.cpp's ggml) and ``MODEL_ARCH.BITNET_B158`` (architecture
  name ``bitnet-b1.58``, the tensors of ``MODEL_ARCH.BITNET``): they are added to the loaded module,
  nothing on disk changes;
- ``--no-vocab`` makes the converter's ``set_vocab`` do nothing (no ``tokenizer.ggml.*`` keys), for a
  generated checkpoint without a tokenizer its vocabulary code accepts (a BPE tokenizer must hash to
  one llama.cpp knows, which needs ``transformers`` and a real tokenizer). ``bitnet-go convert
  --no-tokenizer`` writes the same: the tensors and hyperparameters, no vocabulary.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _note(msg: str) -> None:
    print(f"run_converter: {msg}", file=sys.stderr)


def _add_member(cls: type, name: str, value: int) -> object:
    """Add member ``name`` = ``value`` to enum ``cls`` in this process (an older gguf-py lacks it)."""
    member = int.__new__(cls, value)  # type: ignore[call-overload]
    member._name_ = name
    member._value_ = value
    cls._member_map_[name] = member  # type: ignore[attr-defined]
    cls._value2member_map_[value] = member  # type: ignore[attr-defined]
    type.__setattr__(cls, name, member)
    return member


def adapt_gguf() -> None:
    """Give an older bitnet.cpp ``gguf-py`` the names the newer converter uses."""
    import gguf

    q = gguf.GGMLQuantizationType
    if "I2_S" not in q.__members__:
        if 36 in q._value2member_map_:
            raise SystemExit(
                f"run_converter: gguf {gguf.__file__} uses type id 36 for something else: not bitnet.cpp's"
            )
        m = _add_member(q, "I2_S", 36)
        gguf.GGML_QUANT_SIZES[m] = (4, 1)  # 4 values a byte (the 32-byte tail is in the data the converter passes)
        _note("added GGMLQuantizationType.I2_S = 36 to this gguf-py")
    a = gguf.MODEL_ARCH
    if "BITNET_B158" not in a.__members__:
        m = _add_member(a, "BITNET_B158", max(a._value2member_map_) + 1)
        gguf.MODEL_ARCH_NAMES[m] = "bitnet-b1.58"
        gguf.MODEL_TENSORS[m] = list(gguf.MODEL_TENSORS[a.BITNET])
        _note("added MODEL_ARCH.BITNET_B158 ('bitnet-b1.58', the tensors of MODEL_ARCH.BITNET) to this gguf-py")


def main(argv: list[str]) -> int:
    no_vocab = "--no-vocab" in argv
    argv = [a for a in argv if a != "--no-vocab"]
    if not argv or not Path(argv[0]).is_file():
        print(__doc__, file=sys.stderr)
        return 2
    converter = Path(argv[0]).resolve()
    sys.path.insert(0, str(converter.parent))  # its `from convert import ...`
    adapt_gguf()
    spec = importlib.util.spec_from_file_location("bitnet_cpp_convert_hf", converter)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.argv = [str(converter), *argv[1:]]
    mod.args = mod.parse_args()  # the converter reads the global `args` (as when run as a script)
    if no_vocab:
        for cls in set(mod.Model._model_classes.values()):
            if "set_vocab" in vars(cls):
                cls.set_vocab = lambda self: None
        mod.Model.set_vocab = lambda self: None
        _note("--no-vocab: set_vocab does nothing (no tokenizer.ggml.* keys)")
    mod.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
