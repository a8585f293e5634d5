"""The one output sink: every command's documents leave through :func:`emit`.

A document (a dict with a versioned ``schema``, ``flagos-doctor/probe/1``) has views, one
per format. A view is registered under the schema and the format's name, by the module
that renders it; it renders every version of that schema (``flagos-doctor/probe/*``):

* a text format (``json``, ``markdown``, ``csv``, ``census``) is ``render(document,
  **options) -> str``, written to a file or, for ``-``, to standard output;
* the ``terminal`` format is ``show(document, console, **options) -> None``: it draws on a
  rich console (colours and width are the console's), which the sink makes with the
  console options the view was registered with, from the document with its control
  characters escaped (:mod:`flagos_doctor.controls`).

JSON is one view for every schema (:func:`flagos_doctor.files.dump_json`). Adding a format
is one renderer and one :func:`register` above it; a command names it in :func:`emit`.

Every view renders from the document alone. Where building a document can leave what a
JSON file would not keep (tuples, key order), its command hands :func:`emit` the document
as ``--json`` writes it (:func:`as_written`: report, survey compare, attribution, matrix),
so every view shows exactly the file.

Parent side: nothing here imports torch (the terminal views import rich).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from flagos_doctor import files
from flagos_doctor.errors import BadInput
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, full_record

TERMINAL = "terminal"
#: Where a terminal view goes: stdout, and when a text format took stdout, nowhere
#: (``STDOUT``) or stderr (``STDOUT_ELSE_STDERR``); ``None`` shows none.
STDOUT = "stdout"
STDOUT_ELSE_STDERR = "stdout-else-stderr"
#: ... or always stderr: where stdout belongs to someone else (``explain``'s program).
STDERR = "stderr"


#: Registered for every schema (the JSON view).
ANY_SCHEMA = ""


@dataclass(frozen=True)
class View:
    function: Callable
    console: dict = field(default_factory=dict)
    #: The view scrubs the data it renders itself, and its text is written verbatim: a page
    #: whose scripts are allowed by their hash (HF_TOKEN=none must not turn its code's
    #: ``none`` into a mask, and the page blank).
    scrubbed: bool = False


_VIEWS: dict[tuple[str, str], View] = {}


def family(schema: str) -> str:
    """A schema without its version: ``flagos-doctor/probe/1`` -> ``flagos-doctor/probe``."""
    return schema.rsplit("/", 1)[0] if schema else schema


def register(schema: str, format: str, scrubbed: bool = False, **console_options) -> Callable:
    """Decorator: ``function`` is the ``format`` view of documents of ``schema`` (any
    version). ``console_options`` (terminal views only) are the rich console's
    (``highlight=False``, ``soft_wrap=True``); ``scrubbed``: :attr:`View.scrubbed`."""
    def decorate(function: Callable) -> Callable:
        _VIEWS[(family(schema), format)] = View(function, console_options, scrubbed)
        return function
    return decorate


def view(document: dict, format: str) -> View:
    """The ``format`` view of ``document``'s schema, else the one for every schema."""
    schema = document.get("schema") or ""
    found = _VIEWS.get((family(schema), format)) or _VIEWS.get((ANY_SCHEMA, format))
    if found is None:  # a command names a format its document has no view for: a bug of ours
        raise LookupError(f"no {format} view of {schema or 'a document without a schema'} is registered")
    return found


def render(document: dict, format: str, **options) -> str:
    """The text of ``document`` in ``format``."""
    return view(document, format).function(document, **options)


def show(document: dict, console, **options) -> None:
    """Draw the terminal view of ``document`` on ``console``."""
    view(document, TERMINAL).function(document, console, **options)


def plain(document: dict, width: int = 120, **options) -> str:
    """The terminal view as plain text (what a terminal shows, without colours)."""
    import io

    from rich.console import Console

    from flagos_doctor.controls import inert_document

    buffer = io.StringIO()
    markup = view(document, TERMINAL).console.get("markup", True)  # a view that reads no markup, here too
    show(inert_document(document), Console(file=buffer, width=width, color_system=None, highlight=False, markup=markup),
         **options)
    return buffer.getvalue()


