"""Built-in combiners for ``MapReduce(map_fn, reduce_fn)``: each merges per-shard partials that carry their rows.

Example:
    >>> import tensorflow as tf, tfmapreduce as tmr
    >>> job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
"""

from ._combine import COUNT as count
from ._combine import MAX as max
from ._combine import MEAN as mean
from ._combine import MIN as min
from ._combine import MOMENTS as moments
from ._combine import SUM as sum
from ._combine import WEIGHTED_MEAN as weighted_mean
from ._combine import Combiner as Combiner
from ._combine import SegmentForm as SegmentForm

__all__ = ["Combiner", "SegmentForm", "count", "max", "mean", "min", "moments", "sum", "weighted_mean"]
