"""The secrets file (JSON and YAML) and Kubernetes Secrets (the session's real kube-apiserver) as backends
of the chain, in their place: after the environment, before Tock's store."""

from __future__ import annotations

import base64
import json

import pytest
from kubernetes import client

from infra.kube_client import kube_api
from infra.secrets import secrets_backends
from infra.secrets.file import FileSecrets, SecretsFileError
from infra.secrets.kube import NAME_ANNOTATION, KubernetesSecrets, secret_name
from tock import Connection, Variable
from tock.secrets import SecretsChain, accesses, install

pytestmark = pytest.mark.integration

YAML = """
variables:
  region: eu-west-1
  limits: {cpu: 2, tags: [a, b]}
connections:
  warehouse: postgres://etl:file-pw@db:5432/dw
  api: {conn_type: http, host: api.example, password: api-pw, extra: {timeout: 5}}
"""


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_the_secrets_file_gives_variables_and_connections_in_either_form(tmp_path, suffix):
    import yaml

    path = tmp_path / f"secrets{suffix}"
    path.write_text(YAML if suffix == ".yaml" else json.dumps(yaml.safe_load(YAML)))
    backend = FileSecrets(path)
    assert backend.get_variable("region") == "eu-west-1"
    assert json.loads(backend.get_variable("limits")) == {"cpu": 2, "tags": ["a", "b"]}
    assert Connection.parse(backend.get_connection("warehouse"), "warehouse").password == "file-pw"
    assert Connection.parse(backend.get_connection("api"), "api").extra_dejson == {"timeout": 5}
    assert backend.get_variable("missing") is None and backend.get_connection("missing") is None


@pytest.mark.parametrize("text", ["[1, 2]", "variables: [a]", "other: {}", "{not yaml"])
def test_a_secrets_file_of_another_shape_is_refused_naming_it(tmp_path, text):
    path = tmp_path / "secrets.yaml"
    path.write_text(text)
    with pytest.raises(SecretsFileError, match="secrets.yaml"):
        FileSecrets(path)


def _secret(api, namespace: str, kind: str, name: str, data_key: str, value: str, exact: str | None = None):
    metadata = client.V1ObjectMeta(name=secret_name(kind, name),
                                   annotations={NAME_ANNOTATION: exact} if exact else None)
    client.CoreV1Api(api).create_namespaced_secret(namespace, client.V1Secret(
        metadata=metadata, data={data_key: base64.b64encode(value.encode()).decode()}))


def test_kubernetes_secrets_answer_by_the_naming_rule_in_their_place_in_the_chain(
        kube_cluster, kube_namespace, make_settings, tmp_path):
    namespace = kube_namespace.namespace
    with kube_api(kube_cluster) as api:
        _secret(api, namespace, "variable", "db_password", "value", "kube-pw-1")
        _secret(api, namespace, "variable", "region", "value", "from-kube")
        _secret(api, namespace, "variable", "a.b", "value", "only-a.b", exact="a.b")
        _secret(api, namespace, "connection", "warehouse", "connection", "postgres://etl:kube-pw-2@db/dw")
    secrets_file = tmp_path / "secrets.yaml"
    secrets_file.write_text("variables:\n  region: from-file\n")
    settings = make_settings(**kube_namespace.overrides, secrets_kube_namespace=namespace,
                             secrets_file=str(secrets_file))
    backends = secrets_backends(settings, {"TOCK_VAR_OWNER": "from-env"})
    assert [backend.name for backend in backends] == ["env", "file", "kubernetes", "store"]
    kube = backends[2]
    assert isinstance(kube, KubernetesSecrets)
    assert kube.get_variable("db_password") == "kube-pw-1"
    assert kube.get_variable("DB-PASSWORD") == "kube-pw-1"  # the same Secret name, and no exact name on it
    assert kube.get_variable("a.b") == "only-a.b"
    assert kube.get_variable("A.B") is None  # the Secret names its exact name: a.b
    assert kube.get_variable("missing") is None
    chain = SecretsChain(backends[:3])  # the store would need a broker: its own tests cover it
    install(chain)
    try:
        assert (Variable.get("owner"), Variable.get("region"), Variable.get("db_password")) == (
            "from-env", "from-file", "kube-pw-1")
        assert Connection.get("warehouse").password == "kube-pw-2"
        assert chain.masker.mask("kube-pw-1 kube-pw-2 from-kube") == "*** *** from-kube"
        assert accesses() == [("variable", "owner", "env"), ("variable", "region", "file"),
                              ("variable", "db_password", "kubernetes"), ("connection", "warehouse", "kubernetes")]
    finally:
        install(SecretsChain(backends=()))


def test_standalone_writes_a_fernet_key_once_readable_by_its_owner_only(tmp_path):
    import stat

    from infra.secrets.keys import ensure_key_file, fernet_of
    from infra.settings import load_settings

    settings = load_settings({"TOCK_HOME": str(tmp_path / "home")})
    written = ensure_key_file(settings)
    assert written == tmp_path / "home" / "fernet.key"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    key = written.read_text()
    assert ensure_key_file(settings) is None and written.read_text() == key  # once
    token = fernet_of(settings).encrypt(b"x")
    assert fernet_of(load_settings({"TOCK_HOME": str(tmp_path / "home")})).decrypt(token) == b"x"
    assert ensure_key_file(load_settings({"TOCK_HOME": str(tmp_path / "other"), "TOCK_FERNET_KEY": key.strip()})) \
        is None  # the setting is the key: no file
    assert not (tmp_path / "other").exists()
