"""KNeighborsClassifier: the estimator API, and its predictions against a
brute-force k-NN over the reference distances."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import reference as ref

import timewarp
from timewarp import KNeighborsClassifier, TimewarpError

RNG = np.random.default_rng(7)
DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"


def brute_force(train, labels, queries, k, measure):
    distances = ref.matrix(queries, train, measure)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    votes = labels[order]
    classes = np.unique(labels)
    counts = np.stack([(votes == c).sum(axis=1) for c in classes], axis=1)
    return classes[np.argmax(counts, axis=1)]


@pytest.mark.parametrize("k", [1, 3])
def test_predictions_match_brute_force(k):
    train = [RNG.normal(size=(n, 2)) + (n % 3) for n in range(3, 23)]
    labels = np.array([n % 3 for n in range(3, 23)])
    queries = [RNG.normal(size=(n, 2)) + (n % 3) for n in (4, 9, 15, 20)]
    model = KNeighborsClassifier(n_neighbors=k, device="cpu").fit(train, labels)
    expected = brute_force(train, labels, queries, k, ref.dtw)
    np.testing.assert_array_equal(model.predict(queries), expected)
    proba = model.predict_proba(queries)
    assert proba.shape == (4, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    distances, indices = model.kneighbors(queries)
    reference = ref.matrix(queries, train, ref.dtw)
    np.testing.assert_allclose(
        distances, np.take_along_axis(reference, indices, axis=1), rtol=1e-12
    )
    assert np.all(np.diff(distances, axis=1) >= 0)


def test_gunpoint_accuracy_and_score():
    X, y = timewarp.load(DATA / "GunPoint_TRAIN.ts")
    Xt, yt = timewarp.load(DATA / "GunPoint_TEST.ts")
    model = KNeighborsClassifier(metric="dtw", device="cpu").fit(X, y)
    score = model.score(Xt[:60], yt[:60])
    predicted = model.predict(Xt[:60])
    assert score == pytest.approx(np.mean(predicted == yt[:60]))
    # 1-NN DTW on GunPoint is about 91% accurate (UCR archive); a broken
    # distance or vote lands near chance (50%).
    assert score > 0.8


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_lower_bounds_change_nothing_and_report_pruning(precision):
    X, y = timewarp.load(DATA / "GunPoint_TRAIN.ts")
    Xt, _ = timewarp.load(DATA / "GunPoint_TEST.ts")
    results = {}
    for brute_force in (False, True):
        model = KNeighborsClassifier(
            n_neighbors=3, band=6, device="cpu", precision=precision, brute_force=brute_force
        ).fit(X, y)
        assert not hasattr(model, "pruning_")
        predicted = model.predict(Xt)
        distances, indices = model.kneighbors(Xt)
        results[brute_force] = (predicted, distances, indices, model.pruning_)
    bounded, brute = results[False], results[True]
    np.testing.assert_array_equal(bounded[0], brute[0])
    np.testing.assert_array_equal(bounded[2], brute[2])
    # The same bits, not merely close.
    assert bounded[1].tobytes() == brute[1].tobytes()
    assert brute[3] is None
    pruning = bounded[3]
    assert set(pruning) == {"candidates", "kim", "keogh_query", "keogh_data", "dtw", "abandoned"}
    assert pruning["candidates"] == len(Xt) * len(X)
    skipped = pruning["kim"] + pruning["keogh_query"] + pruning["keogh_data"]
    assert skipped + pruning["dtw"] == pruning["candidates"]
    assert skipped > 0
    # Without a band every distance is computed.
    unbanded = KNeighborsClassifier(device="cpu").fit(X[:10], y[:10])
    unbanded.predict(Xt[:3])
    assert unbanded.pruning_ is None


def test_distance_weights_and_labels_of_any_type():
    train = RNG.normal(size=(6, 10))
    labels = np.array(["b", "a", "b", "c", "a", "c"])
    model = KNeighborsClassifier(n_neighbors=3, weights="distance", device="cpu")
    model.fit(train, labels)
    assert list(model.classes_) == ["a", "b", "c"]
    # A query equal to a training series takes that series' label alone.
    np.testing.assert_array_equal(model.predict(train), labels)
    np.testing.assert_array_equal(model.predict_proba(train[:1])[0], [0.0, 1.0, 0.0])


def test_estimator_api():
    model = KNeighborsClassifier(n_neighbors=2, metric="twed", nu=0.1)
    params = model.get_params()
    assert params["n_neighbors"] == 2 and params["metric"] == "twed" and params["nu"] == 0.1
    model.set_params(n_neighbors=1, metric="soft_dtw", gamma=0.5)
    assert model.n_neighbors == 1 and model.gamma == 0.5
    try:
        from sklearn.base import clone
    except ImportError:
        return
    copy = clone(model)
    assert copy.get_params() == model.get_params()


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: KNeighborsClassifier(n_neighbors=0).fit(np.zeros((2, 3)), [0, 1]), "n_neighbors"),
        (lambda: KNeighborsClassifier(n_neighbors=3).fit(np.zeros((2, 3)), [0, 1]), "n_neighbors"),
        (lambda: KNeighborsClassifier(n_neighbors=10**5000).fit(np.zeros((2, 3)), [0, 1]), "bits"),
        (lambda: KNeighborsClassifier(n_neighbors=True).fit(np.zeros((2, 3)), [0, 1]), "integer"),
        (lambda: KNeighborsClassifier(weights="x").fit(np.zeros((2, 3)), [0, 1]), "weights"),
        (lambda: KNeighborsClassifier(metric="x").fit(np.zeros((2, 3)), [0, 1]), "metric"),
        (lambda: KNeighborsClassifier().fit(np.zeros((2, 3)), [0, 1, 2]), "one label each"),
        (
            lambda: (
                KNeighborsClassifier(device="cpu")
                .fit(np.ones((2, 3)), [0, 1])
                .predict(np.ones((2, 3, 2)))
            ),
            "dimension",
        ),
    ],
)
def test_bad_use_is_a_timewarp_error(make, match):
    with pytest.raises(TimewarpError, match=match):
        make()


def not_fitted_error():
    """scikit-learn's NotFittedError where it is installed, else ours."""
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:
        return TimewarpError
    return NotFittedError


