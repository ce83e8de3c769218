"""timewarp against its peers, tslearn and aeon: every expected value is
computed by the peer inside the test (nothing produced by timewarp is
hard-coded), in float64, to a relative 1e-10.

The conventions these tests pin down (docs: "Conventions against tslearn
and aeon"):

* DTW: timewarp's value is the sum of squared differences along the best
  path; tslearn's `dtw`/`cdist_dtw` return its square root, aeon's
  `dtw_distance` the sum itself.
* Band: timewarp's ``band=r`` is tslearn's
  ``global_constraint="sakoe_chiba", sakoe_chiba_radius=r`` for every pair of
  lengths (0-based samples i of n, j of m meet iff
  ``i - r - max(0, n - m) <= j <= i + r + max(0, m - n)``). aeon's
  ``window=w`` is ``band=int(w * n)`` for two series of the same length n
  (the float product truncated); for unequal lengths aeon's band follows
  the interpolated diagonal and is in general no timewarp band, so unequal
  lengths are compared with aeon only without a window, or where aeon's
  mask happens to be one of ours.
* TWE: aeon pads each series with a leading 0 sample and uses the sample
  indices as timestamps, the Euclidean distance between samples (across
  channels) and a constant ``nu + lmbda`` per deletion. That is timewarp's
  virtual origin (a 0 sample at time 0 before each series) with default
  timestamps 0, 1, 2, ... and ``degree=2``: the same numbers with the same
  ``nu`` and ``lmbda``, no padding needed on our side.
* Soft-DTW: the same gamma everywhere. aeon's `soft_dtw_distance` returns
  ``abs(value)`` and returns the DTW value (0) when both series are
  identical; tslearn returns the signed value. tslearn's
  `SoftDTWLossPyTorch` rounds its matrices through `torch.Tensor` (float32)
  unless torch's default dtype is float64, so it is run under that default.
* aeon takes series as ``(n_channels, n_timepoints)``: our ``(length, dims)``
  transposed.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from numpy.testing import assert_allclose

import timewarp

RTOL = 1e-10
CPU = {"device": "cpu"}


# ---------------------------------------------------------------------------
# Peers: imported per test, so that a missing one skips with its reason.


def _tslearn_metrics():
    pytest.importorskip("tslearn")
    return pytest.importorskip("tslearn.metrics")


def _tslearn_dataset(series):
    """A ragged list as tslearn wants it: one array padded with NaN."""
    utils = pytest.importorskip("tslearn.utils")
    return utils.to_time_series_dataset(series)


def _aeon_distances():
    pytest.importorskip("aeon")
    return pytest.importorskip("aeon.distances")


def _torch():
    return pytest.importorskip("torch")


# ---------------------------------------------------------------------------
# Data and helpers.


def _walk(rng, length, dims=None):
    """A random walk (warping matters on these), (length,) or (length, dims)."""
    shape = (length,) if dims is None else (length, dims)
    return rng.normal(size=shape).cumsum(axis=0)


def _ragged(rng, lengths, dims=None):
    return [_walk(rng, n, dims) for n in lengths]


def _aeon_series(x):
    """One of our series, (length,) or (length, dims), in aeon's layout."""
    x = np.asarray(x, dtype=np.float64)
    return x if x.ndim == 1 else np.ascontiguousarray(x.T)


def _aeon_batch(batch):
    """One of our batches in aeon's layout: (n, length, dims) ->
    (n, dims, length); a list of series -> a list of aeon series."""
    if isinstance(batch, list):
        return [_aeon_series(x) for x in batch]
    batch = np.asarray(batch, dtype=np.float64)
    return batch if batch.ndim == 2 else np.ascontiguousarray(batch.transpose(0, 2, 1))


def _band_mask(n, m, radius):
    """timewarp's Sakoe-Chiba band as documented (host/metric.rs,
    `Dtw::with_band`): 0-based sample i of n meets j of m iff
    i - r - max(0, n - m) <= j <= i + r + max(0, m - n)."""
    i = np.arange(n)[:, None]
    j = np.arange(m)[None, :]
    return (i - radius - max(0, n - m) <= j) & (j <= i + radius + max(0, m - n))


