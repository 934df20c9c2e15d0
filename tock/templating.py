"""Templated fields, rendered with Jinja2 in a sandbox as Airflow renders them.

The runner's contract (called in the try's child, after the context is built, before user code)::

    rendered = render_template_fields(task, context)

returns ``{field: rendered value}`` for every name in ``task.template_fields``, in that order:

- a bash task: ``bash_command`` (str: run it with bash), ``env`` (dict of str to str, or None:
  None means "inherit the environment"; with ``task.append_env`` the dict is added to it, else it is
  the whole environment, as Airflow's BashOperator), ``cwd`` (str or None);
- a python task: ``templates_dict`` (dict or None), ``op_args`` (list: the call's positional
  arguments), ``op_kwargs`` (dict: its keyword arguments). Call
  ``task.python_callable(*rendered["op_args"], **rendered["op_kwargs"])``.

Rendering, as Airflow's: a string is a Jinja template, rendered against ``context``; a string ending
in one of ``task.template_ext`` (bash: ``.sh``, ``.bash``; python: ``@task(templates_exts=[...])``)
names a template file, looked up in the DAG file's folder and then the DAG's ``template_searchpath``
(relative entries from the DAG file's folder); lists, tuples (named ones too), sets and dict values
are rendered element by element (dict keys kept); anything else, such as an upstream task's value
still to be resolved, is returned as it is. Undefined names raise (``StrictUndefined``, the DAG's
``template_undefined``). With ``render_template_as_native_obj`` a template gives a Python object
(``"{{ params.n }}"`` an int) instead of a string. Differences from Airflow: a string with no ``{{``,
``{%`` or ``{#`` is not a template and comes back exactly as it was (Airflow's Jinja would drop a
final newline and turn ``\\r\\n`` into ``\\n``); a template's final newline is kept; the native
environment is sandboxed too.

Any failure while rendering raises TemplateRenderError naming the task, the field (and where in it),
the template (its file or ``<string>``), the line and Jinja's message: the try fails with it.
``rendered_for_record(rendered)`` is the JSON text the try's record keeps (TaskSucceeded /
TaskFailed ``rendered_json``).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jinja2
import jinja2.nativetypes
import jinja2.sandbox

from tock import macros
from tock.dag_param import DagParam

if TYPE_CHECKING:
    from tock.dag import DAG
    from tock.tasks import Task

RECORD_LIMIT = 64 * 1024  # bytes of rendered_for_record's text (UTF-8), note included
TEMPLATE_MARKERS = ("{{", "{%", "{#")
STRING_TEMPLATE = "<string>"


class TemplateRenderError(Exception):
    """A templated field of a task could not be rendered; the message says where and why."""

    def __init__(self, task: str, place: str, template: str, line: int | None, problem: str) -> None:
        at_line = f", line {line}" if line is not None else ""
        super().__init__(f"task {task!r}, field {place}, template {template}{at_line}: {problem}")
        self.task = task
        self.place = place
        self.template = template
        self.line = line
        self.problem = problem


@dataclass(frozen=True, slots=True)
class TemplateOptions:
    """A DAG's templating arguments (Airflow's names), checked when the DAG is built."""

    template_searchpath: tuple[str, ...] = ()
    template_undefined: type[jinja2.Undefined] = jinja2.StrictUndefined
    user_defined_macros: dict[str, Any] = field(default_factory=dict)
    user_defined_filters: dict[str, Callable[..., Any]] = field(default_factory=dict)
    jinja_environment_kwargs: dict[str, Any] = field(default_factory=dict)
    render_template_as_native_obj: bool = False

    @classmethod
    def of(cls, searchpath: str | Iterable[str] | None, undefined: Any, macros: Any, filters: Any,
           environment_kwargs: Any, native: Any) -> TemplateOptions:
        """Checked options from a DAG's arguments (ValueError / TypeError naming the bad one);
        ``undefined`` None is Airflow's default, ``jinja2.StrictUndefined``."""
        undefined = jinja2.StrictUndefined if undefined is None else undefined
        if not isinstance(undefined, type) or not issubclass(undefined, jinja2.Undefined):
            raise TypeError(f"template_undefined must be jinja2.Undefined or a subclass, got {undefined!r}")
        options = cls(_searchpath(searchpath), undefined, _names_to(macros, "user_defined_macros"),
                      _names_to(filters, "user_defined_filters"),
                      _names_to(environment_kwargs, "jinja_environment_kwargs"), native)
        if not all(callable(function) for function in options.user_defined_filters.values()):
            raise TypeError(f"user_defined_filters must map names to functions, got {filters!r}")
        if not isinstance(native, bool):
            raise TypeError(f"render_template_as_native_obj must be True or False, got {native!r}")
        try:  # Jinja refuses bad jinja_environment_kwargs now, not when a try runs
            environment(options, None)
        except Exception as error:  # noqa: BLE001 - an extension that fails to import, an unknown option
            problem = f"{type(error).__name__}: {error}"
            raise ValueError(f"jinja_environment_kwargs {environment_kwargs!r}: {problem}") from error
        return options


