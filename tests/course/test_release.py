"""The notebooks students get (``course/release/``), tested as students run them.

- **They run.** Every released chapter runs top to bottom in the students' environment (the instructors'
  JupyterHub recipe, the ``students`` fixture of tests/course/students.py: a venv from ``requirements.txt`` alone)
  as an ordinary user: root without its DAC override (``setpriv``; the Python here is a pyenv build in
  root's home, which no other account can run), so the environment, made read-only for the run, cannot
  be written, and the notebooks are the student's own copies in a folder of their own, as is HOME. No cell
  outside the exercises may fail; an unanswered exercise raises ``NotImplementedError``.
- **Every number is in place.** For every ``{glue}`` role in ``book/``, the release has a text, and it reads as
  what the website built here shows and as what a student's own run computes, to one unit of its last digit
  (the release was made on another machine: tests/course/drift.py).
- **No MyST is left**: no role, target or directive; cross-references are links to the website's section,
  whose page and anchor exist in the built site.
- **One repository URL**: ``_config.yml``'s ``repository: url:`` is the one in every install line, clone
  command and launch button (attncourse/repository.py stamps it with ``make student``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from attncourse import quick_checks
from attncourse import repository as site
from attncourse.markup import CITE, EQ_REF, FENCE, GLUE, LABELLED, format_glued, glued_values
from tests import browser_utils as bu
from tests.course import drift
from tools import testsettings

RELEASE = bu.REPO / "course" / "release"
BOOK = bu.REPO / "book"
SITE = Path(os.environ.get("ATTNLIB_SITE_HTML", bu.REPO / "_build" / "html"))
CHAPTERS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
RUNNER = Path(__file__).with_name("release_runner.py")
AS_A_USER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]  # root, minus reading/writing anything
# MyST that plain Markdown does not render: a role, a target line, a directive fence
MYST = re.compile(r"\{[\w:-]+\}`|^\([\w-]+\)=\s*$|^(```+|:::+)\s*\{", re.M)


CODE_SPAN = re.compile(r"(`+)[^`]*?\1")  # inline code in Markdown


def read(path: Path):
    return nbformat.read(path, as_version=4)


def is_exercise(cell) -> bool:
    """An nbgrader answer or test cell: where an unanswered exercise may fail."""
    grading = cell.metadata.get("nbgrader", {})
    return bool(grading.get("solution") or grading.get("grade"))


# --- the releases run as a student runs them -------------------------------------------------------------

@contextmanager
def read_only(*folders: Path):
    """The folders without write permission while the block runs (an ordinary user's view of /opt)."""
    for folder in folders:
        subprocess.run(["chmod", "-R", "a-w", str(folder)], check=True)
    try:
        yield
    finally:
        for folder in folders:
            subprocess.run(["chmod", "-R", "u+w", str(folder)], check=True)


def student_env(students: dict, home: Path) -> dict:
    """The student's environment: one thread, and torch's plain CPU code path (tools/testsettings.py's
    ``STUDENT_RUN``: the build computes on the widest), so the chapters' claims are checked on another path."""
    env = dict(students["env"], HOME=str(home), PATH=f"{students['python'].parent}{os.pathsep}{os.environ['PATH']}",
               **testsettings.ONE_THREAD, **testsettings.STUDENT_RUN)
    env.pop("JUPYTER_PATH", None)
    env.pop("PYTHONPATH", None)
    return env


def as_student(students: dict, home: Path, args: list[str], cwd: Path, timeout: int = 900):
    return subprocess.run([*AS_A_USER, str(students["python"]), *args], cwd=cwd, env=student_env(students, home),
                          capture_output=True, text=True, timeout=timeout, check=False)


def run_chapter(students: dict, home: Path, notebook: Path) -> dict:
    done = as_student(students, home, [str(RUNNER), str(notebook)], cwd=notebook.parent)
    if done.returncode != 0:
        return {"seconds": None, "errors": [], "failed": f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def student_runs(students, tmp_path_factory) -> dict:
    """Every released chapter of the recipe's clone, run in the student's own folder: {stem: result}."""
    work, home = tmp_path_factory.mktemp("student-work"), tmp_path_factory.mktemp("student-home")
    released = sorted((students["clone"] / "course" / "release").glob("*.ipynb"))
    notebooks = [Path(shutil.copy(p, work / p.name)) for p in released]
    environment = students["python"].parents[1]
    started = time.perf_counter()
    with read_only(environment, students["clone"]):
        probe = as_student(students, home, ["-c", PROBE, str(environment), str(work)], cwd=work)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            results = dict(zip([p.stem for p in notebooks],
                               pool.map(lambda p: run_chapter(students, home, p), notebooks), strict=True))
    return {"results": results, "probe": probe, "seconds": time.perf_counter() - started, "work": work}


PROBE = """
import pathlib, sys
env, work = map(pathlib.Path, sys.argv[1:])
try:
    (env / "attnlib-probe").write_text("x")
    print("environment writable")
except PermissionError:
    print("environment read-only")
(work / "probe.txt").write_text("x")
print("work writable")
"""


def glued_outside_exercises(nb) -> dict[str, str]:
    """``{name: text}`` of the values the notebook's cells outside the exercises glued."""
    cells = [c for c in nb.cells if c.cell_type == "code" and not is_exercise(c)]
    return glued_values(nbformat.v4.new_notebook(cells=cells))


def misread_numbers(stem: str, computed: dict[str, str]) -> list[str]:
    """Where the release's prose shows a glued value otherwise than ``computed`` (``{name: stored text}``, as a
    run stores it) formats it, beyond one unit of the last digit (tests/course/drift.py)."""
    wrong = []
    for name, spec, shown in release_glue_roles(stem):
        if name in computed and drift.difference(shown, ours := format_glued(computed[name], spec)) is not None:
            wrong.append(f"{name}: the release says {shown!r}, the run computed {ours!r}")
    return wrong


def test_the_student_cannot_write_the_environment_but_can_write_their_folder(student_runs):
    probe = student_runs["probe"]
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.split() == ["environment", "read-only", "work", "writable"], probe.stdout


@pytest.mark.slow  # every chapter, in the students' venv (made first when requirements.txt changed)
def test_every_released_chapter_runs_as_a_student(student_runs, capsys):
    results = student_runs["results"]
    with capsys.disabled():
        times = ", ".join(f"{stem} {r['seconds']} s" for stem, r in sorted(results.items()))
        print(f"\nreleased chapters run as a student (setpriv without DAC override, {os.cpu_count()} at once, "
              f"{testsettings.STUDENT_RUN}): "
              f"{student_runs['seconds']:.0f} s wall; {times}")
    assert sorted(results) == [p.stem for p in CHAPTERS], "every chapter has a release"
    for stem, result in results.items():
        assert "failed" not in result, f"{stem}: the run did not finish: {result.get('failed')}"
        released = read(student_runs["work"] / f"{stem}.ipynb")
        outside = [e for e in result["errors"] if not is_exercise(released.cells[e["cell"]])]
        assert outside == [], f"{stem}: cells outside the exercises failed: {outside}"
        assert any(e["ename"] == "NotImplementedError" for e in result["errors"]), (
            f"{stem}: expected an unanswered exercise to raise NotImplementedError, got {result['errors']}")
        computed = glued_outside_exercises(released)
        assert misread_numbers(stem, computed) == [], (
            f"{stem}: run as a student (without myst-nb, {testsettings.STUDENT_RUN}), the chapter computes other "
            "numbers than its prose shows: show them at a precision every machine reproduces to one unit of the "
            "last digit (CONTRIBUTING.md)")


# --- every number in place, no MyST left ---------------------------------------------------------------

def _markdown(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "markdown"]


OTHER_MARKUP = (LABELLED, EQ_REF, CITE, re.compile(r"\]\([^)]*\)"))  # what the release rewrites besides glue


def _literal(text: str) -> str:
    """A regex for book text without glue: literal, except that rewritten markup matches any text."""
    for markup in OTHER_MARKUP:
        text = markup.sub("\0", text)
    return ".*?".join(re.escape(part) for part in text.split("\0"))


def _pattern(source: str) -> re.Pattern:
    """A regex matching the release's text of a book cell: each glue role captured."""
    pieces, at = [], 0
    for match in GLUE.finditer(source):
        pieces += [_literal(source[at:match.start()]), "(.*?)"]
        at = match.end()
    return re.compile("".join([*pieces, _literal(source[at:])]), re.S)


def _quick_checks_released(source: str) -> str:
    """A book cell with each quick check written as the release writes it (attncourse/markup.py), its glue roles
    kept.

    The check's number and a number check's answers (values the site keeps in the form, not in the text) match any
    text: a NUL, as ``_literal`` leaves for rewritten markup."""
    def one(match: re.Match) -> str:
        if match["name"] != "quiz":
            return match.group(0)
        options, body = quick_checks.split_options(match["body"])
        check = quick_checks.parse(match["arg"], body, options)
        shown = {c.text: "\0" for c in check.choices} if check.kind == "number" else None
        return quick_checks.plain_markdown(check, "\0", shown)
    return FENCE.sub(one, source)


def release_glue_roles(stem: str) -> list[tuple[str, str | None, str]]:
    """``(name, format, text)``: the release's text of every glue role of chapter ``stem`` outside answer cells,
    in order."""
    book, release = read(BOOK / f"{stem}.ipynb"), read(RELEASE / f"{stem}.ipynb")
    released = {c.id: c.source for c in _markdown(release)}
    roles = []
    for cell in _markdown(book):
        if not GLUE.search(cell.source) or is_exercise(cell):
            continue
        assert cell.id in released, f"{stem}: the release lost the cell {cell.id}"
        source = _quick_checks_released(cell.source)
        match = _pattern(source).fullmatch(released[cell.id])
        assert match, f"{stem}: the release's cell {cell.id} does not read as the book's:\n{released[cell.id]}"
        roles += [(role["name"], role["spec"], text) for role, text in zip(GLUE.finditer(source), match.groups(),
                                                                            strict=True)]
    return roles


def release_glue_texts(stem: str) -> list[str]:
    """The release's text of every glue role of chapter ``stem`` outside answer cells, in order."""
    return [text for _, _, text in release_glue_roles(stem)]


def site_glue_texts(stem: str) -> list[str]:
    """The text of every glued value on the chapter's page of the built website, in order."""
    page = SITE / "book" / f"{stem}.html"
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return [span.get_text() for span in soup.select("span.pasted-text, span.pasted-inline")]


@pytest.fixture(scope="module")
def built_site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"expected the built book in {SITE}, found no index.html: run `make book` first", pytrace=False)
    return SITE


@pytest.mark.built  # reads the built site
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_release_shows_every_number_the_website_shows(built_site, chapter):
    on_site, in_release = site_glue_texts(chapter.stem), release_glue_texts(chapter.stem)
    assert [t for t in on_site + in_release if not t.strip()] == [], (
        f"{chapter.stem}: empty glued values: site {on_site}, release {in_release}")
    assert len(in_release) == len(on_site), f"{chapter.stem}: {len(in_release)} numbers in the release, " \
        f"{len(on_site)} on the website"
    far = [(r, s) for r, s in zip(in_release, on_site, strict=True) if drift.difference(r, s) is not None]
    assert far == [], (f"{chapter.stem}: the release (made where `make student` ran) and the website built here "
                       f"show numbers further apart than one unit of their last digit: {far}")


def test_the_book_glues_numbers_into_its_prose():
    counted = {p.stem: len(release_glue_texts(p.stem)) for p in CHAPTERS}
    assert sum(counted.values()) > 0 and counted["02_scaling"] > 0, counted


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_myst_left_in_the_release(chapter):
    release = read(RELEASE / chapter.name)
    left = [m.group(0) for c in _markdown(release) for m in MYST.finditer(c.source)]
    assert left == [], f"{chapter.stem}: MyST left in the release: {left}"
    released = "|".join(re.escape(p.name) for p in sorted(RELEASE.glob("*.ipynb")))
    link = re.compile(rf"\]\((?!https?://|(?:{released})(?:#[^)]*)?\))[^)]*\)")
    # a link, not code that reads like one (chapter 10's `kernel[grid](...)`)
    broken = [m.group(0) for c in _markdown(release) for m in link.finditer(CODE_SPAN.sub("", c.source))]
    assert broken == [], f"{chapter.stem}: links only the book build resolves: {broken}"


@pytest.mark.built  # reads the built site
def test_cross_references_lead_to_the_sections_of_the_website(built_site):
    base = site.site_url()
    links = [m[1] for p in sorted(RELEASE.glob("*.ipynb")) for c in _markdown(read(p))
             for m in re.finditer(rf"\]\(({re.escape(base)}[^)\s]+)\)", c.source)]
    assert links, "expected the releases to link to pages of the website"
    for link in links:
        page, _, anchor = link.removeprefix(base).partition("#")
        html = built_site / page
        assert html.is_file(), f"{link}: no page {page} in the built site"
        assert not anchor or f'id="{anchor}"' in html.read_text(encoding="utf-8"), f"{link}: no section #{anchor}"
    assert any("#" in link for link in links), "expected a link to a section (02_scaling's correlated q and k)"


# --- one repository URL --------------------------------------------------------------------------------

def test_every_copy_of_the_repository_url_is_config_s():
    url = site.repository_url()
    found = {str(p.relative_to(bu.REPO)): site.copies("\n".join(c.source for c in read(p).cells))
             for p in [*sorted(BOOK.glob("*.ipynb")), *sorted(RELEASE.glob("*.ipynb"))]}
    found |= {name: site.copies((bu.REPO / name).read_text(encoding="utf-8")) for name in site.STAMPED_FILES}
    missing = sorted(name for name, urls in found.items() if not urls)
    assert missing == [], f"expected the repository URL in the setup cell or clone command of {missing}"
    wrong = {name: urls for name, urls in found.items() if set(urls) - {url}}
    assert wrong == {}, f"expected {url} (_config.yml), run `make student`: {wrong}"


@pytest.mark.built  # reads the built site
def test_launch_buttons_open_the_configured_repository(built_site):
    owner_name = site.GITHUB.match(site.repository_url())
    page = (built_site / "book" / f"{CHAPTERS[0].stem}.html").read_text(encoding="utf-8")
    colab = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page)
    binder = re.findall(r'href="(https://mybinder\.org/[^"]+)"', page)
    assert colab and binder, "expected Colab and Binder launch buttons on every chapter"
    expected = f"{owner_name['owner']}/{owner_name['name']}/"
    assert all(expected in link for link in colab + binder), (expected, colab, binder)