def _close(actual, expected, scale_atol=0.0):
    """rtol 1e-10; `scale_atol` > 0 adds an absolute tolerance of that
    fraction of the largest expected magnitude, for quantities that can be
    ~0 by cancellation (Soft-DTW values, which change sign, and gradients)."""
    expected = np.asarray(expected, dtype=np.float64)
    atol = scale_atol * float(np.max(np.abs(expected))) if expected.size else 0.0
    assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=RTOL, atol=atol)


# Soft-DTW values are sums of O(length) terms of size O(1..100) and cross 0;
# gradient entries are sums of terms of both signs. An absolute tolerance of
# 1e-12 of the largest magnitude (~1e4 ulps) only absorbs rounding near 0 and
# is far below any difference of convention.
NEAR_ZERO = 1e-12


# ---------------------------------------------------------------------------
# tslearn: DTW


CDIST_CASES = {
    "univariate": lambda rng: (
        rng.normal(size=(6, 20)).cumsum(1),
        rng.normal(size=(4, 20)).cumsum(1),
    ),
    "multivariate": lambda rng: (
        rng.normal(size=(5, 17, 3)).cumsum(1),
        rng.normal(size=(3, 17, 3)).cumsum(1),
    ),
    "ragged univariate": lambda rng: (_ragged(rng, [1, 4, 9, 16, 23]), _ragged(rng, [7, 1, 12])),
    "ragged multivariate": lambda rng: (_ragged(rng, [1, 2, 7, 12], 2), _ragged(rng, [5, 1, 9], 2)),
}


def _tslearn_input(batch):
    return _tslearn_dataset(batch) if isinstance(batch, list) else batch


@pytest.mark.parametrize("case", sorted(CDIST_CASES))
@pytest.mark.parametrize("radius", [None, 0, 2])
def test_tslearn_cdist_dtw_is_the_square_root_of_ours(case, radius):
    metrics = _tslearn_metrics()
    a, b = CDIST_CASES[case](np.random.default_rng(11))
    band = (
        {} if radius is None else {"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": radius}
    )
    ta, tb = _tslearn_input(a), _tslearn_input(b)

    cross = metrics.cdist_dtw(ta, tb, **band)
    _close(np.sqrt(timewarp.cdist(a, b, band=radius, **CPU)), cross)
    # Squaring tslearn's value instead gives the same numbers.
    _close(timewarp.cdist(a, b, band=radius, **CPU), cross**2)

    within = metrics.cdist_dtw(ta, **band)
    _close(np.sqrt(timewarp.cdist(a, band=radius, **CPU)), within)


def test_tslearn_sakoe_chiba_mask_is_our_band_for_all_lengths():
    """tslearn's `sakoe_chiba_mask(n, m, r)` is exactly timewarp's band of
    radius r, for equal and unequal lengths (both widen the band by the
    length difference on the side of the longer series)."""
    metrics = _tslearn_metrics()
    for n in range(1, 13):
        for m in range(1, 13):
            for radius in range(7):
                got = np.asarray(metrics.sakoe_chiba_mask(n, m, radius=radius), dtype=bool)
                np.testing.assert_array_equal(
                    got, _band_mask(n, m, radius), err_msg=f"{n}x{m} r={radius}"
                )


@pytest.mark.parametrize(
    "n, m, dims",
    [
        (15, 15, None),
        (10, 17, None),
        (17, 10, 2),
        (12, 12, 3),
        (1, 8, None),
        (8, 1, 2),
        (1, 1, None),
        (2, 3, None),
    ],
)
def test_tslearn_dtw_sakoe_chiba_radius_is_band(n, m, dims):
    metrics = _tslearn_metrics()
    rng = np.random.default_rng(100 * n + m)
    x, y = _walk(rng, n, dims), _walk(rng, m, dims)
    expected = []
    for radius in [None] + list(range(max(n, m) + 2)):
        band = (
            {}
            if radius is None
            else {"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": radius}
        )
        ref = metrics.dtw(x, y, **band)
        _close(timewarp.distance(x, y, band=radius, **CPU), ref**2)
        _close(timewarp.distance(y, x, band=radius, **CPU), ref**2)
        expected.append(ref)
    if n == m > 2:
        # Not vacuous: the band changes tslearn's value on these inputs.
        assert len(set(np.round(expected, 9))) > 1


