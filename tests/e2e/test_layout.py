"""The package's shape: layers as packages that state their role, one concern per module, no name defined twice."""

from __future__ import annotations

import ast
import importlib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "tfmapreduce"
PACKAGES = sorted(p.parent for p in ROOT.rglob("__init__.py") if p.parent != ROOT)
MODULES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_package_states_its_role(package: Path) -> None:
    name = ".".join(("tfmapreduce", *package.relative_to(ROOT).parts))
    doc = importlib.import_module(name).__doc__
    assert doc, f"{name}/__init__.py needs a docstring saying what the package holds"
    assert len(doc.split()) >= 8, doc


def test_no_module_is_over_400_lines_and_no_native_source_over_700() -> None:
    long = {str(p.relative_to(ROOT)): n for p in MODULES if (n := len(p.read_text().splitlines())) > 400}
    native = [p for p in (ROOT / "_native").iterdir() if p.suffix in (".cc", ".h")]
    long |= {str(p.relative_to(ROOT)): n for p in native if (n := len(p.read_text().splitlines())) > 700}
    assert not long, f"split these by concern: {long}"


def test_no_class_name_is_defined_twice() -> None:
    names = Counter(node.name for path in MODULES for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef))
    assert not [n for n, count in names.items() if count > 1]


def test_the_root_holds_the_packages_and_a_dozen_files_at_most() -> None:
    files = [p for p in ROOT.iterdir() if p.is_file()]
    assert len(files) <= 12, sorted(p.name for p in files)
    assert {"_base", "_native", "_cluster", "_ops", "_io", "_engine", "_kinds", "recipes", "_cli"} <= {p.name for p in PACKAGES}
