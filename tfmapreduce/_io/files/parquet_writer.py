"""Parquet part files: each shard's columns encoded as one Parquet file on its task by the native
``TmrEncodeParquet`` (the Arrow C++ writer), then written under the writers' commit protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
import tensorflow as tf

from ..._native.loader import has, kernels
from .encode import WholeFile
from .parquet import INSTALL


@attrs.frozen
class ParquetWriter(WholeFile):
    """One Parquet file per part: the columns ``names`` of logical types ``kinds`` (as a table's schema names them),
    fed as each column's values then each column's validity; a column is nullable where ``nullable`` says so."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    nullable: tuple[bool, ...]
    name: ClassVar[str] = "write_parquet"
    reader: ClassVar[str] = "scan_parquet"
    ext: ClassVar[str] = ".parquet"

    def check(self, dtypes: Sequence[np.dtype[Any]], shapes: Sequence[tuple[int, ...]]) -> None:
        if len(dtypes) != 2 * len(self.names) or any(len(s) != 1 for s in shapes):
            raise TypeError(f"write_parquet: expected a value and a validity vector for each of {list(self.names)}")
        if not has(kernels(), "tmr_encode_parquet"):
            raise RuntimeError(
                "write_parquet: the native Parquet kernels are not available here (they need pyarrow and a C++ compiler, "
                f"and TFMAPREDUCE_NATIVE must not be 0; {INSTALL})"
            )

    def encode(self, tensors: Sequence[tf.Tensor], rows: int) -> tf.Tensor:
        n = len(self.names)
        native = kernels()
        if not has(native, "tmr_encode_parquet"):  # checked on the client (check); here for the type checker
            raise RuntimeError(f"write_parquet: the native Parquet kernels are not available here ({INSTALL})")
        return native.tmr_encode_parquet(
            list(tensors[:n]), list(tensors[n:]), names=list(self.names), kinds=list(self.kinds), nullable=list(self.nullable)
        )
