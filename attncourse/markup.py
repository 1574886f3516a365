"""Student notebooks without book-only markup: what Jupyter Book renders, plain Markdown renders too.

The chapters are written for Jupyter Book (MyST): labelled equations ``$$ ... $$ (eq-x)``,
references {eq}`eq-x`, citations {cite}`ch7-key`, a ``{bibliography}`` directive and admonition
fences. JupyterLab without jupyterlab-myst, Colab and nbgrader's formgrader show those raw, so the
student release gets plain Markdown instead:

* a labelled equation gets MathJax's ``\\tag{N.k}`` (chapter N, k-th labelled equation), and every
  {eq}`eq-x` becomes ``(N.k)``, with a link to the chapter's notebook when it is another chapter's;
* {cite}`ch7-dao2022flashattention` becomes ``(Dao et al., 2022)``, and the ``{bibliography}``
  directive a plain list of the entries the notebook cites (from ``book/references.bib``);
* admonitions (```` ```{warning} ````, ``:::{note}``) become block quotes with their title in bold, whatever they
  hold (a code fence, another admonition: markdown-it reads the fences, so they nest);
* a quick check (```` ```{quiz} ````, ``attncourse/quick_checks.py``) becomes its question and choices, numbered
  as on the website, with the answer and every explanation in a collapsed ``<details>``;
* a glued number ({glue:text}`name:.2f`, myst-nb's ``glue``) becomes the value stored in the outputs,
  whatever MIME type it was stored under (``display=False`` prefixes it with
  ``application/papermill.record/``);
* a section's target ``(sec-x)=`` goes, and a cross-reference to it (``[text](sec-x)``, {ref}`sec-x`)
  becomes a link to that section of the published website (``site`` below, from ``_config.yml``);
* the saved widget state (``metadata.widgets``) is dropped: the outputs it belonged to are gone.
"""

from __future__ import annotations

import ast
import codecs
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import latexcodec  # noqa: F401 - registers the "ulatex" codec used by _plain
import nbformat
from markdown_it import MarkdownIt
from mdit_py_plugins.colon_fence import colon_fence_plugin
from pybtex.database import parse_file

from attncourse import quick_checks, repository
from attncourse.exercise_cells import chapter_number

LABELLED = re.compile(r"(\$\$)(?P<body>.*?)\$\$[ \t]*\((?P<label>eq-[\w-]+)\)", re.S)
EQ_REF = re.compile(r"\{eq\}`(?P<label>[^`]+)`")
CITE = re.compile(r"\{cite(?::\w+)?\}`(?P<keys>[^`]+)`")
GLUE = re.compile(r"\{glue(?::(?:text|md|any)?)?\}`(?P<name>[^`:]+)(?::(?P<spec>[^`]+))?`")
KEY_PREFIX = re.compile(r"^ch\d+-")
OPTION = re.compile(r"^:[\w-]+:.*$\n?", re.M)
DIRECTIVE = re.compile(r"^\{(?P<name>[\w-]+)\}[ \t]*(?P<arg>.*)$")  # a fence's info string: {note} A title
TARGET = re.compile(r"^\((?P<label>[\w-]+)\)=[ \t]*\n(?P<heading>#+[ \t]+(?P<title>.*))?", re.M)
REF = re.compile(r"\{ref\}`(?:(?P<text>[^`<]*?)\s*<(?P<label>[^`>]+)>|(?P<bare>[^`]+))`")


def equation_numbers(notebooks: dict[str, nbformat.NotebookNode]) -> dict[str, tuple[str, str]]:
    """``{label: (stem, "N.k")}`` for every labelled equation of every chapter, in order of appearance."""
    numbers = {}
    for stem, nb in notebooks.items():
        k = 0
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            for match in LABELLED.finditer(cell.source):
                k += 1
                numbers[match["label"]] = (stem, f"{chapter_number(stem)}.{k}")
    return numbers


