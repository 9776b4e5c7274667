"""Text read in blocks on a worker: byte ranges of a file, and its whole lines without a string per line.

Lines end at ``\\n``; every ``\\r`` is dropped (as ``tf.data.TextLineDataset`` does); a last line
without ``\\n`` counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf


def byte_blocks(path: str, size: int, first: int, stop: int, block: int) -> tf.data.Dataset:
    """The bytes ``first:stop`` of a file of ``size`` bytes as string records of ``block`` bytes (the last one shorter).

    No byte outside the range is read: ``FixedLengthRecordDataset`` skips a header and a footer.
    """
    full, rest = divmod(stop - first, block)
    parts = []
    if full:
        parts.append(tf.data.FixedLengthRecordDataset(path, block, header_bytes=first, footer_bytes=size - first - full * block))
    if rest:
        parts.append(tf.data.FixedLengthRecordDataset(path, rest, header_bytes=first + full * block, footer_bytes=size - stop))
    if not parts:
        return tf.data.Dataset.from_tensor_slices(tf.zeros([0], tf.string))
    return parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])


TEXT_BLOCK = 8 << 20
"""Bytes of a text file read at once: the file is read in blocks, each split into its whole lines."""


def text_lines(path: str, size: int) -> tf.data.Dataset:
    """The lines of a text file of ``size`` bytes, in batches of about one block's lines, as ``TextLineDataset`` yields them.

    Lines end at ``\\n``; every ``\\r`` is dropped (as ``TextLineDataset`` does); a last line
    without ``\\n`` counts.  No dataset element per line (faster than ``TextLineDataset``).
    """
    return text_blocks(path, size).map(split_lines)


def split_lines(text: tf.Tensor) -> tf.Tensor:
    """The lines of a piece of :func:`text_blocks` (strings of whole lines joined by ``\\n``), as one 1-D string tensor."""
    return tf.strings.split(text, "\n").flat_values


def text_blocks(path: str, size: int, cr: str = "") -> tf.data.Dataset:
    """The text of a file of ``size`` bytes as 1-D string tensors of one or two strings of whole lines (joined by ``\\n``).

    The file is read :data:`TEXT_BLOCK` bytes at a time.  The line that straddles two blocks
    is joined from the part carried over and the block's text up to its first newline; the rest
    up to the block's last newline is passed on as it is (joining large strings is slow).
    Every ``\\r`` is replaced by ``cr`` (dropped by default).
    """
    end = tf.data.Dataset.from_tensors((tf.constant(b""), True))  # the end: what is carried is the last line
    blocks = byte_blocks(path, size, 0, size, TEXT_BLOCK).map(lambda block: (block, False)).concatenate(end)

    def whole_lines(carried: tf.Tensor, item: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        block, end = item
        has_cr = tf.reduce_any(tf.equal(tf.io.decode_raw(block, tf.uint8), 13))
        block = tf.cond(has_cr, lambda: tf.strings.regex_replace(block, "\r", cr), lambda: block)
        first, last = _first_and_last_newline(block)

        def cut() -> tuple[tf.Tensor, tf.Tensor]:
            straddling = carried + tf.strings.substr(block, 0, first)
            text = tf.stack([straddling, tf.strings.substr(block, first + 1, last - first - 1)])
            return tf.strings.substr(block, last + 1, tf.strings.length(block) - last - 1), text[
                : 1 + tf.cast(last > first, tf.int32)
            ]

        def carry_all() -> tuple[tf.Tensor, tf.Tensor]:
            return carried + block, tf.zeros([0], tf.string)

        def finish() -> tuple[tf.Tensor, tf.Tensor]:
            return tf.constant(b""), tf.reshape(carried, [1])[: tf.cast(tf.strings.length(carried) > 0, tf.int32)]

        result: tuple[tf.Tensor, tf.Tensor] = tf.cond(end, finish, lambda: tf.cond(first >= 0, cut, carry_all))
        return result

    def some(text: tf.Tensor) -> tf.Tensor:
        return tf.size(text) > 0

    return blocks.scan(tf.constant(b""), whole_lines).filter(some)


NEWLINE_WINDOW = 1 << 16
"""Bytes at each end of a block searched first for its first and last newline (the whole block only if they hold none)."""


def _first_and_last_newline(block: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The byte positions of the first and the last ``\\n`` of ``block`` (int32), or (-1, -1) when it has none.

    Lines are short: both are found in :data:`NEWLINE_WINDOW` bytes at the block's ends, without
    listing every newline of an 8 MiB block.
    """
    n = tf.strings.length(block)
    w = tf.minimum(n, NEWLINE_WINDOW)
    head = tf.where(tf.equal(tf.io.decode_raw(tf.strings.substr(block, 0, w), tf.uint8), 10))[:, 0]
    tail = tf.where(tf.equal(tf.io.decode_raw(tf.strings.substr(block, n - w, w), tf.uint8), 10))[:, 0]

    def windows() -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(head[0], tf.int32), n - w + tf.cast(tail[-1], tf.int32)

    def whole() -> tuple[tf.Tensor, tf.Tensor]:
        every = tf.cast(tf.where(tf.equal(tf.io.decode_raw(block, tf.uint8), 10))[:, 0], tf.int32)
        ends: tuple[tf.Tensor, tf.Tensor] = tf.cond(
            tf.size(every) > 0, lambda: (every[0], every[-1]), lambda: (tf.constant(-1), tf.constant(-1))
        )
        return ends

    result: tuple[tf.Tensor, tf.Tensor] = tf.cond(tf.logical_and(tf.size(head) > 0, tf.size(tail) > 0), windows, whole)
    return result


