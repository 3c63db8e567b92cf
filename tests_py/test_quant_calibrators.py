"""The histogram calibrators against a NumPy reference of NVIDIA pytorch-quantization's
HistogramCalibrator algorithms, written here from their description: a histogram of |x|
whose bins keep the first batch's width and grow when a larger value arrives; percentile
= the left edge of the first bin where the CDF reaches p; entropy = for i from start_bin
to nbins, P = bins[:i] with the tail folded into P[i-1], Q = P merged into 2**(bits-1)
chunks (np.digitize of range(i) on linspace(0, i, 129)) and spread evenly over each
chunk's non-zero bins, KL(P || Q) (scipy's entropy: both normalised), the last argmin,
amax = edge i; MSE = candidates at bin centres from start_bin, the histogram-weighted
mean squared error of fake quantization (narrow range, round half to even), the first
argmin. Every case draws its data from the seed in its test id."""

from __future__ import annotations

import numpy as np
import pytest

from bitnet_go.quantization import EntropyCalibrator, MSECalibrator, PercentileCalibrator


def ref_percentile(counts: np.ndarray, width: float, p: float) -> float:
    cdf = np.cumsum(counts / counts.sum())
    return int(np.searchsorted(cdf, p / 100)) * width


def kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    m = p > 0
    if np.any(q[m] == 0):
        return float("inf")
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def ref_entropy(counts: np.ndarray, width: float, num_bits: int = 8, unsigned: bool = False,
                start_bin: int = 128) -> float:  # fmt: skip
    bins = counts.astype(np.float64)
    nq = 1 << (num_bits - 1 + int(unsigned))
    div, args = [], []
    for i in range(start_bin, len(bins) + 1):
        space = np.linspace(0, i, num=nq + 1)
        dig = np.digitize(np.arange(i), space) - 1
        dig[bins[:i] == 0] = -1
        sums = np.zeros(nq)
        cnt = np.zeros(nq)
        for j, d in enumerate(dig):
            if d != -1:
                sums[d] += bins[j]
                cnt[d] += 1
        q = np.zeros(i)
        nz = dig != -1
        q[nz] = sums[dig[nz]] / cnt[dig[nz]]
        p = bins[:i].copy()
        p[-1] += bins[i:].sum()
        div.append(kl(p, q))
        args.append(i)
    d = np.array(div)
    last = len(d) - 1 - int(np.argmin(d[::-1]))
    return args[last] * width


def ref_mse(counts: np.ndarray, width: float, num_bits: int = 8, unsigned: bool = False, start_bin: int = 128) -> float:
    edges = np.arange(len(counts) + 1) * width
    centers = (edges[1:] + edges[:-1]) / 2
    bound = (1 << (num_bits - 1 + int(unsigned))) - 1
    mses = []
    for i in range(start_bin, len(centers)):
        amax = centers[i]
        scale = bound / amax
        q = np.clip(np.round(centers * scale), -bound, bound) / scale
        mses.append(np.mean((q - centers) ** 2 * counts))
    return float(centers[start_bin + int(np.argmin(mses))])


def ref_counts(batches: list[np.ndarray], nbins: int) -> tuple[np.ndarray, float]:
    """The |x| histogram: width = max|first batch| / nbins (float32), bins appended at that width."""
    first = np.abs(batches[0]).max()
    width = np.float32(first / np.float32(nbins))
    counts = np.zeros(nbins, np.int64)
    for x in batches:
        a = np.abs(x.reshape(-1)).astype(np.float32)
        while np.float32(counts.size * width) < a.max():
            counts = np.append(counts, 0)
        hi = np.float32(counts.size * width)
        pos = ((a * np.float32(counts.size)) / hi).astype(np.float32).astype(np.int64)  # torch.histc's arithmetic
        pos[pos == counts.size] -= 1
        np.add.at(counts, pos[a <= hi], 1)
    return counts, float(width)


