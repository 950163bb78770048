"""The documentation: the Sphinx site builds with warnings as errors, and every example in it runs.

Examples are the fenced ``sh`` and ``python`` blocks of README.md and of every page under
docs/ but the results pages (whose commands record how a figure was made). They run in two chains of pages
(``chains``), each in page order in a scratch folder of its own, so a page may use what its chain's first page
made (the trace ``traces/mlp``). ``sh`` blocks run in bash with ``-euo pipefail`` and the project's
``.venv/bin`` first on PATH; ``python`` blocks run in this process, each page in a
namespace of its own. A ``text output`` block right after an example is what it prints:
each of its lines must appear, in order, in the example's output (``...`` lines stand
for anything). An example that cannot run in the test suite (a make target, minutes of
synthesis) carries a comment line ``<!-- not-run: REASON -->`` right above its fence.
"""

import contextlib
import dataclasses
import io
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN = ("sh", "python")
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
EXAMPLE_TIMEOUT = 120  # seconds per sh example


@dataclasses.dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    flags: tuple
    code: str
    skip: str = None  # the stated reason it is not run
    expected: str = None  # the text output block that follows it

    @property
    def where(self):
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def parse_blocks(path, text=None):
    """The fenced blocks of a Markdown file, each with its not-run reason and the output block after it."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks, i, pending_skip = [], 0, None
    while i < len(lines):
        line = lines[i]
        skip = NOT_RUN.match(line.strip())
        if skip:
            pending_skip = skip["reason"]
            i += 1
            continue
        fence = FENCE.match(line.strip()) if not line.startswith("    ") else None
        if fence is None:
            if line.strip():
                pending_skip = None
            i += 1
            continue
        opening, info = fence["fence"], fence["info"].split()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(opening):
            body.append(lines[j])
            j += 1
        language = info[0] if info else ""
        block = Block(path, i + 1, language, tuple(info[1:]), "\n".join(body) + "\n", pending_skip)
        if language == "text" and "output" in block.flags and blocks and blocks[-1].language in RUN \
                and blocks[-1].end == i:
            blocks[-1].expected = block.code
        blocks.append(block)
        block.end = _next_content(lines, j + 1)
        pending_skip = None
        i = j + 1
    return blocks


def _next_content(lines, start):
    """The index of the first non-blank line from ``start`` (where an output block would open)."""
    while start < len(lines) and not lines[start].strip():
        start += 1
    return start


def doc_pages():
    """README first, then the tutorial, then every other page by path. Results pages are left out: their commands
    are the record of how a figure was made (minutes to hours of synthesis, mapping or training), not examples."""
    pages = sorted(DOCS.rglob("*.md"))
    pages = [p for p in pages if not {"_build", "_generated", "results"} & set(p.relative_to(DOCS).parts)]
    tutorial = DOCS / "tutorial.md"
    return [ROOT / "README.md", *([tutorial] if tutorial in pages else []), *(p for p in pages if p != tutorial)]


def chains():
    """The pages in two chains, each run in a folder of its own: one opens with the README, the other with the
    tutorial, both of which record ``traces/mlp``, which later pages use."""
    readme, tutorial, *rest = doc_pages()
    return {"readme": [readme, *rest[0::2]], "tutorial": [tutorial, *rest[1::2]]}


def examples(pages=None):
    return [block for page in (pages or doc_pages()) for block in parse_blocks(page) if block.language in RUN]


def check_output(block, output):
    """Every line of the block's shown output appears, in order, in what it printed (``...``: anything)."""
    if block.expected is None:
        return
    normal = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for want in block.expected.splitlines():
        want = " ".join(want.split())
        if not want or want == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        for k in range(at, len(normal)):
            if pattern.search(normal[k]):
                at = k + 1
                break
        else:
            raise AssertionError(f"{block.where}: the output shown in the docs has {want!r}, which the example did "
                                 f"not print in that order; it printed:\n{output}")


def run_example(block, cwd, namespaces):
    """Run one example in ``cwd``; AssertionError naming the file and line if it fails."""
    if block.language == "sh":
        env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               "MPLBACKEND": "Agg", "COLUMNS": "100"}
        try:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=cwd, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=EXAMPLE_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{block.where}: the example ran past {EXAMPLE_TIMEOUT} s; make it smaller or mark "
                                 "it <!-- not-run: REASON -->") from None
        if done.returncode:
            raise AssertionError(f"{block.where}: the example exited with status {done.returncode}:\n"
                                 f"{block.code}\n{done.stdout}")
        check_output(block, done.stdout)
        return
    namespace = namespaces.setdefault(block.path, {"__name__": "__docs__"})
    buffer = io.StringIO()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(buffer):
            exec(compile(block.code, block.where, "exec"), namespace)
    except Exception as error:
        raise AssertionError(f"{block.where}: the example raised {type(error).__name__}: {error}\n"
                             f"{block.code}\n{buffer.getvalue()}") from error
    finally:
        os.chdir(previous)
    check_output(block, buffer.getvalue())