def test_stamp_writes_the_configured_url_everywhere(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/someone/fork\n")
    shutil.copy(CHAPTERS[0], tmp_path / "book" / CHAPTERS[0].name)
    for name in site.STAMPED_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(bu.REPO / name, tmp_path / name)
    changed = site.stamp(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in changed) == sorted(
        [f"book/{CHAPTERS[0].name}", *site.STAMPED_FILES])
    for path in changed:
        urls = site.copies(path.read_text(encoding="utf-8"))
        assert urls and set(urls) == {"https://github.com/someone/fork"}, (path, urls)
    assert site.site_url(tmp_path / "_config.yml") == "https://someone.github.io/fork/"
    assert site.stamp(tmp_path) == [], "a second stamp changes nothing"


# --- the install cell on Colab -------------------------------------------------------------------------

COLAB_LINE = re.compile(r"Colab runtime matched: (?P<versions>[^(]*)")
WHAT_ATTNLIB_NEEDS = """
import json, sys
from importlib.metadata import requires
from packaging.requirements import Requirement

def requirements(name, extras=()):
    for req in map(Requirement, requires(name) or []):
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            yield req

colab = json.loads(sys.argv[1])
top = list(requirements("attnlib", ("views", "models")))
found = [[str(r), r.specifier.contains(colab[r.name.lower()], prereleases=True)]
         for r in top + [x for t in top for x in requirements(t.name)] if r.name.lower() in colab]
print(json.dumps(found))
"""


def colab_versions() -> dict[str, str]:
    """``{package: version}`` of the Colab runtime the instructors' page says the book matches."""
    line = COLAB_LINE.search((BOOK / "instructors.md").read_text(encoding="utf-8"))
    assert line, "expected a line 'Colab runtime matched: torch 2.x, ...' on the instructors' page"
    return {name.lower(): version for name, version in re.findall(r"`([\w-]+) ([\w.+]+)`", line["versions"])}


def test_colabs_torch_transformers_and_numpy_satisfy_attnlib(students):
    colab = colab_versions()
    assert {"torch", "transformers", "numpy"} <= set(colab), colab
    done = subprocess.run([str(students["python"]), "-c", WHAT_ATTNLIB_NEEDS, json.dumps(colab)],
                          capture_output=True, text=True, check=True, env=students["env"])
    found = json.loads(done.stdout)
    assert any(spec.startswith("torch") for spec, _ in found), f"expected attnlib to require torch, got {found}"
    refused = [spec for spec, ok in found if not ok]
    assert refused == [], f"Colab's {colab} fails these requirements of attnlib[views,models]: {refused}"


def test_the_install_cell_keeps_the_torch_already_there(students, tmp_path):
    report = tmp_path / "report.json"
    install = re.search(r'"(attnlib\[[\w,]+\]) @ git\+', "\n".join(c.source for c in read(CHAPTERS[0]).cells))
    assert install, "expected the setup cell's install line, attnlib[...] @ git+URL"
    done = subprocess.run([str(students["python"]), "-m", "pip", "install", "--dry-run", "--quiet", "--report",
                           str(report), f"{install[1]} @ file://{students['clone']}"],
                          capture_output=True, text=True, timeout=600, check=False, env=students["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    names = [item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]]
    assert "attnlib" in names, names
    assert [n for n in names if n == "torch" or n.startswith("nvidia")] == [], f"pip would install {names}"


def test_markup_fills_hidden_glue_and_turns_references_into_links():
    from attncourse.markup import page_links, section_links, student_notebook  # noqa: PLC0415
    from attnlib.glue import HIDDEN_PREFIX  # noqa: PLC0415

    hidden = {"scrapbook": {"name": "n", "mime_prefix": HIDDEN_PREFIX}}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("glue('n', 20000, display=False); glue('r', '1/14')", outputs=[
            nbformat.v4.new_output("display_data", data={HIDDEN_PREFIX + "text/plain": "20000"}, metadata=hidden),
            nbformat.v4.new_output("display_data", data={"text/plain": "'1/14'"},
                                   metadata={"scrapbook": {"name": "r", "mime_prefix": ""}})]),
        nbformat.v4.new_markdown_cell("(sec-x)=\n## Title x\n\nFor {glue:text}`n:,d` samples, {glue:text}`r` of it; "
                                      "see [later](sec-x), {ref}`sec-x`, {ref}`here <sec-x>`, [intro](intro.md).")])
    url = lambda stem: f"https://site/book/{stem}.html"  # noqa: E731
    links = section_links({"02_two": nb}, url) | page_links(["intro.md"], url)
    text = student_notebook(nb, "02_two", {}, None, links).cells[1].source
    section = "https://site/book/02_two.html#sec-x"
    assert text == (f"## Title x\n\nFor 20,000 samples, 1/14 of it; see [later]({section}), [Title x]({section}), "
                    f"[here]({section}), [intro](https://site/book/intro.html).")