def _plain(latex: str) -> str:
    """BibTeX field text as plain text: accents decoded, braces dropped (math between $ signs kept)."""
    parts = re.split(r"(\$[^$]*\$)", latex)
    text = "".join(p if p.startswith("$") else codecs.decode(p, "ulatex").replace("{", "").replace("}", "")
                   for p in parts)
    return " ".join(text.split())


class Bibliography:
    """Author-year citations and a plain reference list from a BibTeX file."""

    def __init__(self, bibfile: Path):
        self.entries = parse_file(str(bibfile)).entries

    def _entry(self, key: str):
        bare = KEY_PREFIX.sub("", key.strip())
        if bare not in self.entries:
            raise KeyError(f"expected citation key {bare!r} in references.bib, got no such entry")
        return self.entries[bare]

    def cite(self, key: str) -> str:
        """``Dao et al., 2022`` (one or two authors by name)."""
        entry = self._entry(key)
        last = [_plain(" ".join(p.last_names)) for p in entry.persons.get("author", [])]
        who = last[0] + (" et al." if len(last) > 2 else f" and {last[1]}" if len(last) == 2 else "")
        return f"{who}, {entry.fields.get('year', 'n.d.')}"

    def reference(self, key: str) -> str:
        """One reference: authors (year). Title. Venue."""
        entry = self._entry(key)
        authors = "; ".join(_plain(str(p)) for p in entry.persons.get("author", []))
        venue = entry.fields.get("booktitle") or entry.fields.get("journal") or ""
        text = f"{authors} ({entry.fields.get('year', 'n.d.')}). {_plain(entry.fields.get('title', ''))}."
        text += f" *{_plain(venue)}*." if venue else ""
        url = entry.fields.get("url") or (f"https://doi.org/{entry.fields['doi']}" if "doi" in entry.fields else "")
        return text + (f" <{url}>" if url else "")


def _eq_ref(label: str, stem: str, numbers: dict) -> str:
    if label not in numbers:
        raise KeyError(f"expected a labelled equation {label!r} in some chapter, got none")
    where, number = numbers[label]
    return f"({number})" if where == stem else f"([{number}]({where}.ipynb))"


@dataclass(frozen=True)
class Directive:
    """One directive fence of a Markdown text (```` ```{name} arg ```` or ``:::{name} arg``, any fence length), as
    markdown-it reads it; indexed like a regular expression's match (``d["name"]``, ``d["arg"]``, ``d["body"]``)."""

    name: str
    arg: str
    body: str  # the lines between the fences, as written (options and nested fences included)
    start: int  # where its first fence line starts in the text, and where its closing fence line ends
    end: int
    text: str  # the whole fence, as written

    def __getitem__(self, key: str) -> str:
        return getattr(self, key)

    def group(self, number: int = 0) -> str:
        return self.text


class DirectiveFences:
    """The directive fences at the top level of a Markdown text, found by markdown-it with myst-parser's own colon
    fence plugin (a fence in a directive's body, however deep, belongs to that body), with the interface of a regular
    expression: ``finditer`` and ``sub``. A fence indented inside a list item or a quote is left as it is."""

    parser = MarkdownIt("commonmark").use(colon_fence_plugin)

    def finditer(self, text: str) -> Iterator[Directive]:
        lines = text.splitlines(keepends=True)
        offsets = [0, *itertools.accumulate(len(line) for line in lines)]
        for token in self.parser.parse(text):
            found = DIRECTIVE.match(token.info.strip()) if token.type in ("fence", "colon_fence") else None
            start, end = token.map or (0, 0)
            if found and token.level == 0 and lines[start].startswith(token.markup):
                yield Directive(found["name"], found["arg"], token.content, offsets[start], offsets[end],
                                text[offsets[start]:offsets[end]])

    def sub(self, replace: Callable[[Directive], str], text: str) -> str:
        """``text`` with each top-level directive replaced by ``replace(directive)`` (its line ending kept)."""
        parts, at = [], 0
        for directive in self.finditer(text):
            ending = "\n" if directive.text.endswith("\n") else ""
            parts += [text[at:directive.start], replace(directive) + ending]
            at = directive.end
        return "".join([*parts, text[at:]])


