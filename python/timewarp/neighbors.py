"""k-nearest-neighbour classification under an elastic distance, with
scikit-learn's estimator API."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _inputs
from ._core import _band, _float, _metric, _shown
from ._errors import InputError
from ._timewarp import Resident

try:  # scikit-learn's base classes when it is installed (clone, pipelines, grid search)
    from sklearn.base import BaseEstimator, ClassifierMixin
except ImportError:  # the same get_params/set_params/score without it

    class BaseEstimator:  # type: ignore[no-redef]
        def get_params(self, deep: bool = True) -> dict:
            import inspect

            names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
            return {name: getattr(self, name) for name in names}

        def set_params(self, **params: Any) -> BaseEstimator:
            valid = self.get_params()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}")
                setattr(self, name, value)
            return self

        def __repr__(self) -> str:
            params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
            return f"{type(self).__name__}({params})"

    class ClassifierMixin:  # type: ignore[no-redef]
        _estimator_type = "classifier"

        def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
            predicted = self.predict(X)
            correct = (np.asarray(predicted) == np.asarray(y)).astype(float)
            return float(np.average(correct, weights=sample_weight))


class KNeighborsClassifier(ClassifierMixin, BaseEstimator):
    """k-NN under DTW, TWED or Soft-DTW. `fit` keeps the training series
    resident where they are compared (on the GPU when `device` picks one),
    so every `predict` moves only its queries.

    weights: ``"uniform"`` (each of the k neighbours one vote) or
    ``"distance"`` (votes weighted by 1/distance; an exact match takes the
    vote alone). Ties between classes go to the class that sorts first.

    DTW with a `band` on the CPU skips most training series by lower
    bounds (LB_Kim, LB_Keogh both ways, a pruned, early-abandoned DTW),
    with the same neighbours and distances as computing them all; after each
    `kneighbors` (so `predict`, `predict_proba`, `score`), ``pruning_`` is a
    dict of what they skipped (``candidates``, ``kim``, ``keogh_query``,
    ``keogh_data``, ``dtw``, ``abandoned``), or None where every distance
    was computed. ``brute_force=True`` turns the bounds off.

    A fitted model pickles (``pickle``, ``joblib``, ``copy.deepcopy``) with
    its training set, which is made resident again at its first use after
    loading. Using it before `fit` raises scikit-learn's `NotFittedError`
    (an `InputError`, a `ValueError`, without scikit-learn).
    """

    def __init__(
        self,
        n_neighbors: int = 1,
        metric: str = "dtw",
        weights: str = "uniform",
        gamma: float = 1.0,
        band: Optional[int] = None,
        nu: float = 0.001,
        lmbda: float = 1.0,
        degree: float = 2.0,
        device: str = "auto",
        precision: Optional[str] = None,
        brute_force: bool = False,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.weights = weights
        self.gamma = gamma
        self.band = band
        self.nu = nu
        self.lmbda = lmbda
        self.degree = degree
        self.device = device
        self.precision = precision
        self.brute_force = brute_force

    def fit(self, X: Any, y: Any) -> KNeighborsClassifier:
        k = self.n_neighbors
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError(f"n_neighbors = {_shown(k)}: must be an integer >= 1")
        if self.weights not in ("uniform", "distance"):
            raise InputError(f"weights {self.weights!r}: expected 'uniform' or 'distance'")
        _metric(self.metric)
        train = _inputs.batch(X, "X")
        labels = np.asarray(y.cpu() if hasattr(y, "cpu") else y)
        if labels.ndim != 1 or len(labels) != train.count:
            raise InputError(
                f"y has shape {labels.shape} but X has {train.count} series: one label each"
            )
        if self.n_neighbors > train.count:
            raise InputError(
                f"n_neighbors = {_shown(self.n_neighbors)} but only {train.count} training series"
            )
        self.classes_, self._encoded = np.unique(labels, return_inverse=True)
        self._dtype = _inputs.common_dtype(self.precision, train)
        self._where = _inputs.device_for(self.device, train)
        # Kept on the host too, so that a pickled model carries its training
        # set (the resident copy cannot be pickled: see __getstate__).
        self._train = _inputs.cast(train, self._dtype)
        self._resident = Resident(self._train, self._where)
        self.n_features_in_ = None
        return self

    def __getstate__(self) -> dict:
        # The resident copy (GPU memory, or the extension's host copy) is
        # left out and made again from the training set at the first use
        # after loading.
        parent = getattr(super(), "__getstate__", None)
        state = dict(parent() if parent is not None else self.__dict__)
        state.pop("_resident", None)
        return state

    def _training_set(self) -> Resident:
        """The resident training set, uploaded again after unpickling."""
        if not hasattr(self, "_train"):
            self._raise_not_fitted()
        if not hasattr(self, "_resident"):
            self._resident = Resident(self._train, self._where)
        return self._resident

    def _raise_not_fitted(self) -> None:
        message = (
            f"this {type(self).__name__} is not fitted yet: call fit with training data first"
        )
        try:
            from sklearn.exceptions import NotFittedError
        except ImportError:
            raise InputError(message) from None
        raise NotFittedError(message)

    def kneighbors(self, X: Any, n_neighbors: Optional[int] = None, return_distance: bool = True):
        """Indices of the nearest training series of each query (nearest
        first, ties by index), and their distances. Only the nearest come
        back from where the training set lives."""
        resident = self._training_set()
        k = self.n_neighbors if n_neighbors is None else n_neighbors
        if (
            isinstance(k, (bool, np.bool_))
            or not isinstance(k, (int, np.integer))
            or not 1 <= k <= len(resident)
        ):
            raise InputError(
                f"n_neighbors = {_shown(k)}: must be an integer between 1 and {len(resident)}"
            )
        queries = _inputs.batch(X, "X")
        distances, indices, self.pruning_ = resident.kneighbors(
            _inputs.cast(queries, self._dtype),
            int(k),
            _metric(self.metric),
            _float("gamma", self.gamma),
            _band(self.band),
            _float("nu", self.nu),
            _float("lmbda", self.lmbda),
            _float("degree", self.degree),
            bool(self.brute_force),
        )
        if not return_distance:
            return indices
        return distances, indices

    def predict_proba(self, X: Any) -> np.ndarray:
        distances, indices = self.kneighbors(X)
        votes = self._encoded[indices]
        if self.weights == "uniform":
            weight = np.ones_like(distances, dtype=np.float64)
        else:
            with np.errstate(divide="ignore"):
                weight = 1.0 / distances.astype(np.float64)
            exact = np.isinf(weight)
            rows = exact.any(axis=1)
            weight[rows] = exact[rows].astype(np.float64)
        proba = np.zeros((len(votes), len(self.classes_)))
        for column in range(votes.shape[1]):
            np.add.at(proba, (np.arange(len(votes)), votes[:, column]), weight[:, column])
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)  # raises NotFittedError before `fit`
        return self.classes_[np.argmax(proba, axis=1)]
