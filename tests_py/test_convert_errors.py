"""``bitnet-go convert`` and ``load_checkpoint`` refuse bad input with a ``ValueError``/``TypeError`` that names
the file, tensor, key or argument, before anything is written, instead of a traceback from deep inside.

Every checkpoint is crafted in tmp_path (numpy alone writes safetensors; the GGUF cases build a small LLaMA
model with test_convert's helpers). Each case checks the exception type, a distinctive part of its message
and, for conversion, that no output (nor temporary file) is left.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import bitnet_go
from bitnet_go.__main__ import main
from bitnet_go.convert import META_KEY, ConfigError, convert_checkpoint, load_checkpoint
from bitnet_go.convert._reader import read_header
from test_convert import PY_SRC, W_NAME, _good_file, _raw_safetensors, config, model_tensors, save_model


def _only_input(tmp_path: Path) -> None:
    """Nothing was written beside the input directory ``m``: no output, no temporary file."""
    assert sorted(os.listdir(tmp_path)) == ["m"]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``python -m bitnet_go convert ARGV`` in process: the exit status and the last line of stderr."""
    rc = main(["convert", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err[-1] if err else ""


# ------------------------------------------------------------------ integer, bool and path arguments

INT_OPTIONS = [
    ({"block_size": 2**63}, ValueError, r"block_size \(--block-size\) must be between 1 and 1152921504606846976, got"),
    ({"block_size": 10**20}, ValueError, r"block_size \(--block-size\) must be between 1 and"),
    ({"block_size": 0}, ValueError, r"block_size \(--block-size\) must be between 1 and .*, got 0"),
    ({"block_size": 2.0}, TypeError, r"block_size \(--block-size\) must be an int or None, got float 2.0"),
    ({"block_size": True}, TypeError, r"block_size \(--block-size\) must be an int or None, got bool True"),
    ({"threads": "2"}, TypeError, r"threads \(--threads\) must be an int or None, got str '2'"),
    ({"threads": 0}, ValueError, r"threads \(--threads\) must be between 1 and \d+, got 0"),
    ({"threads": 10**6}, ValueError, r"threads \(--threads\) must be between 1 and \d+, got 1000000"),
    ({"threads": np.bool_(True)}, TypeError, r"threads \(--threads\) must be an int or None, got bool"),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "write"])
@pytest.mark.parametrize(("kw", "error", "message"), INT_OPTIONS, ids=[str(c[0]) for c in INT_OPTIONS])
def test_integer_options_are_checked_up_front(
    tmp_path: Path, kw: dict[str, object], error: type[Exception], message: str, dry_run: bool
) -> None:
    f = _good_file(tmp_path / "m", 1)
    with pytest.raises(error, match=message):
        convert_checkpoint(f, None if dry_run else tmp_path / "o.safetensors", dry_run=dry_run, progress=False, **kw)
    _only_input(tmp_path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--block-size", "99999999999999999999"], "block_size (--block-size) must be between 1 and"),
        (["--block-size", "99999999999999999999", "--dry-run"], "block_size (--block-size) must be between 1 and"),
        (["--block-size", "0"], "block_size (--block-size) must be between 1 and"),
        (["--threads", "0"], "threads (--threads) must be between 1 and"),
        (["--threads", "0", "--dry-run"], "threads (--threads) must be between 1 and"),
    ],
)
def test_cli_integer_options(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    f = _good_file(tmp_path / "m", 2)
    out = [] if "--dry-run" in argv else ["-o", str(tmp_path / "o.safetensors")]
    rc, last = _cli([str(f), *out, *argv], capsys)
    assert rc == 1 and last.startswith("bitnet-go convert: ValueError: " + message), last
    _only_input(tmp_path)


def test_numpy_integers_are_accepted_and_written_as_ints(tmp_path: Path) -> None:
    """block_size and threads take NumPy integers, as quantize_i2s does; the output is the same bytes."""
    f = _good_file(tmp_path / "m", 3)
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    convert_checkpoint(f, a, block_size=128, threads=1, progress=False)
    convert_checkpoint(f, b, block_size=np.int64(128), threads=np.int32(1), progress=False)
    assert a.read_bytes() == b.read_bytes()
    t = load_checkpoint(b)[W_NAME]
    assert type(t.block_size) is int and t.block_size == 128
    w = np.frombuffer(f.read_bytes()[-9216:-1024], np.float32).reshape(8, 256)
    assert t.packed.tobytes() == bitnet_go.quantize_i2s(w, block_size=128).packed.tobytes()


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"progress": "no"}, "progress must be a bool, got str 'no'"),
        ({"force": "no"}, "force must be a bool, got str 'no'"),
        ({"dry_run": "yes"}, "dry_run must be a bool, got str 'yes'"),
        ({"tokenizer": 1}, "tokenizer must be a bool, got int 1"),
        ({"progress": 0}, "progress must be a bool, got int 0"),
    ],
)
def test_bool_arguments_must_be_bools(tmp_path: Path, kw: dict[str, object], message: str) -> None:
    f = _good_file(tmp_path / "m", 4)
    with pytest.raises(TypeError, match=re.escape(message)):
        convert_checkpoint(f, tmp_path / "o.safetensors", **{"progress": False, **kw})
    _only_input(tmp_path)