@pytest.mark.parametrize(
    "use",
    [
        lambda model, X, y: model.predict(X),
        lambda model, X, y: model.predict_proba(X),
        lambda model, X, y: model.kneighbors(X),
        lambda model, X, y: model.score(X, y),
    ],
    ids=["predict", "predict_proba", "kneighbors", "score"],
)
def test_use_before_fit_is_not_fitted_error(use):
    with pytest.raises(not_fitted_error(), match="not fitted"):
        use(KNeighborsClassifier(device="cpu"), np.zeros((2, 3)), [0, 1])


@pytest.mark.parametrize("save", ["pickle", "deepcopy", "joblib"])
@pytest.mark.parametrize("metric, ragged", [("dtw", False), ("twed", True)])
def test_a_fitted_model_saves_and_loads(tmp_path, save, metric, ragged):
    import copy
    import pickle

    rng = np.random.default_rng(5)
    if ragged:
        train = [rng.normal(size=(n, 2)) for n in rng.integers(5, 15, size=20)]
        queries = [rng.normal(size=(n, 2)) for n in rng.integers(5, 15, size=8)]
    else:
        train, queries = rng.normal(size=(20, 12)), rng.normal(size=(8, 12))
    labels = rng.choice(["a", "b", "c"], size=20)
    model = KNeighborsClassifier(n_neighbors=3, metric=metric, weights="distance", device="cpu")
    model.fit(train, labels)
    if save == "pickle":
        loaded = pickle.loads(pickle.dumps(model))
    elif save == "deepcopy":
        loaded = copy.deepcopy(model)
    else:
        joblib = pytest.importorskip("joblib")
        joblib.dump(model, tmp_path / "model.joblib")
        loaded = joblib.load(tmp_path / "model.joblib")
    assert loaded is not model and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.predict(queries), model.predict(queries))
    np.testing.assert_array_equal(loaded.predict_proba(queries), model.predict_proba(queries))
    for got, expected in zip(loaded.kneighbors(queries), model.kneighbors(queries)):
        np.testing.assert_array_equal(got, expected)
    # The original still works after being pickled (its resident copy kept).
    np.testing.assert_array_equal(model.predict(queries), loaded.predict(queries))


def test_an_unfitted_model_pickles_unfitted():
    import pickle

    loaded = pickle.loads(pickle.dumps(KNeighborsClassifier(n_neighbors=2)))
    assert loaded.n_neighbors == 2
    with pytest.raises(not_fitted_error()):
        loaded.predict(np.zeros((2, 3)))
