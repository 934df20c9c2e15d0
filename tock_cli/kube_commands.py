"""``tock kube start|stop|status``: the local Kubernetes control plane (etcd, kube-apiserver, a node agent)."""

from __future__ import annotations

import typer

from tock_cli import settings_of

# infra.kube (and the kubernetes client under it) is imported by the commands: `tock --help` and
# `tock standalone` register this module without needing it.

kube_app = typer.Typer(help="The local Kubernetes control plane: a real kube-apiserver and etcd on 127.0.0.1, "
                            "and one node agent (the kubelet stand-in).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(kube_app, name="kube")


def _local_kube(ctx: typer.Context):
    from infra.kube import LocalKube

    return LocalKube(settings_of(ctx))


@kube_app.command("start")
def kube_start(ctx: typer.Context,
               agent: bool = typer.Option(True, "--agent/--no-agent",
                                          help="Also start one node agent (`tock node-agent`) for this host.")) -> None:
    """Start etcd and kube-apiserver (built once, ~13 minutes), write the kubeconfig, create the namespace."""
    from infra.kube import KubeError

    local = _local_kube(ctx)
    if not local.built():
        typer.echo("kube-apiserver and etcd are built once per machine (~13 minutes on 2 cores)", err=True)
    try:
        status = local.start(with_agent=agent)
    except KubeError as error:
        typer.echo(f"tock kube: {error}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"kube {status.describe()}")
    typer.echo(f"kubeconfig {local.settings.resolved_kubeconfig} (namespace {local.settings.kube_namespace})")


@kube_app.command("stop")
def kube_stop(ctx: typer.Context) -> None:
    """Stop the node agent, kube-apiserver and etcd; data and credentials stay for the next start."""
    stopped = _local_kube(ctx).stop()
    typer.echo("kube stopped" if stopped else "kube was not running")


@kube_app.command("status")
def kube_status(ctx: typer.Context) -> None:
    """Say whether the local API server runs and answers /readyz (exit 3 when not)."""
    status = _local_kube(ctx).status()
    typer.echo(f"kube {status.describe()}")
    if not status.ready:
        raise typer.Exit(3)
