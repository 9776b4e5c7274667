"""scikit-learn-style estimators over the recipes: ``KMeans(...).fit(x).predict(x)``, ``LinearRegression().fit(X, y).predict(X)``.

Thin on purpose: ``fit`` calls the recipe (one distributed run per iteration, on any
cluster, host or resident data) and keeps its result; ``predict`` runs on the client.
They are not scikit-learn estimators (no ``get_params``/``clone``, no pipelines), and the
defaults are tfmapreduce's (``init="first"``, 10 iterations), not scikit-learn's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from typing_extensions import Unpack

from .._options import Options
from ._kmeans import KMeansResult, kmeans
from ._regression import LinearModel, linear_regression


class KMeans:
    """k-means with scikit-learn's names: ``fit`` runs [`kmeans`][tfmapreduce.recipes.kmeans], then ``cluster_centers_``, ``n_iter_`` and ``predict``.

    Args:
        n_clusters: k.
        init: ``"first"``, ``"random"`` or a ``(k, features)`` array (as [`kmeans`][tfmapreduce.recipes.kmeans]).
        max_iter: the most Lloyd iterations (``iters`` of [`kmeans`][tfmapreduce.recipes.kmeans]).
        tol: stop once no centroid moves further than this.
        random_state: the seed of ``init="random"``.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` of every run (``progress``: the bar of
            [`kmeans`][tfmapreduce.recipes.kmeans]).

    Examples:
        >>> x = np.array([[0.0, 0], [0, 1], [10, 10], [10, 11]])
        >>> model = tmr.recipes.KMeans(n_clusters=2, init=x[[0, 2]], cluster=cluster).fit(x)
        >>> model.cluster_centers_
        array([[ 0. ,  0.5],
               [10. , 10.5]])
        >>> model.predict(np.array([[1.0, 1.0], [9.0, 9.0]]))
        array([0, 1])
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        init: Any = "first",
        max_iter: int = 10,
        tol: float = 1e-6,
        random_state: int = 0,
        **options: Unpack[Options],
    ):
        self.n_clusters, self.init, self.max_iter, self.tol = n_clusters, init, max_iter, tol
        self.random_state, self.options = random_state, options
        self.result_: KMeansResult | None = None

    def fit(self, x: Any, y: object = None) -> KMeans:
        """Run [`kmeans`][tfmapreduce.recipes.kmeans] on ``x`` (host or resident data); returns ``self``.  ``y`` is ignored."""
        self.result_ = kmeans(
            x,
            self.n_clusters,
            iters=self.max_iter,
            init=self.init,
            tol=self.tol,
            seed=self.random_state,
            **self.options,
        )
        return self

    def _fitted(self) -> KMeansResult:
        if self.result_ is None:
            raise ValueError("this KMeans is not fitted yet: call fit(x) first")
        return self.result_

    @property
    def cluster_centers_(self) -> np.ndarray[Any, Any]:
        """The centroids, ``(n_clusters, features)``."""
        return self._fitted().centroids

    @property
    def n_iter_(self) -> int:
        """Lloyd iterations run."""
        return self._fitted().iterations

    def predict(self, x: Any) -> np.ndarray[Any, Any]:
        """The index of the nearest centroid for each row of host array ``x`` (see [`KMeansResult.predict`][tfmapreduce.recipes.KMeansResult.predict])."""
        return self._fitted().predict(x)

    def __repr__(self) -> str:
        return f"KMeans(n_clusters={self.n_clusters!r}, max_iter={self.max_iter!r}, {'fitted' if self.result_ else 'not fitted'})"


class LinearRegression:
    """Least squares with scikit-learn's names: ``fit`` runs [`linear_regression`][tfmapreduce.recipes.linear_regression],
    then ``coef_``, ``intercept_`` and ``predict``.

    Args:
        fit_intercept: also fit a constant term.
        **options: ``cluster``, ``sizes``, ``devices``, ``fallback``, ``timeout`` of the run.

    Examples:
        >>> X = np.array([[0.0], [1.0], [2.0]]); y = 1 + 2 * X[:, 0]
        >>> model = tmr.recipes.LinearRegression(cluster=cluster).fit(X, y)
        >>> model.coef_.round(12), round(model.intercept_, 12)
        (array([2.]), 1.0)
        >>> model.predict(np.array([[3.0]])).round(12)
        array([7.])
    """

    def __init__(self, *, fit_intercept: bool = True, **options: Unpack[Options]):
        self.fit_intercept, self.options = fit_intercept, options
        self.model_: LinearModel | None = None

    def fit(self, X: Any, y: Any) -> LinearRegression:
        """Run [`linear_regression`][tfmapreduce.recipes.linear_regression] on ``(X, y)`` (host or resident, co-partitioned); returns ``self``."""
        self.model_ = linear_regression(X, y, intercept=self.fit_intercept, **self.options)
        return self

    def _fitted(self) -> LinearModel:
        if self.model_ is None:
            raise ValueError("this LinearRegression is not fitted yet: call fit(X, y) first")
        return self.model_

    @property
    def coef_(self) -> np.ndarray[Any, Any]:
        """Coefficients, ``(features,)`` or ``(targets, features)`` as scikit-learn shapes them."""
        return self._fitted().coef_

    @property
    def intercept_(self) -> Any:
        """The intercept (an array for a 2-d ``y``; 0 without ``fit_intercept``)."""
        return self._fitted().intercept_

    def predict(self, X: Any) -> np.ndarray[Any, Any]:
        """``X @ coef + intercept`` on the client."""
        return self._fitted().predict(X)

    def __repr__(self) -> str:
        return f"LinearRegression(fit_intercept={self.fit_intercept!r}, {'fitted' if self.model_ else 'not fitted'})"