def as_written(document: dict) -> dict:
    """``document`` as its ``--json`` file holds it (key order, types), for the other views."""
    # unindented: the same keys and values, encoded fast (a 3,000-failure explain's document)
    return json.loads(files.dump_json(document, indent=None))


def page(max_chars: int, json_path: str | None, how: str) -> dict:
    """A Markdown view's options: its budget and where its closing line says the full record is."""
    return {"max_chars": max_chars, "full_record": full_record(json_path, how)}


#: The formats whose text is workflow commands for a GitHub runner: the only text written
#: to stdout as commands (:mod:`flagos_doctor.workflow`).
WORKFLOW_COMMANDS = ("github-annotations",)


def write(text: str, path: str, format: str, scrub: bool = True) -> None:
    """``text`` to ``path`` (atomically) or, for ``-``, to standard output; scrubbed of
    secrets unless its view did that (``scrub`` False)."""
    if path == "-":
        if format == "json":  # "##[" is only ever inside a JSON string: escaped, the same value, read by no runner
            text = text.replace("##[", "##\\u005b")
        files.write_stdout(text, f"--{format}", commands=format in WORKFLOW_COMMANDS, scrub=scrub)
    else:
        files.atomic_write_text(path, text, scrub)


def emit(document: dict, to: dict[str, str | None], terminal: str | None = None,
         options: dict[str, dict] | None = None, view_despite_failure: bool = True) -> None:
    """Write ``document`` in each format of ``to`` (format -> PATH, ``-`` or None for none),
    in that order, then show its terminal view as ``terminal`` says (:data:`STDOUT`,
    :data:`STDOUT_ELSE_STDERR`, :data:`STDERR` or None). ``options`` are each format's view options
    (``{"markdown": page(...), "terminal": {"show_all": True}}``).

    Each sink is written on its own: one that fails (a full disk for ``--json``) costs neither
    the others (the ``--markdown`` file) nor the terminal view; then the first failure is
    raised (its BadInput names the file), saying how many others failed too.
    (``view_despite_failure`` is that behaviour, now every command's; kept for its callers.)"""
    options = options or {}
    from flagos_doctor.childproc import without_link_folder

    document = without_link_folder(document)  # no path through our temporary link folder
    took_stdout = False
    failed: list[BadInput] = []
    written = 0
    for format, path in to.items():
        if path:
            try:
                write(render(document, format, **options.get(format, {})), path, format,
                      scrub=not view(document, format).scrubbed)
            except BadInput as exc:
                failed.append(exc)
                continue
            written += 1
            took_stdout = took_stdout or path == "-"
    if terminal is not None and not (took_stdout and terminal == STDOUT):
        _show_on_terminal(document, took_stdout or terminal == STDERR, options)
    if failed:
        raise _first_failure(failed, written)


def _first_failure(failed: list[BadInput], written: int) -> BadInput:
    """The first failed write, saying which others failed and that the rest were written."""
    first = failed[0]
    more = f"; {', '.join(str(e.where) for e in failed[1:])} failed too" if len(failed) > 1 else ""
    kept = f"; the other output{'s were' if written > 1 else ' was'} written" if written else ""
    return BadInput(f"{first.message}{more}{kept}", first.where)


def _show_on_terminal(document: dict, on_stderr: bool, options: dict) -> None:
    from flagos_doctor.console import output_console
    from flagos_doctor.controls import inert_document

    shown = view(document, TERMINAL)
    shown.function(inert_document(document), output_console(stderr=on_stderr, **shown.console),
                   **options.get(TERMINAL, {}))


register(ANY_SCHEMA, "json")(files.dump_json)

__all__ = ["register", "render", "show", "plain", "emit", "as_written", "page", "write", "STDOUT",
           "STDOUT_ELSE_STDERR", "STDERR", "TERMINAL", "DEFAULT_MAX_CHARS"]
