"""Recipes: statistics and models, each one call on any cluster, over host or resident data.

Every recipe takes the data positionally (an array, a tuple of co-partitioned
arrays, or resident ``Sharded`` data) and the keywords ``cluster=``, ``sizes=``,
``devices=``, ``fallback=`` and ``timeout=`` of ``MapReduce.run``.

Example:
    >>> import numpy as np, tfmapreduce as tmr
    >>> with tmr.LocalCluster(2) as c, tmr.scatter(np.random.random((1000, 2)), cluster=c) as x:  # doctest: +SKIP
    ...     print(tmr.recipes.mean(x, axis=0), tmr.recipes.kmeans(x, 3).centroids)
"""

from ._by_key import count_by_key as count_by_key
from ._by_key import max_by_key as max_by_key
from ._by_key import mean_by_key as mean_by_key
from ._by_key import min_by_key as min_by_key
from ._by_key import sum_by_key as sum_by_key
from ._by_key import variance_by_key as variance_by_key
from ._by_key import word_count as word_count
from ._models import GradientStep as GradientStep
from ._models import KMeansResult as KMeansResult
from ._models import KMeansStep as KMeansStep
from ._models import LinearModel as LinearModel
from ._models import LogisticModel as LogisticModel
from ._models import histogram as histogram
from ._models import kmeans as kmeans
from ._models import least_squares_fit as least_squares_fit
from ._models import linear_regression as linear_regression
from ._models import logistic_regression as logistic_regression
from ._models import model_average as model_average
from ._stats import count as count
from ._stats import max as max
from ._stats import mean as mean
from ._stats import min as min
from ._stats import moments as moments
from ._stats import std as std
from ._stats import sum as sum
from ._stats import variance as variance
from ._stats import weighted_mean as weighted_mean

__all__ = [
    "GradientStep",
    "KMeansResult",
    "KMeansStep",
    "LinearModel",
    "LogisticModel",
    "count",
    "count_by_key",
    "histogram",
    "kmeans",
    "least_squares_fit",
    "linear_regression",
    "logistic_regression",
    "max",
    "max_by_key",
    "mean",
    "mean_by_key",
    "min",
    "min_by_key",
    "model_average",
    "moments",
    "std",
    "sum",
    "sum_by_key",
    "variance",
    "variance_by_key",
    "weighted_mean",
    "word_count",
]
