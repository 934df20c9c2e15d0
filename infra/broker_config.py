"""What the local broker's nodes are: their ports, folders and server.properties.

One node (the default) keeps the layout Tock always had: everything under ``<home>/broker``.
A cluster of N nodes (``tock broker start --nodes N``) is N combined broker+controller KRaft
nodes with ids 1..N, each under ``<home>/broker/node-<i>``, with a static controller quorum of
all of them; ``<home>/broker/nodes`` remembers N.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infra.settings import Settings, local_ports


def replication_for(brokers: int) -> tuple[int, int]:
    """Replication factor and min.insync.replicas for a cluster of ``brokers`` brokers.

    3 or more: 3 / 2 (one broker may be lost and writes go on, each acknowledged record on two).
    Two: 2 / 2, durability over availability: an acknowledged record is always on both, so losing
    either broker stops writes until it is back (use three for both). One: 1 / 1, as always.
    """
    if brokers >= 3:
        return 3, 2
    return (2, 2) if brokers == 2 else (1, 1)


@dataclass(frozen=True)
class BrokerNode:
    """One node of the local broker: id (1-based, Kafka's node.id), ports and folder."""

    node_id: int
    client_port: int
    controller_port: int
    root: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def pid_file(self) -> Path:
        return self.root / "broker.pid"

    @property
    def config_file(self) -> Path:
        return self.root / "server.properties"


def cluster_nodes(settings: Settings, nodes: int) -> list[BrokerNode]:
    """The nodes of a local broker of ``nodes`` nodes under ``settings.home``."""
    root = settings.home / "broker"
    clients, controllers = local_ports(settings.broker_port, settings.controller_port, nodes)
    return [BrokerNode(index + 1, clients[index], controllers[index],
                       root if nodes == 1 else root / f"node-{index + 1}") for index in range(nodes)]


def server_properties(settings: Settings, node: BrokerNode, cluster: list[BrokerNode]) -> str:
    """server.properties of ``node`` in ``cluster`` (every node, itself included)."""
    replicas, min_isr = replication_for(len(cluster))
    lines = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        **_quorum(node, cluster),
        "listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},"
                                f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(node.data_dir),
        "num.partitions": str(settings.partitions),
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "unclean.leader.election.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "log.retention.hours": "-1",
        "delete.topic.enable": "true",
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def _quorum(node: BrokerNode, cluster: list[BrokerNode]) -> dict[str, str]:
    # One node: a dynamic quorum formatted --standalone, as Tock's broker always was (existing
    # data dirs keep working). Several: a static quorum of every node; membership never changes
    # on loopback, and static voters need no directory ids at format time.
    if len(cluster) == 1:
        return {"controller.quorum.bootstrap.servers": f"127.0.0.1:{node.controller_port}"}
    return {"controller.quorum.voters": ",".join(f"{peer.node_id}@127.0.0.1:{peer.controller_port}"
                                                 for peer in cluster)}


LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""
