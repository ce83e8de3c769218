"""Alignments: paths against a plain numpy traceback and tslearn, the value
against cdist, Soft-DTW's alignment as a gradient, and the plot helpers."""

import numpy as np
import pytest

import timewarp


def numpy_dtw_path(x, y):
    """Full-matrix DTW with squared costs and the crate's tie rule."""
    n, m = len(x), len(y)
    c = np.full((n + 1, m + 1), np.inf)
    c[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cost = float(np.sum((x[i - 1] - y[j - 1]) ** 2))
            c[i, j] = cost + min(c[i - 1, j - 1], c[i - 1, j], c[i, j - 1])
    path, (i, j) = [(n - 1, m - 1)], (n, m)
    while (i, j) != (1, 1):
        options = [(c[i - 1, j - 1], (i - 1, j - 1)), (c[i - 1, j], (i - 1, j)), (c[i, j - 1], (i, j - 1))]
        _, (i, j) = min(options, key=lambda t: t[0])  # min keeps the first of equals
        path.append((i - 1, j - 1))
    return np.array(path[::-1]), c[n, m]


@pytest.mark.parametrize("n,m,dims", [(1, 1, 1), (1, 5, 1), (7, 4, 2), (30, 41, 1)])
def test_dtw_path_matches_a_numpy_traceback(n, m, dims):
    rng = np.random.default_rng(n * 100 + m)
    x, y = rng.normal(size=(n, dims)), rng.normal(size=(m, dims))
    path, value = timewarp.dtw_path(x, y, device="cpu")
    expected_path, expected = numpy_dtw_path(x, y)
    assert path.dtype == np.int64 and path.shape[1] == 2
    np.testing.assert_array_equal(path, expected_path)
    assert value == pytest.approx(expected, rel=1e-12)
    d = timewarp.cdist(x[None], y[None], metric="dtw", device="cpu")
    assert value == pytest.approx(float(d[0, 0]), rel=1e-12)


def test_dtw_path_with_a_band_stays_inside():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=20), rng.normal(size=20)
    path, _ = timewarp.dtw_path(x, y, band=2, device="cpu")
    assert np.all(np.abs(path[:, 0] - path[:, 1]) <= 2)


def test_dtw_path_matches_tslearn():
    tslearn_metrics = pytest.importorskip("tslearn.metrics", reason="tslearn is not installed")
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(25, 1)), rng.normal(size=(31, 1))
    path, value = timewarp.dtw_path(x, y, device="cpu")
    their_path, their_distance = tslearn_metrics.dtw_path(x, y)
    np.testing.assert_array_equal(path, np.array(their_path))
    assert np.sqrt(value) == pytest.approx(their_distance, rel=1e-10)


def test_twed_path_costs_add_up_to_cdist():
    rng = np.random.default_rng(9)
    x, y = rng.normal(size=12), rng.normal(size=9)
    path, steps, costs, value = timewarp.twed_path(x, y, nu=0.01, lmbda=0.5, device="cpu")
    assert steps[0] == "match" and tuple(path[0]) == (0, 0) and tuple(path[-1]) == (11, 8)
    assert set(steps) <= {"match", "delete-x", "delete-y"}
    assert costs.sum() == pytest.approx(value, rel=1e-12)
    d = timewarp.cdist(x[None], y[None], metric="twed", nu=0.01, lmbda=0.5, device="cpu")
    assert value == pytest.approx(float(d[0, 0]), rel=1e-12)


def numpy_twed(x, y, x_times, y_times, nu, lmbda):
    """TWED's value (Euclidean norm) with a virtual sample 0 at time 0
    before each series, written out with numpy."""
    x, y = np.vstack([np.zeros(x.shape[1]), x]), np.vstack([np.zeros(y.shape[1]), y])
    tx, ty = np.concatenate([[0.0], x_times]), np.concatenate([[0.0], y_times])
    n, m = len(x) - 1, len(y) - 1
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            delete_x = np.linalg.norm(x[i] - x[i - 1]) + nu * (tx[i] - tx[i - 1]) + lmbda
            delete_y = np.linalg.norm(y[j] - y[j - 1]) + nu * (ty[j] - ty[j - 1]) + lmbda
            match = (
                np.linalg.norm(x[i] - y[j])
                + np.linalg.norm(x[i - 1] - y[j - 1])
                + nu * (abs(tx[i] - ty[j]) + abs(tx[i - 1] - ty[j - 1]))
            )
            d[i, j] = min(d[i - 1, j] + delete_x, d[i, j - 1] + delete_y, d[i - 1, j - 1] + match)
    return float(d[n, m])


@pytest.mark.parametrize("n,m,dims", [(1, 1, 1), (2, 7, 1), (15, 11, 2)])
def test_twed_path_takes_timestamps(n, m, dims):
    rng = np.random.default_rng(n * 10 + m)
    x, y = rng.normal(size=(n, dims)), rng.normal(size=(m, dims))
    x_times = np.cumsum(rng.uniform(0.0, 3.0, size=n)) - 2.0
    y_times = list(np.cumsum(rng.uniform(0.0, 3.0, size=m)))
    path, steps, costs, value = timewarp.twed_path(
        x, y, nu=0.3, lmbda=0.5, device="cpu", x_times=x_times, y_times=y_times
    )
    assert value == pytest.approx(numpy_twed(x, y, x_times, np.array(y_times), 0.3, 0.5), rel=1e-12)
    assert costs.sum() == pytest.approx(value, rel=1e-12)
    assert steps[0] == "match" and tuple(path[0]) == (0, 0) and tuple(path[-1]) == (n - 1, m - 1)
    # The default timestamps are 0, 1, 2, ...
    default = timewarp.twed_path(x, y, nu=0.3, lmbda=0.5, device="cpu")
    explicit = timewarp.twed_path(
        x, y, nu=0.3, lmbda=0.5, device="cpu", x_times=np.arange(n), y_times=np.arange(m)
    )
    assert default[3] == explicit[3]
    np.testing.assert_array_equal(default[0], explicit[0])
    assert default[3] == pytest.approx(numpy_twed(x, y, np.arange(n), np.arange(m), 0.3, 0.5), rel=1e-12)