FENCE = DirectiveFences()


def _quiz(match: Directive, glued: dict[str, str], numbers: itertools.count) -> str:
    options, body = quick_checks.split_options(match["body"])
    check = quick_checks.parse(match["arg"], body, options)
    shown = {}
    if check.kind == "number":
        for choice in check.choices:
            name, spec = quick_checks.number_key(choice)
            shown[choice.text] = _glue_value(name, spec, glued)
    return quick_checks.plain_markdown(check, next(numbers), shown)


def _admonition(match: Directive, bibliography_list: str, convert: Callable[[str], str]) -> str:
    """An admonition as a block quote (its nested directives converted first), the bibliography as its list."""
    name, arg, body = match["name"], match["arg"].strip(), convert(OPTION.sub("", match["body"])).strip()
    if name == "bibliography":
        return bibliography_list
    title = arg or name.capitalize()
    quoted = "\n".join(f"> {line}" if line else ">" for line in body.splitlines())
    return f"> **{title}**\n>\n{quoted}"


def cited_keys(nb) -> list[str]:
    """Every key the notebook cites, in order of first citation."""
    keys = [key.strip() for cell in nb.cells if cell.cell_type == "markdown"
            for match in CITE.finditer(cell.source) for key in match["keys"].split(",")]
    return list(dict.fromkeys(keys))


def _glued_text(data: dict, prefix: str) -> str:
    """The text of one glued value: its Markdown, else its plain text, under any MIME prefix."""
    bare = {mime.removeprefix(prefix): content for mime, content in data.items()}
    text = bare.get("text/markdown") or bare.get("text/plain", "")
    return "".join(text) if isinstance(text, list) else text


def glued_values(nb) -> dict[str, str]:
    """``{name: text}`` of every value the notebook glued (myst-nb's ``glue``), from its stored outputs."""
    values = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            scrapbook = output.get("metadata", {}).get("scrapbook", {})
            if "name" in scrapbook:
                values[scrapbook["name"]] = _glued_text(output.get("data", {}), scrapbook.get("mime_prefix", ""))
    return values


INTEGER_TYPES, FLOAT_TYPES = set("bcdoxX"), set("eEfFgGn%")


def format_glued(text: str, spec: str | None) -> str:
    """A glued value's stored text as the book's {glue:text}`name:spec` role shows it.

    The text is read as a Python literal when it is one (``'1/2'`` loses its quotes, ``4096`` is a number),
    converted to what the format's type letter needs (``,d`` an integer, ``.3f`` a float) and formatted.
    """
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if not spec:
        return str(value)
    kind = spec[-1]
    value = int(value) if kind in INTEGER_TYPES else float(value) if kind in FLOAT_TYPES else value
    return format(str(value) if kind == "s" else value, spec)


def _glue(match: re.Match, values: dict[str, str]) -> str:
    return _glue_value(match["name"].strip(), match["spec"], values)


def _glue_value(name: str, spec: str | None, values: dict[str, str]) -> str:
    """The text of the glued value ``name`` as {glue:text}`name:spec` shows it."""
    if name not in values:
        raise KeyError(f"expected a glued value {name!r} in the notebook's outputs, got none (execute it)")
    if not values[name].strip():
        raise ValueError(f"expected the text of the glued value {name!r}, got an empty one (a MIME type "
                         "without text/plain?)")
    return format_glued(values[name].strip(), spec)


def section_links(notebooks: dict[str, nbformat.NotebookNode], page_url) -> dict[str, tuple[str, str]]:
    """``{label: (URL, title)}`` for every target ``(label)=`` of every chapter: its section on the website.

    ``page_url(stem)`` is the chapter's page on the published site (attncourse/repository.py); Sphinx gives the
    section the target's label as its anchor.
    """
    links = {}
    for stem, nb in notebooks.items():
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                for match in TARGET.finditer(cell.source):
                    title = (match["title"] or match["label"]).strip()
                    links[match["label"]] = (f"{page_url(stem)}#{match['label']}", title)
    return links


