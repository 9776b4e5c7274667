"""Fusion: a keyed job whose map function is a whitespace word count runs as the native word count does.

A user writes a word count as::

    def words(lines):
        w = tf.strings.split(lines).flat_values
        return w, tf.ones_like(w, dtype=tf.int64)

    tmr.MapReduce(words, tmr.combiners.sum, by_key=True).run(tmr.read_text(paths))

Run as written, each batch of lines becomes a string per line, a string per word, and a grouping of those
words by fingerprint.  :func:`counts_words` recognises that map function from its graph (traced once on a
batch of strings): its keys are ``StringSplitV2(lines, sep="")``'s words and its values a ``Fill`` of ones
of the words' shape, in int32 or int64.  With ``combiners.sum`` over ``read_text`` files, the engine then
reads whole-line blocks (``TextBlocks`` dropping ``\\r``, as the line reader does) and counts each block's
words with the native ``TmrWordCounts`` (:func:`count_words`): the same counts, the recipe's speed.
Anything else (another separator, ``maxsplit``, values that are not ones, broadcast values) runs as written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from .._native.loader import kernels

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