def _searchpath(searchpath: str | Iterable[str] | None) -> tuple[str, ...]:
    paths = (searchpath,) if isinstance(searchpath, str) else searchpath or ()
    paths = tuple(paths) if isinstance(paths, Iterable) else (paths,)
    if not all(isinstance(path, str) and path for path in paths):
        raise TypeError(f"template_searchpath must be a folder or a list of folders, got {searchpath!r}")
    return paths


def _names_to(mapping: Any, what: str) -> dict[str, Any]:
    if mapping is None:
        return {}
    if not isinstance(mapping, dict) or not all(isinstance(name, str) for name in mapping):
        raise TypeError(f"{what} must be a dict with string keys, got {mapping!r}")
    return dict(mapping)


# Airflow's filters: {{ logical_date | ds }} and so on.
def ds_filter(value: datetime.date | None) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%d")


def ds_nodash_filter(value: datetime.date | None) -> str | None:
    return None if value is None else value.strftime("%Y%m%d")


def ts_filter(value: datetime.date | None) -> str | None:
    return None if value is None else value.isoformat()


def ts_nodash_filter(value: datetime.date | None) -> str | None:
    return None if value is None else value.strftime("%Y%m%dT%H%M%S")


def ts_nodash_with_tz_filter(value: datetime.date | None) -> str | None:
    return None if value is None else value.isoformat().replace("-", "").replace(":", "")


FILTERS: dict[str, Callable[..., Any]] = {
    "ds": ds_filter, "ds_nodash": ds_nodash_filter, "ts": ts_filter, "ts_nodash": ts_nodash_filter,
    "ts_nodash_with_tz": ts_nodash_with_tz_filter,
}


class SandboxedEnvironment(jinja2.sandbox.SandboxedEnvironment):
    """Jinja's sandbox, with Airflow's rule for ``_name`` attributes (allowed; ``__name`` not) and one
    more: from a module, only its own submodules are reached (``macros.dateutil.relativedelta``, not
    ``macros.uuid.os``), but for the modules the DAG hands templates itself (``macros``, and those of
    its ``user_defined_macros``: ``os.path``). A template is DAG author code: this guards against
    slips, not authors."""

    open_modules: frozenset[int] = frozenset()  # ids of the modules whose modules may be reached

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if jinja2.sandbox.is_internal_attribute(obj, attr):
            return False
        if isinstance(value, types.ModuleType) and isinstance(obj, types.ModuleType):
            return id(obj) in self.open_modules or value.__name__.startswith(obj.__name__ + ".")
        return True


class SandboxedNativeEnvironment(SandboxedEnvironment, jinja2.nativetypes.NativeEnvironment):
    """The sandbox, rendering to Python objects (``render_template_as_native_obj=True``)."""


def _native_finalize(value: Any) -> Any:
    # A native render hands back what {{ ... }} gives without str(): an undefined name would come
    # back as an Undefined object instead of failing (or rendering empty) as it does as text.
    return str(value) if isinstance(value, jinja2.Undefined) else value


def environment(options: TemplateOptions, folder: str | None) -> jinja2.Environment:
    """The Jinja environment a DAG's templates render in; template files come from ``folder`` (the
    DAG file's), then ``template_searchpath`` (relative entries from ``folder``)."""
    searchpath = [folder] if folder else []
    searchpath += [os.path.join(folder or "", path) for path in options.template_searchpath]
    native = options.render_template_as_native_obj
    settings: dict[str, Any] = {"loader": jinja2.FileSystemLoader(searchpath), "undefined": options.template_undefined,
                                "extensions": ["jinja2.ext.do"], "cache_size": 0, "keep_trailing_newline": True}
    if native:
        settings["finalize"] = _native_finalize
    settings.update(options.jinja_environment_kwargs)
    env = (SandboxedNativeEnvironment if native else SandboxedEnvironment)(**settings)
    env.open_modules = frozenset(id(value) for value in [macros, *options.user_defined_macros.values()]
                                 if isinstance(value, types.ModuleType))
    env.filters.update(FILTERS)
    env.filters.update(options.user_defined_filters)
    env.globals["macros"] = macros
    env.globals.update(options.user_defined_macros)
    return env


def dag_environment(dag: DAG) -> jinja2.Environment:
    return environment(dag.template_options, os.path.dirname(dag.fileloc) if dag.fileloc else None)


def render_template_fields(task: Task, context: Mapping[str, Any]) -> dict[str, Any]:
    """Each of ``task.template_fields`` rendered against ``context`` (see the module's docstring)."""
    renderer = _Renderer(task, dag_environment(task.dag), dict(context))
    return {name: renderer.render(getattr(task, name), name) for name in task.template_fields}


