"""Security defaults of a training pod: what a non-root, read-only-root trainer needs
from the pod to train, each added only where the template leaves it unset.

- **fsGroup**, when the pod mounts a PersistentVolumeClaim (or an ephemeral volume, which
  is one): a fresh volume belongs to root, and a non-root trainer could not write its
  checkpoints there. With `fsGroup` the kubelet gives the volume to that group and adds
  the group to every process of the pod, whatever user the image runs as. The default is
  the trainer image's group (10001), with `fsGroupChangePolicy: OnRootMismatch` so that a
  volume is not chowned file by file again each time the operator replaces a pod. A
  template that sets `fsGroup` (a platform may require one of its own) keeps it, and its
  own `fsGroupChangePolicy`.
- **A writable /tmp**, when the training container sets `readOnlyRootFilesystem`:
  torchrun's agent creates its log directory with `tempfile.mkdtemp()` and Python finds no
  usable temporary directory otherwise. An `emptyDir` is mounted at /tmp unless the
  container mounts something there itself.

Not defaulted: `runAsUser`, `runAsGroup` and `runAsNonRoot`. They depend on the image
(ours declares `USER 10001`; many CUDA images run as root and would not start under
`runAsNonRoot`), so they stay the template's to set (docs/training.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from multigpu_operator.plan.errors import FieldConflicts

# The trainer image's user and group (images/trainer/Dockerfile).
TRAINER_IMAGE_GID = 10001
# Set on the volume's root, so an unchanged volume is not walked again.
FS_GROUP_CHANGE_POLICY = "OnRootMismatch"
TMP_VOLUME = "mgj-tmp"
TMP_PATH = "/tmp"
# Volume sources that make the kubelet apply fsGroup to a claim's volume.
_CLAIM_SOURCES = ("persistentVolumeClaim", "ephemeral")


def add_security_defaults(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    path: str,
    conflicts: FieldConflicts,
) -> None:
    """Add to `pod_spec` and its training `container` what the template left unset
    (module docstring). `volumes` and `mounts` are the pod's volumes and the container's
    mounts, already checked to be lists of objects."""
    if any(source in volume for volume in volumes for source in _CLAIM_SOURCES):
        _default_fs_group(pod_spec, path, conflicts)
    security = container.get("securityContext")
    if isinstance(security, Mapping) and security.get("readOnlyRootFilesystem") is True:
        _add_tmp(pod_spec, container, volumes, mounts, path, conflicts)


def _default_fs_group(pod_spec: dict[str, Any], path: str, conflicts: FieldConflicts) -> None:
    security = pod_spec.get("securityContext") or {}
    if not isinstance(security, Mapping):
        kind = type(security).__name__
        conflicts.add(f"{path}.securityContext", f"must be an object, not {kind}")
        return
    if security.get("fsGroup") is None:
        pod_spec["securityContext"] = {
            **security,
            "fsGroup": TRAINER_IMAGE_GID,
            "fsGroupChangePolicy": security.get("fsGroupChangePolicy") or FS_GROUP_CHANGE_POLICY,
        }


def _add_tmp(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    path: str,
    conflicts: FieldConflicts,
) -> None:
    if any(str(m.get("mountPath", "")).rstrip("/") == TMP_PATH for m in mounts):
        return  # the template's own /tmp
    if any(v.get("name") == TMP_VOLUME for v in volumes):
        conflicts.add(
            f"{path}.volumes[{TMP_VOLUME}]",
            "is a name the operator uses for /tmp under readOnlyRootFilesystem; rename it",
        )
    pod_spec["volumes"] = [*volumes, {"name": TMP_VOLUME, "emptyDir": {}}]
    container["volumeMounts"] = [*mounts, {"name": TMP_VOLUME, "mountPath": TMP_PATH}]
