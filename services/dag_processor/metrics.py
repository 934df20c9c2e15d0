"""The DAG processor's Prometheus metrics, recorded by the shell from the events it emits."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from schemas import DagParsed, DagParseFailed, ProcessorFinished, ProcessorKilled

PARSE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class DagProcessorMetrics:
    """One registry per processor. Parse time has one histogram for all files (bounded series) and a
    per-file gauge of the latest parse (files are as many as the DAGs folder holds)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.parse_seconds = Histogram("tock_dag_processor_parse_seconds", "time a parser child took to "
                                       "parse a file and exit", buckets=PARSE_BUCKETS, registry=registry)
        self.last_parse_seconds = Gauge("tock_dag_processor_last_parse_seconds", "time the latest parse of "
                                        "each file took", ["file"], registry=registry)
        self.dags_parsed = Counter("tock_dag_processor_dags_parsed", "DAG definitions published",
                                   registry=registry)
        self.failures = Counter("tock_dag_processor_parse_failures", "files that could not be parsed "
                                "(error, timeout, crash)", registry=registry)
        self.kills = Counter("tock_dag_processor_kills", "parser children killed or dead, by reason",
                             ["reason"], registry=registry)
        self.children = Gauge("tock_dag_processor_children", "parser children running", registry=registry)

    def emitted(self, event: object, children: int) -> None:
        """Record one event the processor emitted; ``children`` is the table's size after it."""
        self.children.set(children)
        match event:
            case ProcessorFinished():
                self.parse_seconds.observe(event.duration)
                self.last_parse_seconds.labels(event.file_path).set(event.duration)
            case ProcessorKilled():
                self.kills.labels(event.reason).inc()
            case DagParseFailed():
                self.failures.inc()
            case DagParsed():
                self.dags_parsed.inc()
