"""The event catalog docs/asyncapi.json validates with the real AsyncAPI CLI (@asyncapi/cli from npm, installed
once by infra/scripts/asyncapi-cli.sh), and the API serves exactly it.

`asyncapi validate` checks the document against the AsyncAPI 3.0.0 schema and its rules (references,
operations' messages, channel parameters, Kafka bindings) and converts each Avro payload with the Avro
schema parser it bundles; that CLI does not run the parser's own validation on a 3.0 document, so the
test runs it (avsc's Type.forSchema, from the CLI's node_modules) on every payload. A missing CLI is a
failure: the test installs it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from infra.settings import load_settings
from schemas.catalog import AVRO_FORMAT, CATALOG_PATH
from services.api.app import create_app

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # a first install takes minutes

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / CATALOG_PATH
TOKEN = "a-test-admin-token-of-32-characters!"

# The Avro schema parser the CLI registers, validating each Avro payload of a document (argv[1]).
VALIDATE_AVRO = """
const fs = require('fs');
const { AvroSchemaParser } = require('@asyncapi/avro-schema-parser');
(async () => {
  const document = JSON.parse(fs.readFileSync(process.argv[1], 'utf8'));
  const parser = AvroSchemaParser(), found = {};
  for (const [id, message] of Object.entries(document.components.messages)) {
    if (message.payload.schemaFormat !== process.argv[2]) continue;
    found[id] = await parser.validate({ data: message.payload.schema, path: ['components', 'messages', id] });
  }
  console.log(JSON.stringify(found));
})();
"""


@pytest.fixture(scope="module")
def asyncapi() -> Path:
    """The CLI's command, installed from the npm registry the first time."""
    result = subprocess.run(["bash", str(REPO / "infra" / "scripts" / "asyncapi-cli.sh")], capture_output=True,
                            text=True)
    if result.returncode != 0:
        pytest.fail(f"infra/scripts/asyncapi-cli.sh failed:\n{result.stderr}", pytrace=False)
    command = Path(result.stdout.strip().splitlines()[-1])
    assert command.is_file(), command
    return command


def _validate(asyncapi: Path, document: Path) -> subprocess.CompletedProcess[str]:
    # Warnings fail too: only "information" (a newer AsyncAPI version exists) passes.
    return subprocess.run([str(asyncapi), "validate", str(document), "--fail-severity", "warn"],
                          capture_output=True, text=True, timeout=600)


def _avro_problems(asyncapi: Path, document: Path) -> dict[str, list[dict]]:
    modules = asyncapi.parent.parent / "node_modules"
    result = subprocess.run(["node", "-e", VALIDATE_AVRO, str(document), AVRO_FORMAT], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "NODE_PATH": str(modules)},
                            check=True)
    return json.loads(result.stdout)


def test_the_committed_catalog_is_a_valid_asyncapi_document(asyncapi):
    result = _validate(asyncapi, CATALOG)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "is valid" in output, output


def test_the_cli_refuses_a_broken_catalog(asyncapi, tmp_path):
    # What the test above relies on: the CLI does fail a document with errors.
    document = json.loads(CATALOG.read_text(encoding="utf-8"))
    del document["channels"]["events"]["messages"]["TaskQueued.v1"]  # an operation still reads it
    broken = tmp_path / "asyncapi.json"
    broken.write_text(json.dumps(document), encoding="utf-8")
    result = _validate(asyncapi, broken)
    assert result.returncode != 0, result.stdout
    assert "operations.read-events.messages" in result.stdout + result.stderr


def test_every_avro_payload_is_valid_to_the_cli_s_avro_schema_parser(asyncapi, tmp_path):
    checked = _avro_problems(asyncapi, CATALOG)
    events = json.loads(CATALOG.read_text(encoding="utf-8"))["components"]["messages"]
    assert set(checked) == {key for key, message in events.items() if "x-tock-event" in message}
    assert {key: problems for key, problems in checked.items() if problems} == {}
    events["TaskQueued.v1"]["payload"]["schema"]["fields"][0]["type"] = "text"  # no such Avro type
    broken = tmp_path / "asyncapi.json"
    broken.write_text(json.dumps({"components": {"messages": events}}), encoding="utf-8")
    assert "undefined type name: dev.tock.text" in json.dumps(_avro_problems(asyncapi, broken)["TaskQueued.v1"])


def test_the_api_serves_the_committed_catalog_to_a_viewer(tmp_path):
    settings = load_settings({"TOCK_HOME": str(tmp_path / "home"), "TOCK_API_TOKEN": TOKEN})
    with TestClient(create_app(settings)) as client:
        assert client.get("/api/v1/catalog").status_code == 401
        assert client.get("/api/v1/catalog", headers={"Authorization": "Bearer wrong"}).status_code == 401
        answer = client.get("/api/v1/catalog", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.content == CATALOG.read_bytes()
