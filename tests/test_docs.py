"""The documentation cannot rot: the site builds strictly, and every Python block in the docs runs.

Convention for Python code blocks in ``README.md`` and ``docs/*.md`` (also stated in
``docs/index.md``, "About the examples"):

- Every fenced block whose language is ``python`` (or ``py``) runs; other languages (``sh``,
  ``yaml``, ``text``, ...) are shown only.
- The blocks of one page run in order, in one namespace, like cells of a notebook: a later
  block sees the names an earlier one defined.  Pages do not share namespaces.
- The name ``cluster`` is bound, before a page's first block, to the suite's session cluster
  (the ``cluster`` fixture of ``tests/conftest.py``: 2 workers of job ``local``, 2 CPU devices
  each).  A page may instead start its own ``tmr.LocalCluster`` (and rebind the name).
- A block that cannot run here (other machines' host names, a GPU) carries the HTML comment
  ``<!-- no-run: reason -->`` on the line right before its fence; the reason is required, and
  the blocks are counted (``test_no_run_blocks`` prints them).
- Results are stated with ``assert`` (or printed): a failing block, or a failing assertion,
  fails the page's test with the traceback pointing at the Markdown line.
- A page must leave nothing running: a cluster it starts is closed by its ``with`` block or
  an explicit ``close()``, resident data by ``with`` or ``delete()``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)[^`]*$")
NO_RUN = re.compile(r"^\s*<!--\s*no-run\s*:\s*(?P<reason>.*?)\s*-->\s*$")
NO_RUN_LOOSE = re.compile(r"^\s*<!--\s*no-run\b")
PYTHON = {"python", "py", "python3", "pycon"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # 1-based line of the first code line in the page
    language: str
    code: str
    no_run: str | None  # the reason, or None when the block runs


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with their no-run markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if NO_RUN_LOOSE.search(lines[i]) and not NO_RUN.match(lines[i]):
                raise AssertionError(f"{page}:{i + 1}: malformed marker {lines[i].strip()!r}; write <!-- no-run: reason -->")
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        marker = NO_RUN.match(lines[i - 1]) if i > 0 else None
        start = i + 1
        end = start
        while end < len(lines) and not re.match(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[end]):
            end += 1
        body = [line[indent:] if line[:indent].isspace() else line for line in lines[start:end]]
        found.append(Block(page, start + 1, m["info"].lower(), "\n".join(body) + "\n", marker["reason"] if marker else None))
        i = end + 1
    return found


def python_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.language in PYTHON]


PAGES_WITH_CODE = [p for p in PAGES if any(b.no_run is None for b in python_blocks(p))]


def test_collector_finds_the_examples() -> None:
    """Guards the collector itself: if it stopped finding blocks, every page would pass vacuously."""
    readme = python_blocks(ROOT / "README.md")
    assert readme, "README.md has Python examples; the collector found none"
    assert len(PAGES_WITH_CODE) >= 5, [p.name for p in PAGES_WITH_CODE]
    for path in PAGES:
        for block in blocks(path):
            if block.no_run is not None:
                assert block.language in PYTHON, f"{block.page}:{block.line}: a no-run marker only applies to a python block"
                assert block.no_run, f"{block.page}:{block.line}: a no-run marker needs a reason"


def test_no_run_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """Counts the blocks marked ``<!-- no-run: reason -->``, page by page (run with -s to see them)."""
    skipped = [b for p in PAGES for b in python_blocks(p) if b.no_run is not None]
    total = sum(len(python_blocks(p)) for p in PAGES)
    with capsys.disabled():
        print(f"\n{total - len(skipped)} of {total} Python blocks run; {len(skipped)} marked no-run:")
        for b in skipped:
            print(f"  {b.page}:{b.line}: {b.no_run}")
    # Most examples must run: a no-run block is the exception, not the way out of a failing test.
    assert len(skipped) <= total // 4, f"{len(skipped)} of {total} Python blocks are marked no-run"


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES_WITH_CODE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_examples_run(path: Path, request: pytest.FixtureRequest) -> None:
    """Run a page's Python blocks in order in one namespace, ``cluster`` bound to the session cluster."""
    namespace: dict[str, object] = {"__name__": "__docs__"}
    runnable = [b for b in python_blocks(path) if b.no_run is None]
    if any(re.search(r"\bcluster\b", b.code) for b in runnable):
        namespace["cluster"] = request.getfixturevalue("cluster")
    for block in runnable:
        # Pad with blank lines so a traceback names the block's line in the Markdown page.
        code = compile("\n" * (block.line - 1) + block.code, str(ROOT / block.page), "exec")
        try:
            exec(code, namespace)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            pytest.fail(f"the example at {block.page}:{block.line} failed: {type(e).__name__}: {e}\n\n{block.code}", pytrace=True)


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict`` passes: no broken link, no missing reference, no docstring warning."""
    missing = [
        m
        for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
        if importlib.util.find_spec(m.split(".")[0]) is None
    ]
    if missing:
        pytest.skip(f"the docs toolchain is not installed ({', '.join(missing)}); pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}", pytrace=False)
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "index.html").exists()