# ---------------------------------------------------------------------------
# tslearn: Soft-DTW


SOFT_PAIRS = [
    ("equal univariate", 14, 14, None),
    ("unequal univariate", 9, 16, None),
    ("equal multivariate", 11, 11, 3),
    ("unequal multivariate", 13, 6, 2),
    ("length 1 vs 1", 1, 1, None),
    ("length 1 vs 7", 1, 7, 2),
    ("length 7 vs 1", 7, 1, None),
]


@pytest.mark.parametrize("gamma", [0.01, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("name, n, m, dims", SOFT_PAIRS, ids=[p[0] for p in SOFT_PAIRS])
def test_tslearn_soft_dtw_pairs(name, n, m, dims, gamma):
    metrics = _tslearn_metrics()
    rng = np.random.default_rng(7 * n + m)
    x, y = _walk(rng, n, dims), _walk(rng, m, dims)
    for radius in [None, 0, 2]:
        band = (
            {}
            if radius is None
            else {"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": radius}
        )
        ref = metrics.soft_dtw(x, y, gamma=gamma, **band)
        _close(
            timewarp.distance(x, y, metric="soft_dtw", gamma=gamma, band=radius, **CPU),
            ref,
            NEAR_ZERO,
        )
        _close(timewarp.soft_dtw([x], [y], gamma=gamma, band=radius, **CPU), [ref], NEAR_ZERO)
    # (The divergence, tslearn's "normalized" Soft-DTW, is compared through
    # `cdist_soft_dtw_normalized` below: each tslearn function costs a
    # numba compilation per test run.)


@pytest.mark.parametrize("case", sorted(CDIST_CASES))
@pytest.mark.parametrize("radius", [None, 1])
def test_tslearn_cdist_soft_dtw(case, radius):
    metrics = _tslearn_metrics()
    a, b = CDIST_CASES[case](np.random.default_rng(23))
    band = (
        {} if radius is None else {"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": radius}
    )
    ta, tb = _tslearn_input(a), _tslearn_input(b)
    gamma = 0.5
    ours = dict(metric="soft_dtw", gamma=gamma, band=radius, **CPU)

    _close(
        timewarp.cdist(a, b, **ours), metrics.cdist_soft_dtw(ta, tb, gamma=gamma, **band), NEAR_ZERO
    )
    # Within one set, the diagonal is sdtw(x, x) (negative) in both.
    _close(timewarp.cdist(a, **ours), metrics.cdist_soft_dtw(ta, gamma=gamma, **band), NEAR_ZERO)
    # tslearn's "normalized" Soft-DTW is our normalize=True (the divergence).
    _close(
        timewarp.cdist(a, b, normalize=True, **ours),
        metrics.cdist_soft_dtw_normalized(ta, tb, gamma=gamma, **band),
        NEAR_ZERO,
    )
    _close(
        timewarp.cdist(a, normalize=True, **ours),
        metrics.cdist_soft_dtw_normalized(ta, gamma=gamma, **band),
        NEAR_ZERO,
    )


def _tslearn_soft_dtw_and_gradients(metrics, x, y, gamma):
    """tslearn's value and gradients of sdtw(x, y): `SoftDTW` on the squared
    Euclidean cost matrix, its gradient in the cost matrix, chained through
    `SquaredEuclidean.jacobian_product`; for y, the same with the roles
    swapped (sdtw is symmetric)."""
    x2 = x.reshape(len(x), -1)
    y2 = y.reshape(len(y), -1)
    sdtw = metrics.SoftDTW(metrics.SquaredEuclidean(x2, y2).compute(), gamma=gamma)
    value = sdtw.compute()
    grad_x = metrics.SquaredEuclidean(x2, y2).jacobian_product(sdtw.grad())
    sdtw_t = metrics.SoftDTW(metrics.SquaredEuclidean(y2, x2).compute(), gamma=gamma)
    sdtw_t.compute()
    grad_y = metrics.SquaredEuclidean(y2, x2).jacobian_product(sdtw_t.grad())
    return value, grad_x.reshape(x.shape), grad_y.reshape(y.shape)


@pytest.mark.parametrize("gamma", [0.1, 1.0])
def test_tslearn_soft_dtw_gradient_numpy(gamma):
    metrics = _tslearn_metrics()
    rng = np.random.default_rng(5)
    # Lists of pairs of any lengths (gradients come back shaped like each
    # series), univariate and multivariate, then an equal-length
    # (batch, length, dims) array.
    lists = [
        (
            [_walk(rng, 12), _walk(rng, 1), _walk(rng, 8)],
            [_walk(rng, 12), _walk(rng, 5), _walk(rng, 1)],
        ),
        (
            [_walk(rng, 9, 2), _walk(rng, 6, 2), _walk(rng, 1, 2)],
            [_walk(rng, 14, 2), _walk(rng, 1, 2), _walk(rng, 4, 2)],
        ),
    ]
    for xs, ys in lists:
        values, grad_x, grad_y = timewarp.soft_dtw_gradient(xs, ys, gamma=gamma, **CPU)
        for k, (x, y) in enumerate(zip(xs, ys)):
            value, gx, gy = _tslearn_soft_dtw_and_gradients(metrics, x, y, gamma)
            _close(values[k], value, NEAR_ZERO)
            assert grad_x[k].shape == x.shape and grad_y[k].shape == y.shape
            _close(grad_x[k], gx, NEAR_ZERO)
            _close(grad_y[k], gy, NEAR_ZERO)

    xb = rng.normal(size=(3, 10, 2)).cumsum(1)
    yb = rng.normal(size=(3, 7, 2)).cumsum(1)
    values, grad_x, grad_y = timewarp.soft_dtw_gradient(xb, yb, gamma=gamma, **CPU)
    assert grad_x.shape == xb.shape and grad_y.shape == yb.shape
    for k in range(len(xb)):
        value, gx, gy = _tslearn_soft_dtw_and_gradients(metrics, xb[k], yb[k], gamma)
        _close(values[k], value, NEAR_ZERO)
        _close(grad_x[k], gx, NEAR_ZERO)
        _close(grad_y[k], gy, NEAR_ZERO)


@contextlib.contextmanager
def _torch_default_float64(torch):
    """tslearn's `_SoftDTWLossPyTorch` builds R and its gradient E with
    `torch.Tensor(numpy_array)`, which casts to torch's default dtype
    (float32 unless changed): values ~1e-8 and gradients ~1e-6 off the
    float64 result. Under a float64 default it is float64 throughout."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


TORCH_CASES = [
    # batch, len x, len y, dims (None: 2-D (batch, length) for timewarp), gamma, normalize, band
    (3, 12, 12, None, 1.0, False, None),
    (4, 9, 6, 2, 0.7, False, None),
    (2, 1, 5, 3, 0.1, False, None),
    (2, 5, 1, 1, 0.3, False, None),
    (3, 10, 10, 1, 0.5, True, None),
    (3, 9, 6, 2, 0.7, True, 1),
    (2, 8, 8, None, 2.0, False, 0),
]


@pytest.mark.parametrize("batch, nx, ny, dims, gamma, normalize, band", TORCH_CASES)
def test_tslearn_soft_dtw_loss_pytorch(batch, nx, ny, dims, gamma, normalize, band):
    torch = _torch()
    metrics = _tslearn_metrics()
    rng = np.random.default_rng(31 * nx + ny)
    x_np = rng.normal(size=(batch, nx, dims or 1)).cumsum(1)
    y_np = rng.normal(size=(batch, ny, dims or 1)).cumsum(1)
    # A different weight per pair: the backward pass must scale each
    # pair's gradient by its incoming gradient.
    weights = np.arange(1.0, batch + 1.0)
    constraint = (
        {} if band is None else {"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": band}
    )

    with _torch_default_float64(torch):
        x = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
        y = torch.tensor(y_np, dtype=torch.float64, requires_grad=True)
        loss = metrics.SoftDTWLossPyTorch(gamma=gamma, normalize=normalize, **constraint)(x, y)
        (loss * torch.tensor(weights)).sum().backward()
        ref = loss.detach().numpy().copy(), x.grad.numpy().copy(), y.grad.numpy().copy()

    squeeze = dims is None
    x = torch.tensor(x_np[..., 0] if squeeze else x_np, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(y_np[..., 0] if squeeze else y_np, dtype=torch.float64, requires_grad=True)
    values = timewarp.soft_dtw(x, y, gamma=gamma, band=band, normalize=normalize, **CPU)
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float64
    (values * torch.tensor(weights, dtype=torch.float64)).sum().backward()

    _close(values.detach().numpy(), ref[0], NEAR_ZERO)
    grad_x, grad_y = x.grad.numpy(), y.grad.numpy()
    if squeeze:
        grad_x, grad_y = grad_x[..., None], grad_y[..., None]
    _close(grad_x, ref[1], NEAR_ZERO)
    _close(grad_y, ref[2], NEAR_ZERO)


# ---------------------------------------------------------------------------
# aeon: DTW and its window


AEON_PAIRS = [
    ("equal univariate", 20, 20, None),
    ("equal multivariate", 15, 15, 3),
    ("unequal univariate", 8, 19, None),
    ("unequal multivariate", 16, 7, 2),
    ("length 1 vs 1", 1, 1, None),
    ("length 1 vs 6", 1, 6, 2),
    ("length 6 vs 1", 6, 1, None),
]


@pytest.mark.parametrize("name, n, m, dims", AEON_PAIRS, ids=[p[0] for p in AEON_PAIRS])
def test_aeon_dtw_distance(name, n, m, dims):
    distances = _aeon_distances()
    rng = np.random.default_rng(3 * n + m)
    x, y = _walk(rng, n, dims), _walk(rng, m, dims)
    # aeon's DTW is the sum of squares too: no square root on either side.
    ref = distances.dtw_distance(_aeon_series(x), _aeon_series(y))
    _close(timewarp.distance(x, y, **CPU), ref)


AEON_BATCHES = {
    "univariate": lambda rng: (
        rng.normal(size=(6, 20)).cumsum(1),
        rng.normal(size=(4, 20)).cumsum(1),
    ),
    "multivariate": lambda rng: (
        rng.normal(size=(5, 18, 3)).cumsum(1),
        rng.normal(size=(3, 18, 3)).cumsum(1),
    ),
    "ragged univariate": lambda rng: (_ragged(rng, [1, 5, 11, 20]), _ragged(rng, [9, 1, 14])),
    "ragged multivariate": lambda rng: (
        _ragged(rng, [1, 3, 8, 13], 2),
        _ragged(rng, [6, 1, 10], 2),
    ),
}


@pytest.mark.parametrize("case", sorted(AEON_BATCHES))
def test_aeon_pairwise_dtw_and_twe(case):
    distances = _aeon_distances()
    a, b = AEON_BATCHES[case](np.random.default_rng(17))
    xa, xb = _aeon_batch(a), _aeon_batch(b)
    _close(timewarp.cdist(a, b, **CPU), distances.dtw_pairwise_distance(xa, xb))
    _close(timewarp.cdist(a, **CPU), distances.dtw_pairwise_distance(xa))
    twed = dict(metric="twed", nu=0.01, lmbda=0.5, **CPU)
    _close(
        timewarp.cdist(a, b, **twed), distances.twe_pairwise_distance(xa, xb, nu=0.01, lmbda=0.5)
    )
    _close(timewarp.cdist(a, **twed), distances.twe_pairwise_distance(xa, nu=0.01, lmbda=0.5))


WINDOWS = [0.0, 0.05, 0.1, 0.25, 0.29, 0.5, 0.999, 1.0]


def _aeon_radius(window, length):
    """aeon's Sakoe-Chiba half-width for two series of the same length:
    `int(window * length)`, the float product truncated (0.29 * 100 is
    28.999999999999996, so radius 28)."""
    return int(window * length)


def test_aeon_window_is_int_window_times_length_for_equal_lengths():
    distances = _aeon_distances()
    for n in [1, 2, 7, 24, 100]:
        for window in WINDOWS + [0.3, 0.7, 0.33]:
            got = np.asarray(distances.create_bounding_matrix(n, n, window), dtype=bool)
            np.testing.assert_array_equal(
                got, _band_mask(n, n, _aeon_radius(window, n)), err_msg=f"n={n} w={window}"
            )
    # The truncation is of the float product, not of the exact fraction.
    assert _aeon_radius(0.29, 100) == 28
    assert not np.array_equal(
        distances.create_bounding_matrix(100, 100, 0.29), _band_mask(100, 100, 29)
    )


@pytest.mark.parametrize("n, dims", [(24, None), (100, 2), (7, None), (1, 3)])
def test_aeon_dtw_and_soft_dtw_window_is_band(n, dims):
    distances = _aeon_distances()
    rng = np.random.default_rng(n)
    x, y = _walk(rng, n, dims), _walk(rng, n, dims)
    ax, ay = _aeon_series(x), _aeon_series(y)
    for window in WINDOWS:
        band = _aeon_radius(window, n)
        _close(
            timewarp.distance(x, y, band=band, **CPU), distances.dtw_distance(ax, ay, window=window)
        )
        ref = distances.soft_dtw_distance(ax, ay, gamma=0.5, window=window)
        ours = timewarp.distance(x, y, metric="soft_dtw", gamma=0.5, band=band, **CPU)
        _close(abs(ours), ref, NEAR_ZERO)


def test_aeon_window_for_unequal_lengths_is_not_a_band():
    """For unequal lengths aeon's window is a band of half-width
    int(window * min(n, m)) around the interpolated diagonal j ~ i * m / n,
    not timewarp's (tslearn's) band widened by the length difference; in
    general no radius reproduces it. Example: 6 vs 9 samples, window 0."""
    distances = _aeon_distances()
    aeon_mask = np.asarray(distances.create_bounding_matrix(6, 9, 0.0), dtype=bool)
    assert not any(np.array_equal(aeon_mask, _band_mask(6, 9, r)) for r in range(10))

    # Where aeon's mask happens to be one of ours, the values agree.
    rng = np.random.default_rng(99)
    compared = 0
    for n, m in [(3, 4), (4, 6), (5, 7), (6, 10), (8, 6), (9, 13), (12, 9)]:
        x, y = _walk(rng, n), _walk(rng, m, None)
        for window in [0.1, 0.3, 0.5, 0.7, 0.9]:
            aeon_mask = np.asarray(distances.create_bounding_matrix(n, m, window), dtype=bool)
            radii = [
                r for r in range(max(n, m) + 1) if np.array_equal(aeon_mask, _band_mask(n, m, r))
            ]
            if not radii:
                continue
            compared += 1
            _close(
                timewarp.distance(x, y, band=radii[0], **CPU),
                distances.dtw_distance(x, y, window=window),
            )
    assert compared >= 5


# ---------------------------------------------------------------------------
# aeon: TWE


@pytest.mark.parametrize("name, n, m, dims", AEON_PAIRS, ids=[p[0] for p in AEON_PAIRS])
def test_aeon_twe_distance(name, n, m, dims):
    """aeon pads each series with a leading 0 and uses the sample index as
    the timestamp: our virtual origin and default timestamps, so the series
    go in as they are. The distance between samples is the Euclidean norm
    across channels: our degree=2; for univariate series every Lp norm is
    |a - b|, so every degree agrees."""
    distances = _aeon_distances()
    rng = np.random.default_rng(5 * n + m)
    x, y = _walk(rng, n, dims), _walk(rng, m, dims)
    ax, ay = _aeon_series(x), _aeon_series(y)
    degrees = [1.0, 2.0, 3.0] if dims is None else [2.0]
    for nu in [0.0, 0.001, 0.5]:
        for lmbda in [0.0, 1.0, 2.5]:
            ref = distances.twe_distance(ax, ay, nu=nu, lmbda=lmbda)
            for degree in degrees:
                ours = timewarp.distance(
                    x, y, metric="twed", nu=nu, lmbda=lmbda, degree=degree, **CPU
                )
                _close(ours, ref)
    # Defaults agree too (nu=0.001, lmbda=1, degree=2).
    _close(timewarp.distance(x, y, metric="twed", **CPU), distances.twe_distance(ax, ay))


# ---------------------------------------------------------------------------
# aeon: Soft-DTW


@pytest.mark.parametrize("name, n, m, dims", AEON_PAIRS, ids=[p[0] for p in AEON_PAIRS])
def test_aeon_soft_dtw_is_abs_of_ours(name, n, m, dims):
    distances = _aeon_distances()
    rng = np.random.default_rng(9 * n + m)
    x, y = _walk(rng, n, dims), _walk(rng, m, dims)
    ax, ay = _aeon_series(x), _aeon_series(y)
    signs = []
    for gamma in [0.01, 0.1, 1.0, 10.0, 100.0]:
        ours = timewarp.distance(x, y, metric="soft_dtw", gamma=gamma, **CPU)
        _close(abs(ours), distances.soft_dtw_distance(ax, ay, gamma=gamma), NEAR_ZERO)
        signs.append(np.sign(ours))
    if min(n, m) > 1:
        # Not vacuous: with a large gamma Soft-DTW is negative, so the abs
        # matters. (With a length-1 series there is one path, no smoothing.)
        assert min(signs) < 0 < max(signs)


def test_aeon_soft_dtw_of_identical_series_is_dtw():
    """aeon returns the DTW value (0) when both series are equal
    (`np.array_equal(x, y)`), where Soft-DTW itself (ours, tslearn's) is
    negative; our divergence (normalize=True) is 0 there."""
    distances = _aeon_distances()
    x = _walk(np.random.default_rng(4), 12, 2)
    assert distances.soft_dtw_distance(_aeon_series(x), _aeon_series(x), gamma=1.0) == 0.0
    assert timewarp.distance(x, x, metric="soft_dtw", gamma=1.0, **CPU) < 0.0
    assert timewarp.distance(
        x, x, metric="soft_dtw", gamma=1.0, normalize=True, **CPU
    ) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("case", sorted(AEON_BATCHES))
def test_aeon_pairwise_soft_dtw(case):
    distances = _aeon_distances()
    a, b = AEON_BATCHES[case](np.random.default_rng(29))
    xa, xb = _aeon_batch(a), _aeon_batch(b)
    gamma = 0.5
    ours = dict(metric="soft_dtw", gamma=gamma, **CPU)
    _close(
        np.abs(timewarp.cdist(a, b, **ours)),
        distances.soft_dtw_pairwise_distance(xa, xb, gamma=gamma),
        NEAR_ZERO,
    )
    # Within one set aeon leaves the diagonal at 0 (see above).
    within = np.abs(timewarp.cdist(a, **ours))
    np.fill_diagonal(within, 0.0)
    _close(within, distances.soft_dtw_pairwise_distance(xa, gamma=gamma), NEAR_ZERO)


# ---------------------------------------------------------------------------
# aeon's own example data (shipped with the package, nothing downloaded)


def _aeon_dataset(name, count):
    datasets = pytest.importorskip("aeon.datasets")
    X, _ = getattr(datasets, name)(split="train")
    X = X[:count]
    # aeon: (n, channels, length) or a list of (channels, length); ours:
    # (n, length, channels) or a list of (length, channels).
    ours = (
        [np.ascontiguousarray(s.T) for s in X]
        if isinstance(X, list)
        else np.ascontiguousarray(X.transpose(0, 2, 1))
    )
    return X, ours


@pytest.mark.parametrize(
    "name, count",
    [("load_unit_test", 20), ("load_basic_motions", 10), ("load_japanese_vowels", 12)],
)
def test_aeon_example_data(name, count):
    distances = _aeon_distances()
    X, ours = _aeon_dataset(name, count)
    _close(timewarp.cdist(ours, **CPU), distances.dtw_pairwise_distance(X))
    _close(timewarp.cdist(ours, metric="twed", **CPU), distances.twe_pairwise_distance(X))
    twed = dict(nu=0.1, lmbda=2.0)
    _close(
        timewarp.cdist(ours, metric="twed", **twed, **CPU),
        distances.twe_pairwise_distance(X, **twed),
    )

    within = np.abs(timewarp.cdist(ours, metric="soft_dtw", gamma=1.0, **CPU))
    np.fill_diagonal(within, 0.0)
    _close(within, distances.soft_dtw_pairwise_distance(X, gamma=1.0), NEAR_ZERO)

    if not isinstance(X, list):
        # Equal lengths: window 0.1 is band int(0.1 * length).
        band = _aeon_radius(0.1, X.shape[-1])
        _close(
            timewarp.cdist(ours, band=band, **CPU), distances.dtw_pairwise_distance(X, window=0.1)
        )