def test_bad_timestamps_are_timewarp_errors():
    x = np.zeros(4)
    for times, message in [
        (np.arange(3.0), "3 values for a series of 4"),
        (np.array([0.0, 1.0, np.nan, 3.0]), "timestamp 2 of x is NaN"),
        (np.array([0.0, 2.0, 1.0, 3.0]), "non-decreasing"),
        (np.zeros((4, 1)), "x_times"),
    ]:
        with pytest.raises(timewarp.TimewarpError, match=message):
            timewarp.twed_path(x, x, device="cpu", x_times=times)
    with pytest.raises(timewarp.TimewarpError, match="timestamp 0 of y is inf"):
        timewarp.twed_path(x, x, device="cpu", y_times=[np.inf, 1.0, 2.0, 3.0])


def test_soft_dtw_alignment_is_the_gradient_of_the_value():
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=(6, 1)), rng.normal(size=(5, 1))
    e, value = timewarp.soft_dtw_alignment(x, y, gamma=0.5, device="cpu")
    assert e.shape == (6, 5)
    # dV/dx_i = sum_j E_ij 2 (x_i - y_j): against the library's gradient.
    gradient = np.sum(e[:, :, None] * 2 * (x[:, None, :] - y[None, :, :]), axis=1)
    value_again, expected, _ = timewarp.soft_dtw_gradient(x[None], y[None], gamma=0.5, device="cpu")
    np.testing.assert_allclose(gradient, np.asarray(expected)[0], rtol=1e-9, atol=1e-12)
    assert value == pytest.approx(float(np.asarray(value_again).ravel()[0]), rel=1e-12)


def test_bad_input_is_a_timewarp_error():
    with pytest.raises(timewarp.TimewarpError):
        timewarp.dtw_path(np.zeros((3, 1)), np.zeros((3, 2)), device="cpu")
    with pytest.raises(timewarp.TimewarpError):
        timewarp.dtw_path(np.zeros((0,)), np.zeros(3), device="cpu")
    with pytest.raises(timewarp.TimewarpError, match="MiB"):
        timewarp.soft_dtw_alignment(np.zeros(20000), np.zeros(20000), device="cpu")


def test_plots(tmp_path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: the plot helpers are not tested")
        pytest.skip("matplotlib is not installed")
    matplotlib.use("Agg")
    from timewarp import plot

    rng = np.random.default_rng(13)
    x, y = rng.normal(size=30), rng.normal(size=25)
    path, _ = timewarp.dtw_path(x, y, device="cpu")
    ax = plot.plot_alignment(x, y, path)
    ax.figure.savefig(tmp_path / "alignment.png")
    d = timewarp.cdist(rng.normal(size=(6, 10)), metric="dtw", device="cpu")
    ax = plot.plot_matrix(d, labels=[1, 2, 1, 2, 1, 2])
    ax.figure.savefig(tmp_path / "matrix.png")
    assert (tmp_path / "alignment.png").stat().st_size > 0
    assert (tmp_path / "matrix.png").stat().st_size > 0


def test_plot_alignment_draws_an_expected_alignment_and_rejects_bad_paths():
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: the plot helpers are not tested")
        pytest.skip("matplotlib is not installed")
    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection

    from timewarp import plot

    rng = np.random.default_rng(17)
    x, y = rng.normal(size=12), rng.normal(size=9)

    def lines(ax):
        (collection,) = [c for c in ax.collections if isinstance(c, LineCollection)]
        return collection

    # A path: one opaque line a cell.
    path, _ = timewarp.dtw_path(x, y, device="cpu")
    drawn = lines(plot.plot_alignment(x, y, path))
    assert len(drawn.get_segments()) == len(path)
    assert (drawn.get_colors()[:, 3] == 1).all()
    # An expected alignment: a line a cell of weight >= 1% of the heaviest,
    # as opaque as its share.
    e, _ = timewarp.soft_dtw_alignment(x, y, gamma=0.1, device="cpu")
    drawn = lines(plot.plot_alignment(x, y, e))
    share = e / e.max()
    heavy = share >= 0.01
    assert 0 < heavy.sum() < e.size
    assert len(drawn.get_segments()) == heavy.sum()
    np.testing.assert_allclose(np.sort(drawn.get_colors()[:, 3]), np.sort(share[heavy]))
    for bad, match in [
        (np.zeros((4, 3), dtype=np.int64), "shape"),
        (np.array([[0, 0], [12, 8]]), "outside"),
        (np.array([[0, 0], [-1, 0]]), "outside"),
        (np.array([[0.5, 0.0]]), "whole"),
        (np.full((12, 9), np.nan), "finite"),
        (-e, "finite weights >= 0"),
        (np.zeros(5), "shape"),
        ([["a", "b"]], "shape"),
    ]:
        with pytest.raises(ValueError, match=match):
            plot.plot_alignment(x, y, bad)
    with pytest.raises(ValueError, match="x"):
        plot.plot_alignment(np.zeros(0), y, path)
