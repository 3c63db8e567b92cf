"""CPU features and the thread setting."""

from __future__ import annotations

import ctypes
import json
from typing import Any

from . import _lib
from ._arrays import check_int, fits_int64

ENV_THREADS = "BITNET_GO_NUM_THREADS"
ENV_DISABLE = "BITNET_GO_DISABLE"


def cpu_features() -> dict[str, Any]:
    """What the CPU offers (cpuid/v2) and which kernel family dispatch picked.

    Keys: ``avx2``, ``fma``, ``avx512f``, ``avx512bw``, ``avx512vl``,
    ``avx512vnni``, ``avxvnni`` (bools), ``brand``, ``arch``, ``asm_built``,
    ``disabled`` (families switched off by ``BITNET_GO_DISABLE``, read at
    import), ``disable_ignored`` (names in it that are not families),
    ``family`` (the best family usable here: ``"avx512vnni"``, ``"avx512"``,
    ``"avx2"`` or ``"generic"``), ``kernels`` (the family each kernel uses:
    ``quantize_i2s``, ``conv_gemm``, ``conv_lut``), ``settings`` (how the
    numeric environment variables ``BITNET_GO_NUM_THREADS`` and
    ``BITNET_GO_WEIGHT_CACHE_MB`` were read: ``name``, ``value`` as set,
    ``in_effect``, and ``problem`` for a value that was refused, about which
    a ``RuntimeWarning`` is issued once when the library loads) and
    ``max_threads``.

    Example:
        >>> import bitnet_go
        >>> bitnet_go.cpu_features()["family"] in ("avx512vnni", "avx512", "avx2", "generic")
        True
    """
    return _lib.features()


def peak_rates() -> dict[str, Any]:
    """One core's peak rates for the instruction mix of each path's kernels.

    Measured now (about 30 ms, on the calling thread) with register-only
    loops of the family in use: keys ``f32`` and ``i8`` (G operations a
    second, a multiply-add counting 2; 0 with the generic kernels),
    ``f32_mix`` and ``i8_mix`` (the instructions timed) and ``family``.
    The benchmark reports its rates as fractions of these.

    Example:
        >>> from bitnet_go._runtime import peak_rates
        >>> r = peak_rates()
        >>> r["i8"] >= 0 and r["f32"] >= 0
        True
    """
    buf = ctypes.create_string_buffer(1024)
    _lib.call("bng_peak", buf, len(buf))
    return json.loads(buf.value.decode())


def set_num_threads(n: int) -> None:
    """Set how many threads the kernels use (1 to ``cpu_features()["max_threads"]``, 1024).

    The starting value is ``BITNET_GO_NUM_THREADS`` if set, else the number of
    CPUs.

    Example:
        >>> import bitnet_go
        >>> old = bitnet_go.get_num_threads()
        >>> bitnet_go.set_num_threads(1); bitnet_go.get_num_threads()
        1
        >>> bitnet_go.set_num_threads(old)
    """
    v = check_int(n, "n")
    if not fits_int64(v):  # cannot cross the C ABI; Go checks the rest
        raise ValueError(f"n (the number of threads) must be in [1, {cpu_features()['max_threads']}], got {v}")
    _lib.call("bng_set_num_threads", v)


def get_num_threads() -> int:
    """Return how many threads the kernels use.

    Example:
        >>> import bitnet_go
        >>> bitnet_go.get_num_threads() >= 1
        True
    """
    return _lib.get_num_threads_raw()
