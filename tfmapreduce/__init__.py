"""tfmapreduce: map/reduce over the tasks and devices of a TensorFlow cluster.

The public names are imported lazily: ``import tfmapreduce`` (and the
``tfmapreduce`` command's ``--help``) does not import TensorFlow; the first use
of a name that needs it does, with TensorFlow's start-up lines silenced.  Their
one list is the stub ``__init__.pyi`` beside this file, which type checkers read.
"""

import ast as _ast
import importlib as _importlib
import pathlib as _pathlib

from ._version import __version__ as __version__


def _exports() -> dict[str, str]:
    """Each public name and the private module that defines it ("" for a public submodule), read from the stub."""
    tree = _ast.parse((_pathlib.Path(__file__).parent / "__init__.pyi").read_text())
    return {
        alias.asname or alias.name: node.module.lstrip(".") if node.module else ""
        for node in tree.body
        if isinstance(node, _ast.ImportFrom)
        for alias in node.names
        if alias.name != "__version__"
    }


_EXPORTS = _exports()

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfmapreduce' has no attribute {name!r}")
    from ._base.quiet import import_tensorflow

    import_tensorflow()
    value: object = _importlib.import_module(f".{module or name}", __name__)
    if module:
        value = getattr(value, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