def run_examples(blocks, cwd):
    """Run every block not marked not-run, in order, in ``cwd``; the number run."""
    for name in ("examples", "bench"):
        if not (cwd / name).exists():
            (cwd / name).symlink_to(ROOT / name)
    namespaces, count = {}, 0
    for block in blocks:
        if block.skip is None:
            start = time.process_time(), _children_cpu()
            run_example(block, cwd, namespaces)
            spent = time.process_time() - start[0] + _children_cpu() - start[1]
            if os.environ.get("DOCS_EXAMPLE_TIMES"):
                print(f"{spent:6.1f} CPU s  {block.where}")
            count += 1
    return count


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sphinx_build(source, out, *extra):
    """``make docs``' build: fresh environment, warnings as errors, every reference checked."""
    return subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-n", "-q", "-b", "html",
                           *extra, str(source), str(out)], cwd=ROOT, text=True, capture_output=True)


def test_site_builds_with_warnings_as_errors(tmp_path):
    done = sphinx_build(DOCS, tmp_path / "html")
    assert done.returncode == 0, f"the docs do not build (make docs):\n{done.stdout}{done.stderr}"
    assert (tmp_path / "html" / "spec.html").is_file()


@pytest.mark.real_area
@pytest.mark.early(seconds=240)  # 2-5 minutes here: the packaged tiles' synthesis
def test_every_example_runs(tmp_path):
    """Both chains, one after the other, on one area cache: the first ``map`` of the packaged configuration (the
    README's and the tutorial's, ``--design tensordash``) synthesises its tiles' area, minutes on 2 cores, over
    the example timeout; the test makes it first, as that map does (``silicon.resolve_all``), once for both."""
    from dashraker.mapping import silicon
    from dashraker.mapping.config import load_config

    areas = tmp_path / "area"
    silicon.resolve_all([load_config(design="tensordash")], areas, progress=False)
    for chain, pages in chains().items():
        folder = tmp_path / chain
        (folder / "build").mkdir(parents=True)
        (folder / "build" / "area").symlink_to(areas)
        blocks = examples(pages)
        count = run_examples(blocks, folder)
        assert count >= 10, f"{chain}: only {count} examples ran"
        print(f"{chain}: {count} examples ran, {sum(b.skip is not None for b in blocks)} marked not-run")


def test_the_chains_hold_every_page():
    pages = [page for chain in chains().values() for page in chain]
    assert sorted(pages) == sorted(doc_pages()) and len(set(pages)) == len(pages)


def test_every_spec_section_the_code_cites_is_in_the_docs():
    """Each "SPEC section N" (or "sections N-M, K") in the code names a heading of docs/spec.md."""
    anchors = set(re.findall(r"^\(spec-section-([0-9a-z]+)\)=$", (DOCS / "spec.md").read_text(), re.M))
    cited = set()
    for path in ROOT.glob("*/**/*.py"):
        if {".venv", "docs", "build"} & set(path.relative_to(ROOT).parts):
            continue
        for match in re.finditer(r"SPEC sections? ([0-9][0-9a-z]*(?:(?:-|, | and )[0-9][0-9a-z]*)*)", path.read_text()):
            for part in re.split(r", | and ", match[1]):
                first, _, last = part.partition("-")
                if last:
                    cited.update(str(n) for n in range(int(first), int(last) + 1))
                else:
                    cited.add(first)
    assert cited, "no citation found: the pattern no longer matches the code's"
    assert cited <= anchors, f"SPEC sections cited in the code with no heading in docs/spec.md: {sorted(cited - anchors)}"


# The checks above must be able to fail: a broken example, a wrong output and a broken reference.

def test_a_failing_example_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# P\n\n```sh\ndashraker verilog nosuchdesign --out x.v\n```\n")
    with pytest.raises(AssertionError, match=r"page.md:3: the example exited with status 2"):
        run_examples(examples([page]), tmp_path)


def test_wrong_shown_output_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# P\n\n```python\nprint('one')\n```\n\n```text output\ntwo\n```\n\n"
                    "<!-- not-run: shown only -->\n```sh\nfalse\n```\n")
    blocks = examples([page])
    assert [b.skip for b in blocks] == [None, "shown only"]
    with pytest.raises(AssertionError, match="has 'two'"):
        run_examples(blocks, tmp_path)


def test_a_broken_reference_fails_the_build(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    (source / "_ext").symlink_to(DOCS / "_ext")
    (source / "index.md").write_text("# Index\n\nSee [the guide](guides/missing.md) and {py:func}`dashraker.nothing`.\n")
    (source / "api.md").write_text("# API\n")
    # the project's configuration, less the table generator (its imports take seconds; nothing here includes it)
    done = sphinx_build(source, tmp_path / "html", "-D", "extensions=myst_parser,sphinx.ext.autodoc")
    assert done.returncode != 0
    assert "guides/missing.md" in done.stderr and "dashraker.nothing" in done.stderr
