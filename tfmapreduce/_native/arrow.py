"""Where the Arrow and Parquet C++ libraries and headers of the installed pyarrow wheel are, and the compiler flags
the native families need beyond TensorFlow's (the parquet family builds against them)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path


@functools.cache
def pyarrow_folder() -> Path | None:
    """The folder of the installed pyarrow package (its ``include/`` and libraries), found without importing it; None
    where it is not installed."""
    spec = importlib.util.find_spec("pyarrow")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder if (folder / "include" / "parquet").is_dir() else None


def extra(family: str) -> list[str] | None:
    """The flags ``family`` needs beyond TensorFlow's (after them: the last ``-std`` wins); None where it cannot be
    built here (the parquet family without pyarrow)."""
    if family != "parquet":
        return []
    folder = pyarrow_folder()
    if folder is None:
        return None
    libraries = [f"-l:{lib.name}" for name in ("arrow", "parquet") for lib in sorted(folder.glob(f"lib{name}.so.*"))[:1]]
    if len(libraries) != 2:
        return None
    return ["-std=c++20", f"-I{folder / 'include'}", f"-L{folder}", *libraries, f"-Wl,-rpath,{folder}"]