class _Renderer:
    """Renders one task's fields: ``place`` says where in a field a value is, for errors."""

    def __init__(self, task: Task, env: jinja2.Environment, context: dict[str, Any]) -> None:
        self.task = task
        self.env = env
        self.context = context
        self.extensions = tuple(task.template_ext)
        self.open: set[int] = set()  # containers being rendered: a container holding itself is left as is

    def render(self, value: Any, place: str) -> Any:
        if isinstance(value, str):
            return self._string(value, place)
        if isinstance(value, DagParam):  # a @dag function's parameter: the run's value of that param
            return value.resolve(self.context)
        if not isinstance(value, list | tuple | set | frozenset | dict) or id(value) in self.open:
            return value
        self.open.add(id(value))
        try:
            return self._container(value, place)
        finally:
            self.open.discard(id(value))

    def _container(self, value: list[Any] | tuple[Any, ...] | set[Any] | frozenset[Any] | dict[Any, Any],
                   place: str) -> Any:
        if isinstance(value, dict):
            return {key: self.render(item, f"{place}[{key!r}]") for key, item in value.items()}
        if isinstance(value, set | frozenset):
            return type(value)(self.render(item, f"{place} (an element)") for item in value)
        items = [self.render(item, f"{place}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, list):
            return items
        return tuple(items) if type(value) is tuple else type(value)(*items)  # a named tuple: its own class

    def _string(self, text: str, place: str) -> Any:
        is_file = bool(self.extensions) and text.endswith(self.extensions)
        if not is_file and not any(marker in text for marker in TEMPLATE_MARKERS):
            return text
        try:
            template = self.env.get_template(text) if is_file else self.env.from_string(text)
            return template.render(self.context)
        except Exception as error:  # noqa: BLE001 - a macro or filter of the DAG's may raise anything
            raise self._error(error, place, text if is_file else STRING_TEMPLATE) from error

    def _error(self, error: Exception, place: str, template: str) -> TemplateRenderError:
        name, line = _where(error)
        if isinstance(error, jinja2.TemplateNotFound) and not isinstance(error, jinja2.TemplatesNotFound):
            searched = getattr(self.env.loader, "searchpath", [])
            problem = f"template file {error.name!r} not found in {', '.join(searched) or 'no folder'}"
        else:
            problem = f"{type(error).__name__}: {error}"
        return TemplateRenderError(f"{self.task.dag.dag_id}.{self.task.task_id}", place, name or template, line,
                                   problem)


def _where(error: Exception) -> tuple[str | None, int | None]:
    """The template (a file's path, ``<string>``) and line an error of Jinja's happened in, if known."""
    if isinstance(error, jinja2.TemplateSyntaxError):
        return _template_name(error.filename or error.name), error.lineno
    trace, found = error.__traceback__, None
    while trace is not None:
        # Jinja rewrites a render's traceback: each template frame becomes one of its own, with the
        # template's file name and line, and the exception in the frame's globals.
        if "__jinja_exception__" in trace.tb_frame.f_globals:
            found = trace
        trace = trace.tb_next
    if found is None:
        return None, None
    return _template_name(found.tb_frame.f_code.co_filename), found.tb_lineno


def _template_name(filename: str | None) -> str | None:
    return STRING_TEMPLATE if filename in (None, "<template>", "<unknown>") else filename


def rendered_for_record(rendered: Mapping[str, Any], limit: int = RECORD_LIMIT) -> str:
    """``rendered`` as JSON text for the try's record: values that are not JSON as their ``repr``; over
    ``limit`` bytes (UTF-8), the longest strings are cut, each saying so, until it fits."""
    plain = _jsonable(dict(rendered))
    text = _dumps(plain)
    if len(text.encode()) <= limit:
        return text
    low, high, best = 0, _longest_string(plain), None
    while low <= high:  # the largest length every string may keep for the whole to fit
        middle = (low + high) // 2
        candidate = _dumps({name: _cut_strings(value, middle) for name, value in plain.items()})
        if len(candidate.encode()) <= limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    if best is not None:
        return best
    note = f"[cut: {len(text.encode()):,} bytes as JSON, over the {limit:,}-byte limit]"
    return _dumps({name: note for name in plain})


def _jsonable(value: Any, open_ids: frozenset[int] = frozenset()) -> Any:
    """JSON's types only: tuples become lists, anything else not JSON (sets too) its repr."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict | list | tuple) and id(value) not in open_ids:  # else: a container inside itself
        inner = open_ids | {id(value)}
        if isinstance(value, dict):
            return {key if isinstance(key, str) else _key(key): _jsonable(item, inner) for key, item in value.items()}
        return [_jsonable(item, inner) for item in value]
    return _repr(value)


def _key(key: Any) -> str:
    return json.dumps(key) if key is None or isinstance(key, bool | int) else _repr(key)


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ of user code still leaves a record
        return f"<unprintable {type(value).__name__}>"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    items = list(value.keys()) + list(value.values()) if isinstance(value, dict) else value
    return max(map(_longest_string, items), default=0) if isinstance(value, dict | list) else 0


def _cut_strings(value: Any, keep: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= keep else value[:keep] + f" [cut to {keep} of {len(value)} characters]"
    if isinstance(value, dict):
        return {_cut_strings(key, keep): _cut_strings(item, keep) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, keep) for item in value]
    return value
