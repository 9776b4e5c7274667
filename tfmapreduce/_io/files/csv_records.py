"""CSV records out of text lines: the lines of a quoted field that holds a line break joined back into one record.

``write_csv`` quotes a string that holds a line break (``"new\\nline"``); the text pipelines split a file at every
``\\n``, so a record may come as several lines.  A line starts a record where an even number of quotes came
before it in the file (a quote inside a quoted field is written ``""``: two); the lines of one record are joined
again by ``\\n``.  Lines without any quote pass as they are, with no join.
"""

from __future__ import annotations

import tensorflow as tf

_NO_QUOTE = '[^"]*'


def _starts(lines: tf.Tensor) -> tf.Tensor:
    """Whether each line starts a record: an even number of quotes in the lines before it."""
    quotes = tf.strings.length(tf.strings.regex_replace(lines, _NO_QUOTE, ""))
    odd = tf.math.floormod(quotes, 2)
    return tf.equal(tf.math.floormod(tf.cumsum(odd, exclusive=True), 2), 0)


def _joined(lines: tf.Tensor, starts: tf.Tensor) -> tf.Tensor:
    """The records of ``lines``: each line that starts one, with the lines up to the next start joined by ``\\n``."""
    ids = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    grouped = tf.RaggedTensor.from_value_rowids(lines, ids, nrows=tf.reduce_sum(tf.cast(starts, tf.int64)))
    return tf.strings.reduce_join(grouped, axis=1, separator="\n")


def _quoted(lines: tf.Tensor) -> tf.Tensor:
    return tf.logical_not(tf.reduce_all(tf.strings.regex_full_match(lines, _NO_QUOTE)))


def records(lines: tf.Tensor) -> tf.Tensor:
    """The CSV records of ``lines``, all of one file in order (a record left open at the end stays one, and fails to
    parse as a quote not closed).

    Example:
        >>> records(tf.constant([b'k,v', b'"new', b'line",1', b'x,2'])).numpy().tolist()
        [b'k,v', b'"new\\nline",1', b'x,2']
    """
    return tf.cond(_quoted(lines), lambda: _joined(lines, _starts(lines)), lambda: lines)


def record_batches(batches: tf.data.Dataset) -> tf.data.Dataset:
    """The CSV records of a file's lines given in batches (1-D string tensors, in order): a record whose lines cross
    a batch's end is carried into the next batch; batches left empty are dropped."""
    end = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), True))
    items = batches.map(lambda lines: (lines, False)).concatenate(end)

    def step(carried: tf.Tensor, item: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        lines, last = item
        lines = tf.concat([carried, lines], 0)

        def split() -> tuple[tf.Tensor, tf.Tensor]:
            starts = _starts(lines)
            quotes = tf.strings.length(tf.strings.regex_replace(lines, _NO_QUOTE, ""))
            open_at_end = tf.logical_and(tf.equal(tf.math.floormod(tf.reduce_sum(quotes), 2), 1), tf.logical_not(last))
            cut = tf.where(open_at_end, tf.reduce_max(tf.where(starts)[:, 0]), tf.cast(tf.size(lines), tf.int64))
            return lines[cut:], _joined(lines[:cut], starts[:cut])

        result: tuple[tf.Tensor, tf.Tensor] = tf.cond(_quoted(lines), split, lambda: (tf.zeros([0], tf.string), lines))
        return result

    return items.scan(tf.zeros([0], tf.string), step).filter(lambda lines: tf.size(lines) > 0)
