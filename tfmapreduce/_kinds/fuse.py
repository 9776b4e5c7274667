"""Fusion: a word count runs as one native kernel; whether, and over what input, is decided here alone (:func:`fused`).

A user writes a word count as::

    def words(lines):
        w = tf.strings.split(lines).flat_values
        return w, tf.ones_like(w, dtype=tf.int64)

    tmr.MapReduce(words, tmr.combiners.sum, by_key=True).run(tmr.read_text(paths))

and the ``word_count`` recipe is that very job.  Run as written, each batch of lines becomes a string per line, a
string per word, and a grouping of those words by fingerprint.  :func:`counts_words` recognises that map function
from its graph (traced once on a batch of strings): its keys are ``StringSplitV2(lines, sep="")``'s words and its
values a ``Fill`` of ones of the words' shape, in int32 or int64.  With ``combiners.sum``, no broadcast values and
text for input (``read_text`` files, or a 1-D array of strings, host or resident), :func:`fused` then reads files as
blocks of whole lines and counts each batch's words with the native ``TmrWordCounts`` (:func:`count_words`) where
every task has it: the same counts, the recipe's speed.  Anything else (another separator, ``maxsplit``, values that
are not ones, broadcast values) runs as written.

Words are what ``bytes.split()`` and Spark's ``split(line, "\\s+")`` make of the text: runs of ASCII whitespace
(space, ``\\t``, ``\\n``, ``\\v``, ``\\f``, ``\\r``) separate them, in files as in arrays of lines, with the native kernel
or without.  So ``\\r\\n`` ends a line as ``\\n`` does, and a lone ``\\r`` separates two words (files are read with each
``\\r`` a space: the lines of ``read_text`` drop every ``\\r``, as TensorFlow's ``TextLineDataset`` does, which would
join them).  Unicode spaces (U+00A0 no-break space, U+3000, U+0085...) are part of a word: Python's ``str.split()``
and pandas' ``Series.str.split()`` split at them, Spark and ``bytes.split()`` do not, and a no-break space is
there to keep its words together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import tensorflow as tf

from .._engine.kernels import available
from .._io.files.files import Files
from .._io.files.readers import Text, TextBlocks
from .._io.resident import Sharded
from .._native.loader import kernels
from .._options import RunOptions

WORD_DTYPES = (tf.int32, tf.int64)
"""The dtypes of the ones a fused map may pair with its words: integer sums of ones are exact counts."""


def count_words(dtype: tf.DType = tf.int64) -> Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """A map function: each distinct word of a batch of text and its count (as ``dtype``), by the native kernel."""

    def counted(text: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ops = kernels()
        assert ops is not None  # chosen only where the kernels are loaded
        words, counts = ops.tmr_word_counts(text)
        return words, counts if dtype == tf.int64 else tf.cast(counts, dtype)

    return counted


def _origin(t: tf.Tensor) -> tf.Tensor:
    """``t`` before any ``Identity`` ops."""
    while t.op.type == "Identity":
        t = t.op.inputs[0]
    return t


def counts_words(map_fn: Callable[..., Any]) -> tf.DType | None:
    """The dtype of the ones ``map_fn`` pairs with each whitespace-separated word of its lines, where that is all it
    does (``tf.strings.split(lines).flat_values`` and ones of their shape); else None.

    Example:
        >>> def words(lines):
        ...     w = tf.strings.split(lines).flat_values
        ...     return w, tf.ones_like(w, dtype=tf.int64)
        >>> counts_words(words)
        tf.int64
        >>> counts_words(lambda lines: (tf.strings.split(lines, ",").flat_values, tf.ones_like(lines, tf.int64)))  # None
    """
    try:
        graph = tf.function(map_fn, autograph=False).get_concrete_function(tf.TensorSpec([None], tf.string)).graph
    except Exception:  # a map function for other inputs: it runs as written, and says so there
        return None
    outputs = graph.structured_outputs
    if not isinstance(outputs, (tuple, list)) or len(outputs) != 2 or not all(isinstance(t, tf.Tensor) for t in outputs):
        return None
    words, ones = (_origin(t) for t in outputs)
    split = words.op
    if split.type != "StringSplitV2" or words.value_index != 1 or split.get_attr("maxsplit") != -1:
        return None
    if _origin(split.inputs[0]).op.type != "Placeholder" or tf.get_static_value(split.inputs[1]) != b"":
        return None
    if ones.op.type != "Fill" or ones.dtype not in WORD_DTYPES:
        return None
    shape, value = ones.op.inputs
    if shape.op.type != "Shape" or _origin(shape.op.inputs[0]).name != words.name or tf.get_static_value(value) != 1:
        return None
    return ones.dtype


_COUNTERS: dict[tf.DType, Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]] = {}
"""The native count's map function per dtype of the ones, one each so that fused jobs share their graphs."""


def _text(x: Any) -> bool:
    """Whether ``x`` is text a word count reads: ``read_text`` files, or a 1-D array of strings (host or resident)."""
    if isinstance(x, Files):
        return type(x.reader) in (Text, TextBlocks)
    if isinstance(x, Sharded | np.ndarray):
        return len(x.shape) == 1 and x.dtype.kind in "USO"
    return False


def fused(ones: Callable[[], tf.DType | None], x: Any, settings: RunOptions) -> tuple[Callable[..., Any] | None, Any]:
    """How a job runs over ``x``: the native map function that counts each batch's words, or None where the job's own
    map function runs; and the input as it is read.  The one place fusion is decided, for every keyed ``MapReduce``
    (the ``word_count`` recipe is one).

    ``ones()`` gives the dtype of the ones of a job that sums ones over the whitespace-separated words of its input
    (:func:`counts_words`), None for any other job, which runs as written over ``x``; it is asked only where ``x`` is
    text (it traces the job's map function).  A word count over text
    (``read_text`` files, a 1-D array of strings) reads files as blocks of whole lines with each ``\\r`` a space
    (``TextBlocks``: see the module's notes on what a word is), and counts natively where this client and every task
    of the cluster have ``TmrWordCounts``; else its map function splits each batch as written: the same words.

    Example:
        >>> fused(lambda: None, np.array(["a b"]), RunOptions.of(cluster=cluster))[0] is None  # not a word count
        True
    """
    if not _text(x):
        return None, x
    dtype = ones()
    if dtype is None:
        return None, x
    if isinstance(x, Files) and type(x.reader) is Text:
        x = attrs.evolve(x, reader=TextBlocks())
    cluster = settings.cluster if settings.cluster is not None else x.cluster if isinstance(x, Sharded) else None
    if cluster is None or not available(cluster, settings.seconds(), "tmr_word_counts"):
        return None, x
    return _COUNTERS.setdefault(dtype, count_words(dtype)), x
