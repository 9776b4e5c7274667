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

The site itself is built once per session (``mkdocs build --strict``, skipped without the
``docs`` extra), and its API pages (``docs/api*.md``, one per public namespace) are checked:
docstring examples render as code (a Google-style ``Examples:`` section, never a blockquote),
cross-references are links (``[name][tfmapreduce.X]``, no raw Sphinx role), and every public
name has an entry with a formatted signature.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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
def test_page_examples_run(path: Path, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a page's Python blocks in order in one namespace, ``cluster`` bound to the session cluster; the folders an
    example makes with ``tempfile`` and leaves for its reader are made in the test's ``tmp_path``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
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


# One build of the site per test session (about 6 s on the 2-core test machine), shared by the tests below.
DOCS_TOOLCHAIN = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
API_PAGES = sorted((ROOT / "docs").glob("api*.md"))  # one page per public namespace
API_MODULES = ("tfmapreduce", "tfmapreduce.recipes", "tfmapreduce.combiners")
ROLE = re.compile(r":(?:meth|func|class|attr|mod|data|exc|obj):(?:`|<code>)")
HEADING = re.compile(r'<h(?P<level>[1-6]) id="(?P<id>[^"]+)" class="doc doc-heading"')
SIGNATURE = re.compile(r'<div class="doc-signature highlight"><pre>(?P<code>.*?)</pre></div>', re.S)


@dataclass(frozen=True)
class Site:
    path: Path
    seconds: float


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """The site built once by ``mkdocs build --strict`` (skips when the docs toolchain is not installed)."""
    missing = [m for m in DOCS_TOOLCHAIN if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        pytest.skip(f"the docs toolchain is not installed ({', '.join(missing)}); pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}", pytrace=False)
    return Site(out, time.perf_counter() - start)


def api_html(site: Site) -> dict[str, str]:
    """Each API page's HTML, by its Markdown name."""
    return {page.name: (site.path / page.stem / "index.html").read_text(encoding="utf-8") for page in API_PAGES}


def test_mkdocs_build_strict(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    """``mkdocs build --strict`` passes: no broken link, no missing reference, no docstring warning."""
    with capsys.disabled():
        print(f"\nmkdocs build --strict: {site.seconds:.1f} s")
    assert (site.path / "index.html").exists()
    assert [p.name for p in API_PAGES] == ["api-combiners.md", "api-recipes.md", "api.md"]
    for page in API_PAGES:
        assert (site.path / page.stem / "index.html").exists(), page.name


def test_api_examples_render_as_code(site: Site) -> None:
    """A docstring example (``>>>``) is a highlighted code block, not Markdown: no ``<blockquote>``.

    Griffe reads a Google-style ``Examples:`` section as doctest code; under any other title
    (``Example:``, ``Usage:``) the ``>>>`` lines are Markdown and render as nested blockquotes.
    """
    for name, html_text in api_html(site).items():
        quotes = [m.start() for m in re.finditer(r"<blockquote", html_text)]
        assert not quotes, (
            f"{name}: {len(quotes)} <blockquote> (a docstring example under a title other than 'Examples:'?) near: "
            + " ".join(html.unescape(re.sub(r"<[^>]+>", " ", html_text[quotes[0] : quotes[0] + 600])).split())[:160]
        )
        prompts = len(re.findall(r'<span class="gp">&gt;&gt;&gt; </span>', html_text))
        assert prompts, f"{name}: no highlighted docstring example at all"


def test_api_has_no_sphinx_roles(site: Site) -> None:
    """Cross-references are mkdocstrings' ``[name][tfmapreduce.X]``: no raw ``:meth:`` / ``:func:`` / ``:class:`` / ``:attr:``."""
    for name, html_text in api_html(site).items():
        raw = [html.unescape(re.sub(r"<[^>]+>", "", html_text[m.start() : m.start() + 60])) for m in ROLE.finditer(html_text)]
        assert not raw, f"{name}: {len(raw)} raw Sphinx roles, e.g. {raw[:5]}"


def rendered(html_text: str) -> dict[str, list[str]]:
    """Each documented object's anchor and the lines of its rendered signature (empty: none)."""
    headings = list(HEADING.finditer(html_text))
    found: dict[str, list[str]] = {}
    for heading, after in zip(headings, [*headings[1:], None], strict=True):
        body = html_text[heading.end() : after.start() if after else len(html_text)]
        signature = SIGNATURE.search(body)
        found[heading["id"]] = html.unescape(re.sub(r"<[^>]+>", "", signature["code"])).splitlines() if signature else []
    return found


def test_every_public_name_has_a_signature(site: Site) -> None:
    """Every public name of tfmapreduce, tfmapreduce.recipes and tfmapreduce.combiners is on an API page, with its
    signature, formatted to mkdocs.yml's ``line_length`` (Ruff or Black must be installed for that).

    A name that is the same object as another documented one (``tmr.var`` is ``tmr.variance``;
    ``tmr.recipes.mean`` is ``tmr.mean``) is covered by that entry; a second top-level name for it must
    be mentioned on the page (``tfmapreduce.var``).  An exception class without an ``__init__`` of its own
    shows none (it takes a message, as its built-in base does).
    """
    import tfmapreduce

    pages = api_html(site)
    entries: dict[str, list[str]] = {}
    for html_text in pages.values():
        entries.update(rendered(html_text))
    text = "\n".join(html.unescape(re.sub(r"<[^>]+>", "", t)) for t in pages.values())
    width = int(re.search(r"^\s*line_length:\s*(\d+)", (ROOT / "mkdocs.yml").read_text(), re.M)[1])  # type: ignore[index]

    documented = {id(value): path for path in entries for value in [resolve(path)] if value is not None}
    missing, unsigned, unformatted = [], [], []
    for module in API_MODULES:
        namespace = importlib.import_module(module)
        for name in namespace.__all__:
            value, path = getattr(namespace, name), f"{module}.{name}"
            if value in (tfmapreduce.recipes, tfmapreduce.combiners):
                continue
            if path not in entries:
                other = documented.get(id(value))
                if other is None or (module == "tfmapreduce" and path not in text):
                    missing.append(path)
                continue
            lines = entries[path]
            if not lines and not (isinstance(value, type) and issubclass(value, BaseException) and "__init__" not in vars(value)):
                unsigned.append(path)  # (an exception without its own __init__ takes a message, as its built-in base)
            elif len(lines) == 1 and len(lines[0]) > width:
                unformatted.append(f"{path} ({len(lines[0])} characters on one line)")
    assert not missing, f"public names with no entry on an API page (add '::: NAME' to docs/api*.md): {missing}"
    assert not unsigned, f"public names rendered without a signature: {unsigned}"
    assert not unformatted, f"signatures not formatted to {width} columns (install ruff or black): {unformatted}"


def resolve(path: str) -> object | None:
    """The object at a dotted public path such as ``tfmapreduce.MapReduce.run`` (None for an anchor that is not one)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for part in parts[i:]:
                value = getattr(value, part)
        except AttributeError:
            return None
        return value
    return None
