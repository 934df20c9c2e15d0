"""From the client's V1Pod to the core's PodView (only the first container is kept)."""

from __future__ import annotations

import logging

from services.node_agent.core.model import ContainerSpec, PodView
from services.node_agent.core.quantity import QuantityError, memory_bytes

log = logging.getLogger("tock.node_agent")

HOSTNAME_LABEL = "kubernetes.io/hostname"


def pod_view(pod) -> PodView:
    """The fields of a V1Pod the agent acts on."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    start = status.start_time if status else None
    return PodView(
        name=meta.name, uid=meta.uid, node_name=spec.node_name or "",
        phase=(status.phase if status and status.phase else "Pending"),
        deleting=meta.deletion_timestamp is not None,
        grace_seconds=_grace(meta, spec),
        pinned_host=(spec.node_selector or {}).get(HOSTNAME_LABEL),
        container=container_spec(pod),
        start_time=start.strftime("%Y-%m-%dT%H:%M:%SZ") if start else None,
    )


def container_spec(pod) -> ContainerSpec:
    """The first container: command + args, plain ``value`` env entries, memory limit."""
    container = pod.spec.containers[0]
    env = tuple((item.name, item.value or "") for item in container.env or () if item.value_from is None)
    return ContainerSpec(name=container.name, image=container.image or "",
                         command=tuple(container.command or ()) + tuple(container.args or ()),
                         env=env, memory_limit=_memory_limit(pod.metadata.name, container))


def _grace(meta, spec) -> int:
    if meta.deletion_grace_period_seconds is not None:
        return meta.deletion_grace_period_seconds
    return spec.termination_grace_period_seconds if spec.termination_grace_period_seconds is not None else 30


def _memory_limit(pod_name: str, container) -> int | None:
    limits = (container.resources.limits if container.resources else None) or {}
    if "memory" not in limits:
        return None
    try:
        return memory_bytes(str(limits["memory"]))
    except QuantityError as error:  # the API server validates quantities: should not happen
        log.warning("pod %s: %s; no memory limit enforced", pod_name, error)
        return None