def page_links(names: list[str], page_url) -> dict[str, tuple[str, str]]:
    """``{file name: (URL, name)}`` for the book's pages that are not released notebooks (``intro.md``...):
    a link to one (``[the introduction](intro.md)``) becomes a link to its page on the website."""
    return {name: (page_url(Path(name).stem), name) for name in names}


def release_links(book: Path, chapters: dict[str, nbformat.NotebookNode]) -> dict[str, tuple[str, str]]:
    """The links a release needs: every section target of the chapters and every other page of ``book``,
    on the website whose address ``_config.yml`` beside ``book`` gives (attncourse/repository.py)."""
    config = Path(book).resolve().parent / "_config.yml"
    pages = [p.name for p in sorted(Path(book).glob("*.md")) + sorted(Path(book).glob("*.ipynb"))
             if p.stem not in chapters]
    url = lambda stem: repository.page_url(stem, config)  # noqa: E731
    return section_links(chapters, url) | page_links(pages, url)


def _ref(match: re.Match, links: dict[str, tuple[str, str]]) -> str:
    label = (match["label"] or match["bare"]).strip()
    if label not in links:
        raise KeyError(f"expected a target ({label})= in some chapter for {{ref}}`{label}`, got none")
    url, title = links[label]
    return f"[{(match['text'] or '').strip() or title}]({url})"


def _cross_references(source: str, links: dict[str, tuple[str, str]]) -> str:
    """Targets dropped; {ref} roles and Markdown links to a target become links to the website's section."""
    source = TARGET.sub(lambda m: m["heading"] or "", source)
    source = REF.sub(lambda m: _ref(m, links), source)
    for label, (url, _) in links.items():
        source = re.sub(rf"\]\(#?{re.escape(label)}\)", lambda _m, url=url: f"]({url})", source)
    return source


def plain_markdown(source: str, stem: str, numbers: dict, bib: Bibliography, bibliography_list: str,
                   glued: dict[str, str] | None = None, links: dict[str, tuple[str, str]] | None = None,
                   quizzes: itertools.count | None = None) -> str:
    """One markdown cell's source with the book-only markup replaced (see the module docstring).

    ``quizzes`` numbers the notebook's quick checks in order (one counter for all its cells)."""
    quizzes = quizzes or itertools.count(1)
    source = GLUE.sub(lambda m: _glue(m, glued or {}), source)
    source = _cross_references(source, links or {})
    source = LABELLED.sub(lambda m: f"$${m['body'].rstrip()} \\tag{{{numbers[m['label']][1]}}}\n$$", source)
    source = EQ_REF.sub(lambda m: _eq_ref(m["label"], stem, numbers), source)
    source = CITE.sub(lambda m: "(" + "; ".join(bib.cite(k) for k in m["keys"].split(",")) + ")", source)
    return _directives(source, glued or {}, quizzes, bibliography_list)


def _directives(source: str, glued: dict[str, str], quizzes: itertools.count, bibliography_list: str) -> str:
    """Each directive fence as plain Markdown: a quick check as its question, choices and answer, an admonition as a
    block quote whose own directives (a fence, a nested admonition, a quick check) are converted too."""
    def convert(text: str) -> str:
        return _directives(text, glued, quizzes, bibliography_list)

    return FENCE.sub(lambda d: _quiz(d, glued, quizzes) if d["name"] == "quiz"
                     else _admonition(d, bibliography_list, convert), source)


def student_notebook(nb, stem: str, numbers: dict, bib: Bibliography, links: dict[str, tuple[str, str]] | None = None):
    """A copy of chapter ``nb`` in plain Markdown, without widget state (nbgrader metadata untouched).

    ``links``: ``{label: (URL, title)}`` of the sections other cells refer to (:func:`section_links`).
    """
    nb = nbformat.from_dict(nb)
    references = "\n".join(f"- {bib.reference(key)}" for key in cited_keys(nb))
    glued = glued_values(nb)
    quizzes = itertools.count(1)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(cell.source, stem, numbers, bib, references, glued, links, quizzes)
    nb.metadata.pop("widgets", None)
    return nb
