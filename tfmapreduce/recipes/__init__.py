"""Recipes: statistics and models, each one call on any cluster, over host or resident data.

Every recipe takes the data positionally (an array, a tuple of co-partitioned
arrays, or resident ``Sharded`` data) and the keywords ``cluster=``, ``sizes=``,
``devices=``, ``fallback=`` and ``timeout=`` of ``MapReduce.run`` (see ``tmr.RunOptions``).

Examples:
    >>> import numpy as np, tfmapreduce as tmr
    >>> with tmr.scatter(np.random.default_rng(0).random((1000, 2)), cluster=cluster) as x:
    ...     means = tmr.recipes.mean(x, axis=0)
    ...     centroids = tmr.recipes.kmeans(x, 3).centroids
    >>> means.shape, centroids.shape
    ((2,), (3, 2))
"""

from .._base.quiet import import_tensorflow

import_tensorflow()

from ._averaging import least_squares_fit as least_squares_fit  # noqa: E402 - after the quiet import
from ._averaging import model_average as model_average  # noqa: E402
from ._by_group import collect_by_key as collect_by_key  # noqa: E402 - after the quiet import
from ._by_group import count_distinct_by_key as count_distinct_by_key  # noqa: E402
from ._by_group import median_by_key as median_by_key  # noqa: E402
from ._by_group import quantile_by_key as quantile_by_key  # noqa: E402
from ._by_group import top_k_by_key as top_k_by_key  # noqa: E402
from ._by_key import count_by_key as count_by_key  # noqa: E402
from ._by_key import max_by_key as max_by_key  # noqa: E402
from ._by_key import mean_by_key as mean_by_key  # noqa: E402
from ._by_key import min_by_key as min_by_key  # noqa: E402
from ._by_key import sum_by_key as sum_by_key  # noqa: E402
from ._by_key import word_count as word_count  # noqa: E402
from ._estimators import KMeans as KMeans  # noqa: E402
from ._estimators import LinearRegression as LinearRegression  # noqa: E402
from ._histogram import histogram as histogram  # noqa: E402
from ._kmeans import KMeansResult as KMeansResult  # noqa: E402
from ._kmeans import KMeansStep as KMeansStep  # noqa: E402
from ._kmeans import kmeans as kmeans  # noqa: E402
from ._pagerank import pagerank as pagerank  # noqa: E402
from ._regression import GradientStep as GradientStep  # noqa: E402
from ._regression import LinearModel as LinearModel  # noqa: E402
from ._regression import LogisticModel as LogisticModel  # noqa: E402
from ._regression import linear_regression as linear_regression  # noqa: E402
from ._regression import logistic_regression as logistic_regression  # noqa: E402
from ._spread_by_key import std_by_key as std_by_key  # noqa: E402
from ._spread_by_key import var_by_key as var_by_key  # noqa: E402
from ._spread_by_key import variance_by_key as variance_by_key  # noqa: E402
from ._statistics import count as count  # noqa: E402
from ._statistics import max as max  # noqa: E402
from ._statistics import mean as mean  # noqa: E402
from ._statistics import min as min  # noqa: E402
from ._statistics import moments as moments  # noqa: E402
from ._statistics import std as std  # noqa: E402
from ._statistics import sum as sum  # noqa: E402
from ._statistics import var as var  # noqa: E402
from ._statistics import variance as variance  # noqa: E402
from ._statistics import weighted_mean as weighted_mean  # noqa: E402

__all__ = [
    "GradientStep",
    "KMeans",
    "KMeansResult",
    "KMeansStep",
    "LinearModel",
    "LinearRegression",
    "LogisticModel",
    "collect_by_key",
    "count",
    "count_by_key",
    "count_distinct_by_key",
    "histogram",
    "kmeans",
    "least_squares_fit",
    "linear_regression",
    "logistic_regression",
    "max",
    "max_by_key",
    "mean",
    "mean_by_key",
    "median_by_key",
    "min",
    "min_by_key",
    "model_average",
    "moments",
    "pagerank",
    "quantile_by_key",
    "std",
    "std_by_key",
    "sum",
    "sum_by_key",
    "top_k_by_key",
    "var",
    "var_by_key",
    "variance",
    "variance_by_key",
    "weighted_mean",
    "word_count",
]
