"""What the UI shows of a DAG and its tasks (Airflow's descriptive arguments), and the task arguments Tock
takes only at values under which Airflow would do nothing Tock lacks.

A DAG's ``description``, ``doc_md`` (Markdown; a value ending in ``.md`` names a file, as in Airflow),
``owner_links`` (owner name -> an http(s) or mailto link) and ``dag_display_name``; a task's ``owner``
(Airflow's default "airflow"), ``doc_md`` and ``doc``. ``depends_on_past`` is taken only as False, and
``email`` only where Airflow would send no mail (``email_on_failure`` and ``email_on_retry`` False, or no
address): Tock does neither, so a value that asks for them is refused rather than ignored.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from tock.tasks import Task, TaskOptions

DEFAULT_OWNER = "airflow"  # Airflow's [operators] default_owner
WEB_SCHEMES = ("http", "https")
MARKDOWN_FILE = ".md"
SHOWN = 200  # characters of a refused value a message shows

NO_DEPENDS_ON_PAST = ("depends_on_past=True is not offered by Tock yet (a try would not wait for the task's "
                      "instance in the previous run to succeed): remove it or set it False")


def text_problem(value: Any, name: str) -> str | None:
    """What is wrong with an optional text argument (None: nothing)."""
    if value is None or isinstance(value, str):
        return None
    return f"{name} must be a string or None, got {value!r:.{SHOWN}}"


def is_owner_link(link: Any) -> bool:
    """An http(s) URL with a host, or a mailto link with an address (what Airflow's UI links an owner to)."""
    if not isinstance(link, str):
        return False
    try:
        parts = urlsplit(link.strip())
    except ValueError:  # e.g. an unclosed [ in the host
        return False
    if parts.scheme == "mailto":
        return bool(parts.path)
    return parts.scheme in WEB_SCHEMES and bool(parts.netloc)


def owner_links_problems(owner_links: Any) -> list[str]:
    """What is wrong with a DAG's ``owner_links``: each bad link, named by its owner."""
    if owner_links is None:
        return []
    if not isinstance(owner_links, dict):
        return [f"owner_links must be a dict of owner name -> link, got {owner_links!r:.{SHOWN}}"]
    found = [f"owner_links: the owner {owner!r:.{SHOWN}} must be a name (a non-empty string)"
             for owner in owner_links if not isinstance(owner, str) or not owner]
    found.extend(f"owner_links[{owner!r:.{SHOWN}}]: {link!r:.{SHOWN}} is not an http(s) or mailto link "
                 "(like 'https://example.com/team' or 'mailto:team@example.com')"
                 for owner, link in owner_links.items() if not is_owner_link(link))
    return found


def dag_metadata_problems(description: Any, doc_md: Any, owner_links: Any, dag_display_name: Any) -> list[str]:
    """What is wrong with a DAG's descriptive arguments, each naming the argument."""
    found = [problem for problem in (text_problem(description, "description"), text_problem(doc_md, "doc_md"),
                                     text_problem(dag_display_name, "dag_display_name")) if problem]
    return found + owner_links_problems(owner_links)


def markdown_of(doc_md: str | None, dag_file: str | None) -> str | None:
    """A DAG's docs, Airflow's rule: a ``doc_md`` ending in ``.md`` names a Markdown file (a relative path:
    beside the DAG file) whose text they are; when there is no such file, the value itself."""
    if doc_md is None or not doc_md.endswith(MARKDOWN_FILE):
        return doc_md
    path = Path(doc_md).expanduser()
    if not path.is_absolute() and dag_file:
        path = Path(dag_file).parent / path
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return doc_md


def task_metadata_problems(options: TaskOptions) -> list[str]:
    """What is wrong with a task's ``owner``, docs, ``depends_on_past`` and ``email`` arguments."""
    found = [problem for problem in (text_problem(options.doc_md, "doc_md"), text_problem(options.doc, "doc"))
             if problem]
    if not isinstance(options.owner, str) or not options.owner.strip():
        found.append(f"owner must be a non-empty string, got {options.owner!r:.{SHOWN}}")
    flags = {"depends_on_past": options.depends_on_past, "email_on_failure": options.email_on_failure,
             "email_on_retry": options.email_on_retry}
    found.extend(f"{name} must be True or False, got {value!r:.{SHOWN}}" for name, value in flags.items()
                 if not isinstance(value, bool))
    if options.depends_on_past is True:
        found.append(NO_DEPENDS_ON_PAST)
    return found + email_problems(options.email, options.email_on_failure, options.email_on_retry)


def email_problems(email: Any, on_failure: Any, on_retry: Any) -> list[str]:
    """``email`` must be an address, a list of them or None; refused where Airflow would mail it."""
    addresses = _addresses(email)
    if addresses is None:
        return [f"email must be an address, a list of addresses or None, got {email!r:.{SHOWN}}"]
    mailed = [name for name, flag in (("email_on_failure", on_failure), ("email_on_retry", on_retry))
              if flag is True]
    if not addresses or not mailed:
        return []
    return [f"email={email!r:.{SHOWN}} with {' and '.join(f'{name}=True' for name in mailed)}: Airflow would mail "
            "these addresses, but Tock sends no email (email_on_failure and email_on_retry default to True, as in "
            "Airflow); set them False, or drop email, and notify from an on_failure_callback (or on_retry_callback)"]


def _addresses(email: Any) -> list[str] | None:
    """The non-empty addresses ``email`` names ([] none), or None when it is not an address or a list of them."""
    if email is None:
        return []
    if isinstance(email, str):
        return [email] if email.strip() else []
    if isinstance(email, Collection) and not isinstance(email, bytes | dict) and all(
            isinstance(item, str) for item in email):
        return [item for item in email if item.strip()]
    return None


class TaskDoc:
    """A task's ``doc_md`` or ``doc`` as an attribute of the task: read from its options; set (Airflow's
    tutorial writes ``t1.doc_md = ...`` after making the task) into a copy of them, checked."""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, task: None, owner: type[Any] | None = None) -> TaskDoc: ...

    @overload
    def __get__(self, task: Task, owner: type[Any] | None = None) -> str | None: ...

    def __get__(self, task: Task | None, owner: type[Any] | None = None) -> TaskDoc | str | None:
        if task is None:
            return self
        text: str | None = getattr(task.options, self.name)
        return text

    def __set__(self, task: Task, text: str | None) -> None:
        change: dict[str, Any] = {self.name: text}  # doc_md or doc: checked below, whatever its type
        options = replace(task.options, **change)
        task.dag.check_options(task.task_id, options)
        task.options = options