def test_numpy_bools_are_bools(tmp_path: Path) -> None:
    f = _good_file(tmp_path / "m", 5)
    done = convert_checkpoint(f, dry_run=np.bool_(True), progress=np.bool_(False))
    assert done.summary(dry_run=True).startswith("1 of 2 tensors would become i2_s")
    _only_input(tmp_path)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"src": None}, "src must be a path (str or os.PathLike), got NoneType None"),
        ({"src": 5}, "src must be a path (str or os.PathLike), got int 5"),
        ({"out": 5}, "out must be a path (str or os.PathLike), got int 5"),
        ({"kernel_config": 3}, "kernel_config must be a path (str or os.PathLike), got int 3"),
        ({"tokenizer_pre": 5}, "tokenizer_pre must be None or a str, got int 5"),
        ({"include": None}, "include must be a sequence of glob patterns (str), got None"),
        ({"exclude": [b"*.weight"]}, "exclude must be a sequence of glob patterns (str), got [b'*.weight']"),
    ],
)
def test_argument_types(tmp_path: Path, kw: dict[str, object], message: str) -> None:
    f = _good_file(tmp_path / "m", 6)
    args = {"src": f, "out": tmp_path / "o.safetensors", "progress": False, **kw}
    with pytest.raises(TypeError, match=re.escape(message)):
        convert_checkpoint(**args)  # type: ignore[arg-type]
    _only_input(tmp_path)
    with pytest.raises(TypeError, match=re.escape("path must be a path (str or os.PathLike), got NoneType None")):
        load_checkpoint(None)  # type: ignore[arg-type]


def test_patterns_may_be_any_iterable(tmp_path: Path) -> None:
    """include/exclude are read once (a generator is not used up by the check)."""
    f = _good_file(tmp_path / "m", 7)
    done = convert_checkpoint(f, dry_run=True, include=(p for p in ["*.up_proj.weight"]))
    assert [p.quantized for p in done] == [True, False]


# ------------------------------------------------------------------ malformed safetensors headers

