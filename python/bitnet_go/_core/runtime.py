"""CPU features and the thread setting."""

from __future__ import annotations

from typing import TypedDict, cast

from . import lib
from .arrays import check_int, fits_int64


class _SettingFields(TypedDict):
    name: str
    value: str
    in_effect: int


class Setting(_SettingFields, total=False):
    """How one numeric environment variable was read (``cpu_features()["settings"]``).

    ``value`` is the variable as set (``""`` when unset), ``in_effect`` the
    value used; ``problem`` is present only when ``value`` was refused.
    """

    problem: str


class CPUID(TypedDict):
    """The CPU's identity (``cpu_features()["cpu_id"]``): vendor as cpuid/v2 names it, family and model numbers."""

    vendor: str
    family: int
    model: int


class CPUFeatures(TypedDict):
    """What :func:`cpu_features` returns (``bng_cpu_features``'s JSON, bindings/runtime.go).

    Example:
        >>> import bitnet_go
        >>> sorted(bitnet_go.cpu_features()) == sorted(bitnet_go.CPUFeatures.__annotations__)
        True
    """

    avx2: bool
    fma: bool
    avx512f: bool
    avx512bw: bool
    avx512vl: bool
    avx512vnni: bool
    avxvnni: bool
    brand: str
    arch: str
    asm_built: bool
    disabled: list[str]
    disable_ignored: list[str]
    family: str
    best_available: str
    kernels: dict[str, str]
    kernel_reasons: dict[str, str]
    kernel_families: dict[str, list[str]]
    cpu_kind: str
    cpu_id: CPUID
    dispatch: str
    dispatch_ignored: str
    go_version: str
    settings: list[Setting]
    max_threads: int


def cpu_features() -> CPUFeatures:
    """What the CPU offers (cpuid/v2) and which kernel family dispatch picked.

    Keys: ``avx2``, ``fma``, ``avx512f``, ``avx512bw``, ``avx512vl``,
    ``avx512vnni``, ``avxvnni`` (bools), ``brand``, ``arch``, ``asm_built``,
    ``disabled`` (families switched off by ``BITNET_GO_DISABLE``, read at
    import), ``disable_ignored`` (names in it that are not families),
    ``family`` (the best family a kernel picked: ``"avx512vnni"``, ``"avx512"``,
    ``"avx2"`` or ``"generic"``), ``best_available`` (the best family this
    CPU and build allow), ``go_version``, ``kernels`` (the family each kernel uses:
    ``quantize_i2s``, ``conv_gemm``, ``conv_i8``, ``conv_lut``, ``linear_gemv``, the
    ``quant_*`` ops),
    ``kernel_reasons`` (why dispatch chose each op's family),
    ``kernel_families`` (the families each op implements that may run here,
    generic first: what ``python -m bitnet_go bench families`` times),
    ``cpu_kind`` (the class of CPU the dispatch policy looks up, e.g.
    ``"amd-zen4"``, or ``"unknown"``), ``cpu_id`` (``vendor``, ``family``,
    ``model``), ``dispatch`` (the policy, from ``BITNET_GO_DISPATCH``:
    ``"measured"``, the default: each op's family measured fastest on this
    kind of CPU, and no AVX-512 family on a kind never measured; or
    ``"best-first"``: the best usable family, AVX-512 first),
    ``dispatch_ignored`` (a ``BITNET_GO_DISPATCH`` value that names no
    policy, else ``""``), ``settings`` (how the
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
    return cast(CPUFeatures, lib.features())


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
    lib.call("bng_set_num_threads", v)


def get_num_threads() -> int:
    """Return how many threads the kernels use.

    Example:
        >>> import bitnet_go
        >>> bitnet_go.get_num_threads() >= 1
        True
    """
    return lib.get_num_threads_raw()