RESIZED = "no longer has the size it had when the run started"
"""In the error of a small text file that changed during the run, next to its path."""


def whole_text(path: tf.Tensor, size: tf.Tensor, cr: str = "") -> tf.Tensor:
    """The text of the file at ``path`` as :func:`whole_texts` yields it: ``[text]``, or ``[]`` when nothing is left.

    Every ``\\r`` is replaced by ``cr``, then one final ``\\n`` dropped.  A file whose size is no longer
    ``size`` fails the run with an error that names it and says :data:`RESIZED`.
    """
    data = tf.io.read_file(path)
    same = tf.debugging.Assert(tf.equal(tf.strings.length(data, unit="BYTE"), tf.cast(size, tf.int32)), [path, RESIZED])
    with tf.control_dependencies([same]):
        text = tf.strings.regex_replace(data, "\r", cr)
    n = tf.strings.length(text)
    newline = tf.cast(tf.equal(tf.strings.substr(text, tf.maximum(n - 1, 0), 1), "\n"), tf.int32)
    return tf.reshape(tf.strings.substr(text, 0, n - newline), [1])[: tf.cast(n > 0, tf.int32)]


def whole_texts(paths: Sequence[str], sizes: Sequence[int], cr: str = "") -> tf.data.Dataset:
    """The text of small files as :func:`text_blocks` yields it, one pipeline for them all: each file as one string.

    Each file is read whole (``tf.io.read_file``), every ``\\r`` replaced by ``cr`` (dropped by default)
    and then one final ``\\n`` dropped; a file with no byte left then yields nothing, and one of ``sizes``
    0 is not read.  A file whose size is no longer its ``sizes`` fails the run with an error that names
    it and says :data:`RESIZED`.

    Example:
        files holding ``a\\r\\nb\\n``, nothing, ``\\n`` and ``c`` yield ``["a\\nb"]``, ``[""]`` and ``["c"]``.
    """
    read = [(p, size) for p, size in zip(paths, sizes, strict=True) if size]
    files = (tf.constant([p for p, _ in read], tf.string), tf.constant([size for _, size in read], tf.int32))
    dataset = tf.data.Dataset.from_tensor_slices(files).map(lambda path, size: whole_text(path, size, cr))
    return dataset.filter(lambda text: tf.size(text) > 0)