def data(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    out = []
    for i in range(n):
        x = rng.standard_normal(int(rng.integers(100, 3000))) * (1 + 0.3 * i)
        if rng.random() < 0.3:
            x = rng.laplace(size=x.size) * (1 + i)
        out.append(x.astype(np.float32))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_histogram_collection(seed: int) -> None:
    rng = np.random.default_rng([seed, 1])
    bs = data(rng, 5)
    cal = PercentileCalibrator(num_bins=int(rng.choice([2048, 300, 129])))
    for x in bs:
        cal.update(x)
    counts, width = ref_counts(bs, cal.num_bins)
    assert cal.bin_width == width
    assert np.array_equal(cal.counts, counts)


@pytest.mark.parametrize("seed", range(8))
def test_percentile(seed: int) -> None:
    rng = np.random.default_rng([seed, 2])
    p = float(rng.choice([99.99, 99.9, 99.0, 90.0, 50.0]))
    cal = PercentileCalibrator(p, num_bins=int(rng.choice([2048, 512])))
    for x in data(rng, 4):
        cal.update(x)
    assert cal.compute_amax() == ref_percentile(cal.counts, cal.bin_width, p)


@pytest.mark.parametrize("unsigned", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_entropy(seed: int, unsigned: bool) -> None:
    rng = np.random.default_rng([seed, 3])
    cal = EntropyCalibrator(num_bins=int(rng.choice([400, 700])), unsigned=unsigned)
    for x in data(rng, 3):
        cal.update(np.abs(x) if unsigned else x)
    assert cal.compute_amax() == pytest.approx(ref_entropy(cal.counts, cal.bin_width, unsigned=unsigned), rel=0)


@pytest.mark.parametrize("seed", range(6))
def test_mse(seed: int) -> None:
    rng = np.random.default_rng([seed, 4])
    cal = MSECalibrator(num_bins=int(rng.choice([2048, 600])))
    for x in data(rng, 3):
        cal.update(x)
    assert cal.compute_amax() == ref_mse(cal.counts, cal.bin_width)


@pytest.mark.parametrize("seed", range(3))
def test_merge_and_state(seed: int) -> None:
    rng = np.random.default_rng([seed, 5])
    bs = data(rng, 6)
    whole, a, b = (PercentileCalibrator(bin_width=0.01) for _ in range(3))
    for i, x in enumerate(bs):
        whole.update(x)
        (a if i % 2 else b).update(x)
    a.merge(b)
    assert np.array_equal(a.counts, whole.counts) and a.compute_amax() == whole.compute_amax()
    c = PercentileCalibrator()
    c.load_state_dict(PercentileCalibrator().state_dict())
    fresh = PercentileCalibrator(bin_width=0.01)
    fresh.load_state_dict(whole.state_dict())
    assert fresh.compute_amax() == whole.compute_amax()
    s, z = whole.calculate_qparams()
    assert s[0] == np.float32(whole.compute_amax()) / np.float32(127) and z[0] == 0
    with pytest.raises(ValueError, match="bin widths differ"):
        PercentileCalibrator(bin_width=0.5).merge(whole)


def test_zeros_and_empty() -> None:
    cal = MSECalibrator()
    assert cal.compute_amax() == 0.0 and cal.calculate_qparams()[0].tolist() == [1.0]
    cal.update(np.zeros(10, np.float32))
    assert cal.compute_amax() == 0.0
    cal.update(np.float32([1.0, -2.0]))
    assert cal.counts.sum() == 12


@pytest.mark.parametrize("cls", [PercentileCalibrator, EntropyCalibrator, MSECalibrator])
@pytest.mark.parametrize("seed", range(3))
def test_growth_stays_bounded(cls: type, seed: int) -> None:
    """A batch far past the first one's range doubles the bin width (pairs of bins summed) instead
    of appending bins without end (a million times the range once took gigabytes): at most
    MAX_BINS bins, no count lost, and the counts are the histogram of every value seen at the
    final width."""
    from bitnet_go.quantization._calibrators import MAX_BINS

    rng = np.random.default_rng(seed)
    num_bins = int(rng.choice([16 if cls is PercentileCalibrator else 200, 1000, 2048]))  # MSE/entropy: >= 129
    cal = cls(num_bins=num_bins)
    batches = [rng.standard_normal(1000).astype(np.float32) * f for f in (1.0, 1e3, 1e6, 1e9)]
    for b in batches:
        cal.update(b)
        assert cal.counts.size <= MAX_BINS
    a = np.abs(np.concatenate(batches))
    assert cal.counts.sum() == a.size
    w = cal.bin_width
    assert w > np.abs(batches[0]).max() / num_bins  # it doubled
    want = np.bincount(np.minimum((a / np.float32(w)).astype(np.int64), cal.counts.size - 1), minlength=cal.counts.size)
    # values within a float32 rounding of an edge may fall either side of it
    assert np.abs(np.cumsum(cal.counts - want)).max() <= max(2, a.size // 10000)
    if cls is PercentileCalibrator:  # the entropy and MSE searches are quadratic in the bins
        assert 0 < cal.compute_amax() <= cal.counts.size * w


def test_growth_past_the_limit_with_a_fixed_width_is_refused() -> None:
    cal = PercentileCalibrator(num_bins=16, bin_width=0.01)
    cal.update(np.float32([1.0, -2.0]))
    with pytest.raises(ValueError, match="give a larger bin_width"):
        cal.update(np.float32([1e6]))
    assert cal.counts.sum() == 2  # the refused batch left nothing behind
