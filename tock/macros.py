"""Airflow's ``macros`` for templates: ``{{ macros.ds_add(ds, 1) }}``, ``{{ macros.datetime.now() }}``.

Templates see this module as ``macros`` (and the runner puts it in the context as ``context["macros"]``).
As in Airflow: ``ds_add``, ``ds_format``, ``datetime_diff_for_humans``, and the ``datetime`` and
``timedelta`` classes, the ``dateutil``, ``time``, ``uuid`` and ``json`` modules and ``random`` (the
function ``random.random``). Not offered: Airflow's ``ds_format_locale`` (needs Babel) and ``yaml``.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from random import random

import dateutil
from dateutil.relativedelta import relativedelta

__all__ = ["datetime", "datetime_diff_for_humans", "dateutil", "ds_add", "ds_format", "json", "random", "time",
           "timedelta", "uuid"]

DS_FORMAT = "%Y-%m-%d"
# Largest unit first; years and months are calendar ones (relativedelta), weeks are seven days.
_UNITS = ("years", "months", "weeks", "days", "hours", "minutes", "seconds")


def ds_add(ds: str, days: int) -> str:
    """``ds`` (YYYY-MM-DD) moved by ``days`` (negative: back): ``ds_add("2024-02-28", 2) == "2024-03-01"``."""
    if not days:
        return str(ds)
    return (datetime.strptime(str(ds), DS_FORMAT) + timedelta(days=days)).strftime(DS_FORMAT)


def ds_format(ds: str, input_format: str, output_format: str) -> str:
    """``ds`` read with ``input_format`` and written with ``output_format`` (strptime / strftime codes)."""
    return datetime.strptime(str(ds), input_format).strftime(output_format)


def datetime_diff_for_humans(dt: datetime, since: datetime | None = None) -> str:
    """How far ``dt`` is from ``since`` (default: now), roughly, as Airflow's (pendulum's) says it:
    ``"in 2 days"`` / ``"3 hours ago"`` from now, ``"2 days after"`` / ``"2 days before"`` from ``since``.
    Naive datetimes are UTC."""
    moment, reference = _aware(dt), _aware(since if since is not None else datetime.now(UTC))
    later = moment >= reference
    amount = _largest_unit(relativedelta(moment, reference) if later else relativedelta(reference, moment))
    if since is None:
        return f"in {amount}" if later else f"{amount} ago"
    return f"{amount} after" if later else f"{amount} before"


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _largest_unit(difference: relativedelta) -> str:
    counts = {"years": difference.years, "months": difference.months, "weeks": difference.days // 7,
              "days": difference.days, "hours": difference.hours, "minutes": difference.minutes,
              "seconds": difference.seconds}
    for unit in _UNITS:
        count = counts[unit]
        if count and not (unit == "seconds" and count < 10):
            return f"{count} {unit if count > 1 else unit[:-1]}"
    return "a few seconds"
