"""Why a task did or did not run, for people (``tock tasks history``, the API and the UI's task page).

The scheduler writes each control-flow decision as an event naming its reason: a skip or an upstream
failure with the trigger rule and the upstream states it read (and, for a skip, the branch that
chose), a try its code skipped, an empty task ended without a try, a branch's success with the ids it
followed. Here those fields are read back out of a history event's payload, typed, and said in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The history events that carry a decision (the others answer with no fields and no words).
DECIDING = ("TaskSkipped", "TaskUpstreamFailed", "TaskTrySkipped", "TaskEmptySucceeded", "TaskSucceeded",
            "TaskRemoved", "TaskPoked", "TaskRescheduled", "SensorTimedOut", "TaskDeferred", "ExternalTaskReported",
            "TimeSensorMet")


@dataclass(frozen=True)
class Decision:
    """The decision fields of one event ("" / None / {} where the event says nothing of them)."""

    reason: str = ""
    trigger_rule: str = ""
    upstream_states: dict[str, str] = field(default_factory=dict)
    chosen_by: str = ""
    follow: list[str] | None = None


def decision_of(event_type: str, payload: dict[str, Any]) -> Decision:
    """The decision fields of a history event's payload (an empty Decision for other events)."""
    if event_type not in DECIDING:
        return Decision()
    follow = payload.get("follow") if event_type == "TaskSucceeded" else None
    return Decision(reason=str(payload.get("reason") or ""), trigger_rule=str(payload.get("trigger_rule") or ""),
                    upstream_states={str(task): str(state) for task, state in
                                     sorted((payload.get("upstream_states") or {}).items())},
                    chosen_by=str(payload.get("chosen_by") or ""),
                    follow=None if follow is None else [str(task_id) for task_id in follow])


def described_decision(event_type: str, payload: dict[str, Any]) -> str:
    """The decision of a history event in words ("" for an event that decides nothing)."""
    decision = decision_of(event_type, payload)
    match event_type:
        case "TaskSkipped":
            return _joined(decision.reason or "skipped", *_rule_parts(decision),
                           f"chosen by {decision.chosen_by}" if decision.chosen_by else "")
        case "TaskUpstreamFailed":
            return _joined(decision.reason or "upstream failed", *_rule_parts(decision))
        case "TaskTrySkipped":
            return _joined("its code raised the skip exception", decision.reason)
        case "TaskEmptySucceeded":
            return f"an empty task: ended by scheduler {payload.get('scheduler_id') or '?'}, no try"
        case "TaskSucceeded":
            return followed_text(decision.follow)
        case "TaskRemoved":
            return _joined("removed", decision.reason)
        case "TaskPoked" | "TaskRescheduled" | "SensorTimedOut" | "TaskDeferred" | "TimeSensorMet":
            return _sensor_words(event_type, payload)
        case "ExternalTaskReported":
            return _joined(f"DAG {payload.get('external_dag_id')} answered: {payload.get('outcome')}", decision.reason)
    return ""


def _sensor_words(event_type: str, payload: dict[str, Any]) -> str:
    """A sensor's poke and the owner's decision after it, in words (UTC times)."""
    from datetime import UTC, datetime

    def moment(seconds: Any) -> str:
        return datetime.fromtimestamp(float(seconds), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    if event_type == "TaskPoked":
        asked = payload.get("reschedule_at")
        return _joined("the poke found its condition not met", "it waited its timeout in the try"
                       if payload.get("timed_out") else "", f"it asked to poke again at {moment(asked)}"
                       if asked is not None else "")
    if event_type == "TaskRescheduled":
        return (f"poke {payload.get('poke')} was not met: the next poke is at {moment(payload.get('not_before', 0))}"
                f", no slot held until then")
    if event_type == "TaskDeferred":
        awaited = f"DAG {payload.get('external_dag_id')}" if payload.get("external_dag_id") else "its moment"
        until = moment(payload.get("until", 0))
        return f"deferred by the scheduler, no try: waiting on {awaited}, until {until} at most"
    if event_type == "TimeSensorMet":
        return f"its moment {moment(payload.get('moment', 0))} came: it succeeds, no try"
    return (f"the sensor waited {float(payload.get('waited') or 0):.0f} s of its timeout of "
            f"{float(payload.get('timeout') or 0):g} s: it ends {payload.get('state')}")


def decision_fields(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A history event's decision as fields (None where the event says nothing of one) and ``why``, in
    words ("" for an event that decides nothing)."""
    decision = decision_of(event_type, payload)
    return {"reason": decision.reason or None, "trigger_rule": decision.trigger_rule or None,
            "upstream_states": decision.upstream_states or None, "chosen_by": decision.chosen_by or None,
            "follow": decision.follow, "why": described_decision(event_type, payload)}


def followed_text(follow: list[str] | None) -> str:
    """What a branch's or short circuit's success chose: "followed a, b" / "followed none" ("" not a chooser)."""
    if follow is None:
        return ""
    return "followed " + (", ".join(follow) if follow else "none (every downstream task skipped)")


def upstream_text(upstream_states: dict[str, str]) -> str:
    """``a=success, b=skipped``: the upstream states a decision read."""
    return ", ".join(f"{task_id}={state}" for task_id, state in sorted(upstream_states.items()))


def _rule_parts(decision: Decision) -> tuple[str, str]:
    rule = f"trigger rule {decision.trigger_rule}" if decision.trigger_rule else ""
    upstream = f"upstream {upstream_text(decision.upstream_states)}" if decision.upstream_states else ""
    return rule, upstream


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)
