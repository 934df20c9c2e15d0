"""The core's lineage events as openlineage-python's ``RunEvent`` (event_v2, facet_v2), serialized by its
``Serde`` as every one of its transports serializes them.

Facets: ``parent`` (a try's DAG run, also its root), ``errorMessage``, ``nominalTime``, ``processing_engine``
(Tock and this client's versions) and ``tock`` (a custom run facet: the Tock ids, Tock's word for the change,
and the record of tock.events the event comes from) on the run; ``jobType`` on the job. Nothing here reads a
clock: the same lineage event always gives the same bytes.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    RunFacet,
    error_message_run,
    job_type_job,
    nominal_time_run,
    parent_run,
    processing_engine_run,
)
from openlineage.client.serde import Serde

from services.lineage.core import DAG_JOB, LineageEvent, RunRef, iso_time

# URNs (URIs, as the spec asks): Tock publishes no web address of its own to name its code or the ``tock``
# facet's schema by. A change of either changes every event's bytes: re-emissions across it differ.
PRODUCER = "urn:tock:lineage"
TOCK_FACET_SCHEMA = "urn:tock:lineage:facets:TockRunFacet:1-0-0"
INTEGRATION = "TOCK"


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


ENGINE = processing_engine_run.ProcessingEngineRunFacet(version=_version("tock"), name="Tock",
                                                        openlineageAdapterVersion=_version("openlineage-python"),
                                                        producer=PRODUCER)


@attr.define
class TockRunFacet(RunFacet):
    """Which Tock run or try this is, what Tock recorded, and where in tock.events (partition, offset, index)."""

    dagId: str  # noqa: N815 - OpenLineage's camelCase
    dagRunId: str  # noqa: N815
    taskId: str  # noqa: N815
    mapIndex: int  # noqa: N815
    tryNumber: int  # noqa: N815
    incarnation: int
    state: str
    partition: int
    offset: int
    index: int
    _additional_skip_redact: ClassVar[list[str]] = ["dagId", "dagRunId", "taskId", "state"]

    @staticmethod
    def _get_schema() -> str:
        return TOCK_FACET_SCHEMA


def run_event(event: LineageEvent) -> RunEvent:
    """The openlineage-python RunEvent of a core lineage event."""
    job_type = job_type_job.JobTypeJobFacet(processingType="BATCH", integration=INTEGRATION, jobType=event.job_type,
                                            producer=PRODUCER)
    return RunEvent(eventType=RunState(event.event_type), eventTime=iso_time(event.event_time),
                    run=Run(runId=event.run.run_id, facets=_run_facets(event)),
                    job=Job(namespace=event.run.job.namespace, name=event.run.job.name, facets={"jobType": job_type}),
                    inputs=[InputDataset(namespace=item.namespace, name=item.name) for item in event.inputs],
                    outputs=[OutputDataset(namespace=item.namespace, name=item.name) for item in event.outputs],
                    producer=PRODUCER)


def _run_facets(event: LineageEvent) -> dict[str, Any]:
    tock = event.tock
    facets: dict[str, Any] = {"tock": TockRunFacet(
        dagId=tock.dag_id, dagRunId=tock.dag_run_id, taskId=tock.task_id, mapIndex=tock.map_index,
        tryNumber=tock.try_number, incarnation=tock.incarnation, state=tock.state, partition=tock.partition,
        offset=tock.offset, index=tock.index, producer=PRODUCER)}
    if event.event_type == "START":
        facets["processing_engine"] = ENGINE
    if event.parent is not None:
        facets["parent"] = _parent(event.parent)
    if event.nominal_start is not None:
        facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=iso_time(event.nominal_start),
            nominalEndTime=None if event.nominal_end is None else iso_time(event.nominal_end), producer=PRODUCER)
    if event.failure is not None:
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=event.failure.message, programmingLanguage="python",
            stackTrace=event.failure.stack_trace or None, producer=PRODUCER)
    return facets


def _parent(parent: RunRef) -> parent_run.ParentRunFacet:
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=parent.run_id), job=parent_run.Job(namespace=parent.job.namespace,
                                                                    name=parent.job.name),
        root=parent_run.Root(run=parent_run.RootRun(runId=parent.run_id),
                             job=parent_run.RootJob(namespace=parent.job.namespace, name=parent.job.name)),
        producer=PRODUCER)


def to_json(event: LineageEvent) -> str:
    """The event as openlineage-python's transports write it (Serde: nulls dropped, keys sorted)."""
    return Serde.to_json(run_event(event))


def message_key(event: LineageEvent) -> str:
    """The Kafka record key openlineage-python's KafkaTransport gives a run event: ``run:<namespace>/<name>``
    of its root job (for a try: its DAG), so every event of a DAG's runs and tries is in one partition, in
    order."""
    job = event.run.job if event.job_type == DAG_JOB or event.parent is None else event.parent.job
    return f"run:{job.namespace}/{job.name}"
