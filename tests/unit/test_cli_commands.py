"""tock_cli.COMMANDS, the modules `tock <command>` registers (and so imports), checked against
what the modules register: every command reachable, every subcommand of a group listed."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import typer

from tock_cli import COMMANDS, app

# What a service's process must not pay for at start-up (it imports what its command needs).
HEAVY = ("sqlalchemy", "kubernetes", "fastapi", "rich", "celery", "projections")
SERVICES = ("run-task", "scheduler", "dag-processor", "worker", "node-agent")


def _defining_modules(app_: typer.Typer) -> dict[str, set[str]]:
    """Each top-level command name and the modules defining it (for a group: its subcommands)."""
    found = {info.name: {info.callback.__module__} for info in app_.registered_commands}
    for group in app_.registered_groups:
        found[group.name] = {info.callback.__module__ for info in group.typer_instance.registered_commands}
    return found


def test_every_command_has_an_entry_and_no_entry_is_stale():
    assert set(COMMANDS) == set(_defining_modules(app))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_modules_of_a_command_register_it_with_all_its_subcommands(name):
    alone = typer.Typer()
    for module in COMMANDS[name]:
        importlib.import_module(module).register(alone)
    assert name in _defining_modules(alone)
    assert _defining_modules(app)[name] <= set(COMMANDS[name])


@pytest.mark.parametrize("name", SERVICES)
def test_a_service_command_registers_without_heavy_imports(name):
    probe = (f"import sys, tock_cli; tock_cli._register(tock_cli.COMMANDS[{name!r}]); "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split() == []