HEADER_ENTRIES = [
    ({"dtype": ["F32"]}, "dtype must be a string such as 'F32', got ['F32']"),
    ({"dtype": 5}, "dtype must be a string such as 'F32', got 5"),
    ({"shape": [2.9, 256]}, "shape must be a list of ints >= 0, got [2.9, 256]"),
    ({"shape": "8"}, "shape must be a list of ints >= 0, got '8'"),
    ({"shape": [8, -256]}, "shape must be a list of ints >= 0, got [8, -256]"),
    ({"shape": [True, 256]}, "shape must be a list of ints >= 0, got [True, 256]"),
    ({"data_offsets": [0.0, 8192.0]}, "data_offsets must be two ints [begin, end], got [0.0, 8192.0]"),
    ({"data_offsets": [0]}, "data_offsets must be two ints [begin, end], got [0]"),
    ({"data_offsets": [0, 4096, 8192]}, "data_offsets must be two ints [begin, end], got [0, 4096, 8192]"),
    ({"data_offsets": None}, "data_offsets must be two ints [begin, end], got None"),
    ({"data_offsets": [8192, 0]}, "has data_offsets [8192, 0]: expected 8192 bytes within"),
    ([1, 2], "malformed header entry [1, 2] (an object with dtype, shape and data_offsets)"),
    ("drop data_offsets", "malformed header entry {'dtype': 'F32', 'shape': [8, 256]}"),
]


def _break_entry(f: Path, change: object) -> None:
    """Rewrite the header entry of tensor W_NAME in ``f``: update it with ``change`` (a dict), replace it (a
    list), or drop its data_offsets."""
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    if isinstance(change, dict):
        header[W_NAME].update(change)
    elif change == "drop data_offsets":
        del header[W_NAME]["data_offsets"]
    else:
        header[W_NAME] = change
    _raw_safetensors(f, header, raw[8 + n :])


@pytest.mark.parametrize("to", ["safetensors", pytest.param("gguf", marks=pytest.mark.needs("gguf"))])
@pytest.mark.parametrize(("change", "message"), HEADER_ENTRIES, ids=[str(c[0]) for c in HEADER_ENTRIES])
def test_malformed_header_entry_names_file_and_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: object, message: str, to: str
) -> None:
    f = _good_file(tmp_path / "m", 8)
    _break_entry(f, change)
    want = re.escape(f"{f}: tensor {W_NAME!r}") + ".*" + re.escape(message)
    with pytest.raises(ValueError, match=want):
        read_header(f)
    with pytest.raises(ValueError, match=want):
        load_checkpoint(f)
    out = tmp_path / f"o.{to}"
    with pytest.raises(ValueError, match=want):
        convert_checkpoint(f, out, to=to, progress=False)  # type: ignore[arg-type]
    _only_input(tmp_path)
    rc, last = _cli([str(f), "-o", str(out), "--to", to], capsys)
    assert rc == 1 and last.startswith(f"bitnet-go convert: ValueError: {f}: tensor") and message in last, last
    _only_input(tmp_path)


# ------------------------------------------------------------------ sharded checkpoints: the index

EXPECTED_MAP = "expected a 'weight_map' object mapping tensor names to shard file names, got"
MAPS_TO = "weight_map must map each tensor name to its file name (a string), but 'a' maps to"
INDEXES = [
    ({"weight_map": ["a"]}, f"{EXPECTED_MAP} ['a']"),
    ({"weight_map": {}}, f"{EXPECTED_MAP} {{}}"),
    ({"metadata": {}}, f"{EXPECTED_MAP} None"),
    ({"weight_map": {"a": 5}}, f"{MAPS_TO} 5"),
    ({"weight_map": {"a": None}}, f"{MAPS_TO} None"),
    ({"weight_map": {"a": ""}}, f"{MAPS_TO} ''"),
    (["weight_map"], "expected a JSON object, got list"),
    ("{not json", "not valid JSON"),
]


@pytest.mark.parametrize(("index", "message"), INDEXES, ids=[str(c[0]) for c in INDEXES])
def test_bad_index_names_the_index(tmp_path: Path, index: object, message: str) -> None:
    d = tmp_path / "m"
    _good_file(d, 9)
    path = d / "model.safetensors.index.json"
    path.write_text(index if isinstance(index, str) else json.dumps(index))
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
        convert_checkpoint(d, tmp_path / "o.safetensors", progress=False)
    with pytest.raises(ValueError, match=re.escape(f"{path}: {message}")):
        convert_checkpoint(d, dry_run=True)
    _only_input(tmp_path)


