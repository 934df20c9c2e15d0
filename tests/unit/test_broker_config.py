"""The local broker's layout without starting it: ports, folders, server.properties of one node and
of a cluster, the remembered node count, and the errors that name a wrong node or port."""

from __future__ import annotations

import subprocess
import sys

import pytest

from infra.broker import BrokerError, LocalKafkaBroker
from infra.broker_config import cluster_nodes, replication_for, server_properties
from infra.settings import SettingsError, load_settings
from tests.scenarios.scheduler_support import REPO


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize(("brokers", "expected"), [(1, (1, 1)), (2, (2, 2)), (3, (3, 2)), (5, (3, 2))])
def test_replication_follows_the_broker_count(brokers, expected):
    assert replication_for(brokers) == expected


def test_one_node_keeps_the_layout_and_ports_it_always_had(tmp_path):
    settings = load_settings({"TOCK_HOME": str(tmp_path)})
    [node] = cluster_nodes(settings, 1)
    assert (node.root, node.client_port, node.controller_port) == (tmp_path / "broker", 9092, 9093)
    assert node.pid_file == tmp_path / "broker" / "broker.pid"
    config = properties(server_properties(settings, node, [node]))
    assert config["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
    assert "controller.quorum.voters" not in config
    assert config["offsets.topic.replication.factor"] == config["transaction.state.log.min.isr"] == "1"
    assert settings.bootstrap == "127.0.0.1:9092"


def test_three_nodes_each_with_its_folder_ports_and_the_quorum_of_all(tmp_path):
    settings = load_settings({"TOCK_HOME": str(tmp_path), "TOCK_BROKER_PORT": "24000", "TOCK_BROKER_NODES": "3"})
    nodes = cluster_nodes(settings, 3)
    assert [(node.node_id, node.client_port, node.controller_port) for node in nodes] == \
        [(1, 24000, 24003), (2, 24001, 24004), (3, 24002, 24005)]
    assert [node.root for node in nodes] == [tmp_path / "broker" / f"node-{index}" for index in (1, 2, 3)]
    config = properties(server_properties(settings, nodes[1], nodes))
    assert config["node.id"] == "2"
    assert config["controller.quorum.voters"] == "1@127.0.0.1:24003,2@127.0.0.1:24004,3@127.0.0.1:24005"
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:24001,CONTROLLER://127.0.0.1:24004"
    assert config["log.dirs"] == str(tmp_path / "broker" / "node-2" / "data")
    assert {key: config[key] for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                                         "transaction.state.log.min.isr", "min.insync.replicas",
                                         "default.replication.factor", "unclean.leader.election.enable")} == {
        "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2", "min.insync.replicas": "2", "default.replication.factor": "3",
        "unclean.leader.election.enable": "false"}
    assert settings.bootstrap == "127.0.0.1:24000,127.0.0.1:24001,127.0.0.1:24002"


def test_the_remembered_node_count_is_read_once_at_start_up(tmp_path):
    assert load_settings({"TOCK_HOME": str(tmp_path)}).local_broker_nodes == 1
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "nodes").write_text("3\n")
    settings = load_settings({"TOCK_HOME": str(tmp_path)})
    assert settings.broker_nodes == 3
    assert settings.bootstrap == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert LocalKafkaBroker(settings).formatted_nodes() == 3
    assert load_settings({"TOCK_HOME": str(tmp_path), "TOCK_BROKER_NODES": "1"}).local_broker_nodes == 1


def test_a_single_node_home_from_before_the_count_was_remembered_is_one_node(tmp_path):
    (tmp_path / "broker" / "data").mkdir(parents=True)
    (tmp_path / "broker" / "data" / "meta.properties").write_text("node.id=1\n")
    assert LocalKafkaBroker(load_settings({"TOCK_HOME": str(tmp_path)})).formatted_nodes() == 1


def test_a_different_node_count_than_the_home_was_made_with_is_refused(tmp_path):
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "nodes").write_text("3\n")
    broker = LocalKafkaBroker(load_settings({"TOCK_HOME": str(tmp_path)}), nodes=1)
    with pytest.raises(BrokerError, match=r"was made with 3 node\(s\), not 1"):
        broker.start()


@pytest.mark.parametrize("node_id", [0, 4, -1])
def test_a_node_outside_one_to_n_is_named(tmp_path, node_id):
    broker = LocalKafkaBroker(load_settings({"TOCK_HOME": str(tmp_path), "TOCK_BROKER_NODES": "3"}))
    with pytest.raises(BrokerError, match=rf"there is no node {node_id}: .* numbered 1\.\.3"):
        broker.node(node_id)


def test_controller_ports_overlapping_client_ports_are_refused(tmp_path):
    with pytest.raises(SettingsError, match=r"overlap on \[9093, 9094\]; set TOCK_CONTROLLER_PORT to 9095"):
        load_settings({"TOCK_HOME": str(tmp_path), "TOCK_BROKER_NODES": "3", "TOCK_CONTROLLER_PORT": "9093"})
    one_node = load_settings({"TOCK_HOME": str(tmp_path), "TOCK_CONTROLLER_PORT": "9093"})
    with pytest.raises(BrokerError, match="overlap"):  # --nodes 3 given on the command line
        LocalKafkaBroker(one_node, nodes=3)
    with pytest.raises(SettingsError, match="past port 65535"):
        load_settings({"TOCK_BROKER_PORT": "65534", "TOCK_BROKER_NODES": "3"})


def cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tock_cli", "broker", *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "TOCK_HOME": str(tmp_path)}, cwd=REPO, timeout=60)


def test_the_cli_names_a_bad_node_and_a_bad_node_count(tmp_path):
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "nodes").write_text("3\n")
    refused = cli(tmp_path, "stop", "--node", "7")
    assert refused.returncode == 1 and "there is no node 7" in refused.stderr
    fresh = tmp_path / "fresh"
    not_yet = cli(fresh, "start", "--node", "1")
    assert not_yet.returncode == 1 and "start it whole first" in not_yet.stderr
    too_many = cli(fresh, "start", "--nodes", "12")
    assert too_many.returncode == 2 and "--nodes" in too_many.stderr


def test_every_producer_waits_for_all_in_sync_replicas(tmp_path):
    """Tock's producers (KafkaEventLog, TransactionalSession) all start from producer_config:
    idempotent, which librdkafka only allows with acks=all."""
    from infra.log.config import producer_config

    config = producer_config(load_settings({"TOCK_HOME": str(tmp_path)}), "test")
    assert config["acks"] == "all" and config["enable.idempotence"] is True


def test_cluster_ids_never_start_with_a_dash():
    """StorageTool reads ``-t -abc...`` as an option; one id in 64 started with "-" and formatting failed."""
    from infra.broker import kafka_cluster_id

    ids = [kafka_cluster_id() for _ in range(2000)]
    assert not [cluster_id for cluster_id in ids if cluster_id.startswith("-")]
    assert all(len(cluster_id) == 22 for cluster_id in ids)
