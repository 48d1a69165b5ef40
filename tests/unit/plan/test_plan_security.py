"""The security defaults of a training pod (plan/security.py): fsGroup for a claimed
volume, a writable /tmp under a read-only root, each only where the template leaves it
unset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator.api.spec import Job
from multigpu_operator.api.validation import validate_object
from multigpu_operator.plan import PlanError, plan_job
from support.planning import container, job, pod, template, trainer

CLAIM = {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}}
EPHEMERAL = {
    "name": "scratch",
    "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}},
}
READ_ONLY_ROOT = {"readOnlyRootFilesystem": True}
DEFAULT_FS_GROUP = {"fsGroup": 10001, "fsGroupChangePolicy": "OnRootMismatch"}
TMP_VOLUME = {"name": "mgj-tmp", "emptyDir": {}}
TMP_MOUNT = {"name": "mgj-tmp", "mountPath": "/tmp"}


@pytest.mark.parametrize(
    ("pod_spec", "expected"),
    [
        pytest.param({}, None, id="no-volumes-nothing-set"),
        pytest.param(
            {"volumes": [{"name": "data", "emptyDir": {}}]}, None, id="empty-dir-needs-none"
        ),
        pytest.param({"volumes": [CLAIM]}, DEFAULT_FS_GROUP, id="claim-gets-image-group"),
        pytest.param({"volumes": [EPHEMERAL]}, DEFAULT_FS_GROUP, id="ephemeral-claim-too"),
        pytest.param(
            {"volumes": [CLAIM], "securityContext": {"runAsNonRoot": True, "runAsUser": 10001}},
            {"runAsNonRoot": True, "runAsUser": 10001, **DEFAULT_FS_GROUP},
            id="kept-beside-the-templates-fields",
        ),
        pytest.param(
            {"volumes": [CLAIM], "securityContext": {"fsGroup": 2000}},
            {"fsGroup": 2000},
            id="templates-fs-group-wins-unchanged",
        ),
        pytest.param(
            {"volumes": [CLAIM], "securityContext": {"fsGroupChangePolicy": "Always"}},
            {"fsGroup": 10001, "fsGroupChangePolicy": "Always"},
            id="templates-change-policy-wins",
        ),
        pytest.param(
            {"securityContext": {"runAsUser": 1234}},
            {"runAsUser": 1234},
            id="no-claim-template-untouched",
        ),
    ],
)
def test_fs_group_is_defaulted_for_a_claimed_volume(
    pod_spec: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    assert pod(job(tmpl=template(**pod_spec)))["spec"].get("securityContext") == expected


@pytest.mark.parametrize(
    ("trainer_fields", "volumes", "mounts"),
    [
        pytest.param({}, [{"name": "mgj-shm"}], [{"name": "mgj-shm"}], id="writable-root"),
        pytest.param(
            {"securityContext": {"readOnlyRootFilesystem": False}},
            [{"name": "mgj-shm"}],
            [{"name": "mgj-shm"}],
            id="read-only-false",
        ),
        pytest.param(
            {"securityContext": READ_ONLY_ROOT},
            [{"name": "mgj-shm"}, TMP_VOLUME],
            [{"name": "mgj-shm"}, TMP_MOUNT],
            id="read-only-root-gets-tmp",
        ),
        pytest.param(
            {
                "securityContext": READ_ONLY_ROOT,
                "volumeMounts": [{"name": "scratch", "mountPath": "/tmp/"}],
            },
            [{"name": "mgj-shm"}],
            [{"name": "scratch"}, {"name": "mgj-shm"}],
            id="templates-own-tmp-kept",
        ),
    ],
)
def test_a_read_only_root_gets_a_writable_tmp(
    trainer_fields: dict[str, Any], volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
) -> None:
    # Only the names of volumes and mounts the template brought are compared.
    p = pod(job(tmpl=template(container(**trainer_fields))))
    got_volumes = [
        v if v["name"] == "mgj-tmp" else {"name": v["name"]} for v in p["spec"]["volumes"]
    ]
    got_mounts = [
        m if m["name"] == "mgj-tmp" else {"name": m["name"]} for m in trainer(p)["volumeMounts"]
    ]
    assert (got_volumes, got_mounts) == (volumes, mounts)


def test_only_the_training_container_gets_tmp() -> None:
    sidecar = container("logs", securityContext=READ_ONLY_ROOT)
    p = pod(job(tmpl=template(container(securityContext=READ_ONLY_ROOT), sidecar)))
    assert "volumeMounts" not in p["spec"]["containers"][1]
    assert [m["mountPath"] for m in trainer(p)["volumeMounts"]] == ["/dev/shm", "/tmp"]


def test_tmp_needs_no_shm_volume() -> None:
    p = pod(job(shmSize="0", tmpl=template(container(securityContext=READ_ONLY_ROOT))))
    assert p["spec"]["volumes"] == [TMP_VOLUME]
    assert trainer(p)["volumeMounts"] == [TMP_MOUNT]


def test_a_volume_named_like_the_tmp_volume_is_a_conflict() -> None:
    tmpl = template(
        container(securityContext=READ_ONLY_ROOT), volumes=[{"name": "mgj-tmp", "emptyDir": {}}]
    )
    with pytest.raises(PlanError, match=r"volumes\[mgj-tmp\]: is a name the operator uses"):
        pod(job(tmpl=tmpl))


def test_a_pod_security_context_of_the_wrong_shape_is_a_conflict() -> None:
    with pytest.raises(PlanError, match=r"spec.template.spec.securityContext: must be an object"):
        pod(job(tmpl=template(volumes=[CLAIM], securityContext="restricted")))


PVC_EXAMPLE = Path(__file__).resolve().parents[3] / "examples/storage/cpu-ddp-checkpoint-pvc.yaml"


def test_the_checkpoint_volume_example_gets_both_defaults() -> None:
    claim, manifest = yaml.safe_load_all(PVC_EXAMPLE.read_text())
    assert validate_object(manifest) == []
    manifest["metadata"].update(namespace="ml", uid="u")
    for p in plan_job(Job.from_object(manifest)).pods:
        spec = p["spec"]
        assert spec["securityContext"]["fsGroup"] == 10001
        assert spec["securityContext"]["runAsUser"] == 10001  # the image's, not 1000
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert (
            volumes["checkpoints"]["persistentVolumeClaim"]["claimName"]
            == claim["metadata"]["name"]
        )
        assert {"name": "mgj-tmp", "mountPath": "/tmp"} in trainer(p)["volumeMounts"]