# ------------------------------------------------------------------ load_checkpoint: bitnet_go metadata

METADATA = [
    ("[1, 2]", "metadata bitnet_go.quantized must be a JSON object mapping tensor names to their format, got list"),
    ("{not json", "metadata bitnet_go.quantized is not JSON"),
    ({W_NAME: 5}, f"metadata bitnet_go.quantized: tensor {W_NAME!r} must map to an object"),
    ({W_NAME: {"shape": [8, 256]}}, f"metadata bitnet_go.quantized: tensor {W_NAME!r} has no 'qtype'"),
    ({W_NAME: {"qtype": "i2_s"}}, f"metadata bitnet_go.quantized: tensor {W_NAME!r} has no 'shape'"),
    ({W_NAME: {"qtype": 1, "shape": [8, 256]}}, f"tensor {W_NAME!r}: 'qtype' must be a string, got 1"),
    ({W_NAME: {"qtype": "i2_s", "shape": 5}}, f"tensor {W_NAME!r}: 'shape' must be a list of ints >= 0, got 5"),
    ({W_NAME: {"qtype": "i2_s", "shape": [8.0, 256]}}, "'shape' must be a list of ints >= 0, got [8.0, 256]"),
    ({W_NAME: {"qtype": "i2_s", "shape": [8, 256], "block_size": "x"}}, "'block_size' must be an int >= 1 or null"),
    ({W_NAME: {"qtype": "i2_s", "shape": [8, 256], "block_size": 0}}, "'block_size' must be an int >= 1 or null"),
    ({W_NAME: {"qtype": "i2_s", "shape": [8, 256], "method": 5}}, "'method' must be a string or null, got 5"),
    ({W_NAME: {"qtype": "q4_0", "shape": [8, 256]}}, f"quantized tensor {W_NAME!r} ("),
    ({W_NAME: {"qtype": "i2_s", "shape": [8, 512]}}, f"quantized tensor {W_NAME!r} ("),
]


def _converted(tmp_path: Path, seed: int) -> tuple[Path, dict, bytes]:
    """A converted checkpoint's path, its header (to edit) and its data bytes."""
    out = tmp_path / "o.safetensors"
    convert_checkpoint(_good_file(tmp_path / "m", seed), out, progress=False)
    raw = out.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return out, json.loads(raw[8 : 8 + n]), raw[8 + n :]


@pytest.mark.parametrize(("meta", "message"), METADATA, ids=[str(c[0])[:60] for c in METADATA])
def test_load_checkpoint_checks_its_metadata(tmp_path: Path, meta: object, message: str) -> None:
    out, header, data = _converted(tmp_path, 10)
    header["__metadata__"][META_KEY] = meta if isinstance(meta, str) else json.dumps(meta)
    _raw_safetensors(out, header, data)
    with pytest.raises(ValueError, match=re.escape(f"{out}: ") + ".*" + re.escape(message)):
        load_checkpoint(out)


