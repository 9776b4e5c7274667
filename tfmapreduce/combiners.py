"""Built-in combiners for ``MapReduce(map_fn, reduce_fn)``: each merges per-shard partials that carry their rows.

Examples:
    >>> import tensorflow as tf, tfmapreduce as tmr
    >>> job = tmr.MapReduce(tf.reduce_mean, tmr.combiners.weighted_mean)
"""

from ._base.quiet import import_tensorflow

import_tensorflow()

from ._ops.combine import COUNT as count  # noqa: E402 - after the quiet import
from ._ops.combine import MAX as max  # noqa: E402
from ._ops.combine import MEAN as mean  # noqa: E402
from ._ops.combine import MIN as min  # noqa: E402
from ._ops.combine import SUM as sum  # noqa: E402
from ._ops.combine import WEIGHTED_MEAN as weighted_mean  # noqa: E402
from ._ops.combine import Combiner as Combiner  # noqa: E402
from ._ops.combine import SegmentForm as SegmentForm  # noqa: E402
from ._ops.moments import MOMENTS as moments  # noqa: E402

__all__ = ["Combiner", "SegmentForm", "count", "max", "mean", "min", "moments", "sum", "weighted_mean"]
