"""The closed Event union is the registry of declarations, regenerated whenever an event is declared."""

from __future__ import annotations

import typing

import schemas
from schemas.declare import EVENT_TYPES
from schemas.generate_union import UNION_PATH, union_source


def test_the_union_file_is_generated_from_the_declarations():
    assert UNION_PATH.read_text() == union_source(), "run python -m schemas.generate_union"


def test_the_union_holds_every_declared_event_and_nothing_else():
    assert set(typing.get_args(schemas.Event)) == set(EVENT_TYPES.values())


def test_each_topic_union_holds_the_events_of_that_topic():
    topic_unions = [schemas.DagsTopicEvent, schemas.EventsTopicEvent, schemas.HeartbeatsTopicEvent,
                    schemas.LogsTopicEvent, schemas.ParsingTopicEvent, schemas.SchedulersTopicEvent,
                    schemas.UsersTopicEvent, schemas.SecretsTopicEvent]
    members = [set(typing.get_args(union)) or {union} for union in topic_unions]
    for union_members in members:
        assert len({cls.TOPIC for cls in union_members}) == 1
    assert set().union(*members) == set(EVENT_TYPES.values())
