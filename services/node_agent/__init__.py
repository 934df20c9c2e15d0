"""``tock node-agent``: the kubelet stand-in (no container runtime exists here).

It registers a Node, binds pending pods to it, runs each pod's first container as local
processes, enforces memory limits and reports pod status through the real API server.
"""
