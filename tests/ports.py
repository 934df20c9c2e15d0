"""Free loopback ports for the services a test starts itself, drawn at random below the kernel's
ephemeral range.

A port the kernel handed out (``bind(("127.0.0.1", 0))``) comes from the ephemeral range, the same
range outgoing connections take their source ports from. Between the probe and the service's own
bind, one of the suite's many connections can take it: CI saw etcd fail with "bind: address
already in use" on such a port. Below the range, only another listener can take a port, and a
draw at random from twelve thousand makes two of the suite's own draws meet rarely.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int) -> bool:
    """Whether a TCP port on 127.0.0.1 is free now."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int, *taken: int) -> int:
    """The first of ``count`` consecutive free ports, none of them in ``taken``."""
    highest = max(LOWEST + count + 1, _ephemeral_start()) - count
    while True:
        first = random.randrange(LOWEST, highest)
        ports = range(first, first + count)
        if not set(ports) & set(taken) and all(bindable(port) for port in ports):
            return first


def free_port(*taken: int) -> int:
    """A free port, not one of ``taken``."""
    return free_ports(1, *taken)
