"""``tock node-agent``: the kubelet stand-in (no container runtime exists here)."""

from __future__ import annotations

import os
import re

import typer

from tock_cli import settings_of

NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def register(app: typer.Typer) -> None:
    app.command("node-agent")(node_agent)


def node_agent(ctx: typer.Context,
               node: str = typer.Option(..., "--node", help="This node's name (a DNS subdomain): the Node "
                                                             "object, its Lease, kubernetes.io/hostname."),
               lease_seconds: float = typer.Option(5.0, "--lease-seconds", min=0.5,
                                                   help="Seconds between renewals of the node's Lease."),
               grace_cap_seconds: float = typer.Option(30.0, "--grace-cap-seconds", min=0,
                                                       help="Longest wait between SIGTERM and SIGKILL of a "
                                                            "deleted pod, whatever its grace period.")) -> None:
    """The KUBELET STAND-IN (no container runtime here): run pods as local processes.

    Registers Node NAME (Ready, with a Lease in kube-node-lease), binds pending pods of
    TOCK_KUBE_NAMESPACE to itself (honouring nodeSelector kubernetes.io/hostname), runs the
    FIRST container of each pod bound to it as local processes (command + args, plain env
    values; images, probes, volumes and other containers are ignored), kills a pod over its
    memory limit (OOMKilled, 137), and reports status through the real API server.
    Files under TOCK_HOME/node-agent/NAME. SIGTERM: stop, leaving the pods running for the
    next agent on this node; kill -9: the pods die with it, like a lost node.
    """
    from services.node_agent.agent import AgentOptions, NodeAgent
    from services.node_agent.kube_api import KubeNodeApi, load_api_client

    if not NODE_NAME.match(node):
        typer.echo(f"tock node-agent: --node {node!r} is not a DNS subdomain (lower case, digits, '-', '.')",
                   err=True)
        raise typer.Exit(2)
    settings = settings_of(ctx)
    try:
        api_client = load_api_client(settings.resolved_kubeconfig)
    except (OSError, ValueError) as error:
        typer.echo(f"tock node-agent: {error}", err=True)
        raise typer.Exit(2) from None
    options = AgentOptions(node=node, home=settings.home, namespace=settings.kube_namespace,
                           lease_seconds=lease_seconds, grace_cap_seconds=grace_cap_seconds)
    api = KubeNodeApi(api_client, settings.kube_namespace, node)
    # Pods inherit the agent's environment (without TOCK_*): read here, once, at start-up.
    raise typer.Exit(NodeAgent(options, api, dict(os.environ)).run())
