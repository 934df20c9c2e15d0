"""The local Kubernetes control plane (`tock kube start|stop|status`)."""

from infra.kube.control_plane import ETCD_VERSION, K8S_VERSION, KubeError, KubeStatus, LocalKube

__all__ = ["ETCD_VERSION", "K8S_VERSION", "KubeError", "KubeStatus", "LocalKube"]