def test_load_checkpoint_wrong_packed_dtype(tmp_path: Path) -> None:
    """A packed tensor stored in another dtype: TernaryTensor's own refusal, with the file and tensor named."""
    out, header, data = _converted(tmp_path, 11)
    packed = header[W_NAME + "_packed"]
    packed.update(dtype="F32", shape=[packed["shape"][0] // 4])
    _raw_safetensors(out, header, data)
    with pytest.raises(ValueError, match=re.escape(f"{out}: quantized tensor {W_NAME!r} ('{W_NAME}_packed'") + ".*"
                       "packed must be"):  # fmt: skip
        load_checkpoint(out)


# ------------------------------------------------------------------ values: NaN/Inf, empty tensors

NON_FINITE = [
    ("F32", np.float32, 300, np.nan, "a non-finite value (NaN) at flat index 300"),
    ("F32", np.float32, 7, -np.inf, "a non-finite value (-Inf) at flat index 7"),
    ("F16", np.float16, 2047, np.inf, "a non-finite value (+Inf) at flat index 2047"),
    ("F64", np.float64, 5, 1e300, "a value (1e+300) beyond float32's range at flat index 5"),
    ("BF16", np.uint16, 9, 0xFFC0, "a non-finite value (NaN) at flat index 9"),
]


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
@pytest.mark.parametrize(("dtype", "np_dtype", "index", "value", "message"), NON_FINITE,
                         ids=[f"{c[0]}-{c[3]}" for c in NON_FINITE])  # fmt: skip
def test_non_finite_weight_names_tensor_not_check_finite(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    dtype: str,
    np_dtype: type[np.generic],
    index: int,
    value: float,
    message: str,
) -> None:
    (tmp_path / "m").mkdir()
    a = np.full((8, 256), 0x3C00 if dtype == "BF16" else 0.5, np_dtype)
    a.reshape(-1)[index] = value
    header = {W_NAME: {"dtype": dtype, "shape": [8, 256], "data_offsets": [0, a.nbytes]}}
    f = _raw_safetensors(tmp_path / "m" / "model.safetensors", header, a.tobytes())
    out = tmp_path / "o.safetensors"
    want = f"{f}: tensor {W_NAME!r}: x contains {message}; only finite values can be quantized"
    with pytest.raises(ValueError, match=re.escape(want)) as got:
        convert_checkpoint(f, out, progress=False)
    assert "check_finite" not in str(got.value) and "--exclude" in str(got.value)
    assert isinstance(got.value.__cause__, ValueError)  # the quantizer's own error, chained
    _only_input(tmp_path)
    rc, last = _cli([str(f), "-o", str(out)], capsys)
    assert rc == 1 and last.startswith("bitnet-go convert: ValueError: " + want) and "check_finite" not in last
    _only_input(tmp_path)
    convert_checkpoint(f, out, exclude=["*"], progress=False)  # what the message suggests: copied as it is
    assert load_checkpoint(out)[W_NAME].shape == (8, 256)


def test_empty_weight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty weight has no values to quantize: named by --include, an error naming it; picked by the default
    rule, copied as it is (as a TQ shape that cannot be held is), and the dry run says so."""
    (tmp_path / "m").mkdir()
    w = np.ones((4, 256), np.float32)
    header = {"a.weight": {"dtype": "F32", "shape": [0, 256], "data_offsets": [0, 0]},
              "b.weight": {"dtype": "F32", "shape": [4, 256], "data_offsets": [0, w.nbytes]}}  # fmt: skip
    f = _raw_safetensors(tmp_path / "m" / "model.safetensors", header, w.tobytes())
    out = tmp_path / "o.safetensors"
    with pytest.raises(ValueError, match=re.escape(f"{f}: tensor 'a.weight' of shape [0, 256] matches --include, "
                                                   "but it is empty: there are no values to quantize")):  # fmt: skip
        convert_checkpoint(f, out, include=["*.weight"], progress=False)
    _only_input(tmp_path)
    rc, last = _cli([str(f), "-o", str(out), "--include", "a.*"], capsys)
    assert rc == 1 and "tensor 'a.weight' of shape [0, 256] matches --include, but it is empty" in last
    _only_input(tmp_path)
    assert main(["convert", str(f), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "a.weight  [0, 256]  F32 -> F32  (empty: no values to quantize)",
        "b.weight  [4, 256]  F32 -> i2_s",
    ]
    convert_checkpoint(f, out, progress=False)
    got = load_checkpoint(out)
    assert (
        got["a.weight"].shape == (0, 256)
        and got["b.weight"].packed.tobytes() == bitnet_go.quantize_i2s(w).packed.tobytes()
    )


# ------------------------------------------------------------------ --include patterns that match nothing


def test_include_matching_nothing_warns(tmp_path: Path) -> None:
    f = _good_file(tmp_path / "m", 12)
    want = r"include pattern 'nomatch\*' \(--include\) matches no tensor of the checkpoint \(2 tensors, such as"
    with pytest.warns(UserWarning, match=want):
        done = convert_checkpoint(f, dry_run=True, include=["nomatch*", "*.up_proj.weight"])
    assert [p.quantized for p in done] == [True, False]  # the pattern that matches still counts
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pattern that matches: no warning
        convert_checkpoint(f, dry_run=True, include=["*.up_proj.weight"])
        convert_checkpoint(f, dry_run=True, include=["*.norm.weight"])  # matches, though it quantizes nothing


def test_include_matching_nothing_cli_says_so(tmp_path: Path) -> None:
    f = _good_file(tmp_path / "m", 13)
    env = {**os.environ, "PYTHONPATH": PY_SRC}
    r = subprocess.run([sys.executable, "-m", "bitnet_go", "convert", str(f), "--dry-run", "--include", "up_proj"],
                       capture_output=True, text=True, env=env, timeout=120, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        "bitnet-go convert: warning: include pattern 'up_proj' (--include) matches no tensor of the checkpoint "
        f"(2 tensors, such as {W_NAME!r}); a pattern matches whole names, e.g. '*.q_proj.weight'"
    ]
    assert r.stdout.splitlines()[-1].startswith("0 of 2 tensors would become i2_s")


# ------------------------------------------------------------------ GGUF: config.json values

CONFIGS = [
    ({"num_attention_heads": 4.5}, "'num_attention_heads' must be an integer from 1 to 4294967295 (for GGUF key "
                                   "llama.attention.head_count), got 4.5"),
    ({"num_attention_heads": 0}, "'num_attention_heads' must be an integer from 1 to 4294967295"),
    ({"num_attention_heads": -4}, "'num_attention_heads' must be an integer from 1 to 4294967295"),
    ({"num_attention_heads": None}, "'num_attention_heads' must be an integer from 1 to 4294967295 (for GGUF key "
                                    "llama.attention.head_count), got None"),
    ({"num_attention_heads": True}, "'num_attention_heads' must be an integer from 1 to 4294967295"),
    ({"num_attention_heads": "4"}, "'num_attention_heads' must be an integer from 1 to 4294967295"),
    ({"num_attention_heads": 2**32}, "'num_attention_heads' must be an integer from 1 to 4294967295"),
    ({"num_key_value_heads": 0}, "'num_key_value_heads' must be an integer from 1 to 4294967295 (for GGUF key "
                                 "llama.attention.head_count_kv), got 0"),
    ({"num_key_value_heads": 3}, "'num_key_value_heads' (3) must divide the number of attention heads (4)"),
    ({"num_attention_heads": 3, "num_key_value_heads": 3}, "'hidden_size' (256) is not a multiple of the number of "
                                                           "attention heads (3)"),
    ({"hidden_size": 256.0}, "'hidden_size' must be an integer from 1 to 4294967295"),
    ({"num_hidden_layers": 2.0}, "'num_hidden_layers' must be an integer from 1 to 4294967295 (for GGUF key "
                                 "llama.block_count)"),
    ({"max_position_embeddings": 0}, "'max_position_embeddings' must be an integer from 1 to 4294967295"),
    ({"intermediate_size": -1}, "'intermediate_size' must be an integer from 1 to 4294967295"),
    ({"vocab_size": 48.5}, "'vocab_size' must be an integer from 1 to 4294967295 (for GGUF key llama.vocab_size)"),
    ({"head_dim": 0}, "'head_dim' must be an integer from 1 to 4294967295"),
    ({"rope_theta": "1e4"}, "'rope_theta' must be a number > 0 (for GGUF key llama.rope.freq_base, a float32), "
                            "got '1e4'"),
    ({"rope_theta": 0}, "'rope_theta' must be a number > 0"),
    ({"rope_theta": 1e39}, "'rope_theta' must be a number > 0"),
    ({"rms_norm_eps": -1e-5}, "'rms_norm_eps' must be a number >= 0"),
    ({"rms_norm_eps": True}, "'rms_norm_eps' must be a number >= 0"),
    ({"rope_scaling": {"type": "linear", "factor": None}}, "'rope_scaling.factor' must be a number > 0"),
]  # fmt: skip


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.filterwarnings("ignore:GGUF output without tokenizer metadata")
@pytest.mark.parametrize(("change", "message"), CONFIGS, ids=[str(c[0]) for c in CONFIGS])
def test_gguf_config_values_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, object], message: str
) -> None:
    d = save_model(tmp_path / "m", model_tensors(0), {**config(), **change}, tokenizer=False)
    out = tmp_path / "o.gguf"
    want = re.escape("config.json: " + message)
    with pytest.raises(ConfigError, match=want):
        convert_checkpoint(d, out, to="gguf", tokenizer=False, progress=False)
    with pytest.raises(ConfigError, match=want):
        convert_checkpoint(d, to="gguf", tokenizer=False, dry_run=True)
    _only_input(tmp_path)
    rc, last = _cli([str(d), "-o", str(out), "--no-tokenizer"], capsys)
    assert rc == 1 and last.startswith("bitnet-go convert: ConfigError: config.json: " + message), last
    _only_input(tmp_path)


@pytest.mark.needs("safetensors", "gguf")
@pytest.mark.filterwarnings("ignore:GGUF output without tokenizer metadata")
def test_gguf_optional_config_keys_may_be_null(tmp_path: Path) -> None:
    """An optional key set to null is as if absent (Hugging Face writes unset options so): num_key_value_heads then
    defaults to the heads, and the file is the one written without the keys."""
    cfg = {k: v for k, v in config().items() if k != "num_key_value_heads"}
    tensors = model_tensors(0)
    for i in range(2):  # k/v projections as wide as q: one key/value head per head
        for proj in ("k_proj", "v_proj"):
            tensors[f"model.layers.{i}.self_attn.{proj}.weight"] = tensors[
                f"model.layers.{i}.self_attn.q_proj.weight"
            ].copy()
    a = save_model(tmp_path / "a" / "m", tensors, cfg, tokenizer=False)  # the same directory name: general.name
    b = save_model(
        tmp_path / "b" / "m", tensors, {**cfg, "num_key_value_heads": None, "head_dim": None}, tokenizer=False
    )
    convert_checkpoint(a, tmp_path / "a.gguf", to="gguf", tokenizer=False, progress=False)
    convert_checkpoint(b, tmp_path / "b.gguf", to="gguf", tokenizer=False, progress=False)
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


@pytest.mark.needs("gguf")
@pytest.mark.filterwarnings("ignore:GGUF output without tokenizer metadata")
def test_gguf_q_rows_that_cannot_be_permuted(tmp_path: Path) -> None:
    """A LLaMA q projection whose rows do not split into heads of two halves: refused while planning (it was found
    while writing), the file and tensor named."""
    (tmp_path / "m").mkdir()
    q = np.ones((12, 256), np.float32)
    name = "model.layers.0.self_attn.q_proj.weight"
    header = {name: {"dtype": "F32", "shape": [12, 256], "data_offsets": [0, q.nbytes]}}
    f = _raw_safetensors(tmp_path / "m" / "model.safetensors", header, q.tobytes())
    (tmp_path / "m" / "config.json").write_text(json.dumps(config()))
    want = re.escape(f"{f}: tensor {name!r} of shape [12, 256]: its 12 rows do not split into 4 heads of two equal")
    with pytest.raises(ValueError, match=want):
        convert_checkpoint(f, tmp_path / "o.gguf", to="gguf", tokenizer=False, progress=False)
    with pytest.raises(ValueError, match=want):
        convert_checkpoint(f, to="gguf", tokenizer=False, dry_run=True)
    _only_input(tmp_path)
