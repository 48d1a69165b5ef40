"""Jobs that cannot start, on the real control plane: containers the kubelet cannot start
(spec.startPolicy), pods no node can ever fit, and an eviction. A crash-looping sidecar,
an OOM-killed rank and the other reasons a container cannot start are
tests/unit/policy/test_decide_start.py's and test_policy_containers.py's (a real kubelet's OOM
kill, test_real_pods.py's).

kwok runs no containers, so the kubelet's words are written the way a kubelet writes
them: through the pods' status subresource. Pods annotated with kwok's
`pod-ready.stage.kwok.x-k8s.io/delay` stay in ContainerCreating until then, as a pod
whose image is being pulled does. Each case checks the condition's reason and message,
the Event, `kubectl get mgj`, the operator's metrics where one exists, and that no pod is
left running when the job fails.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster.node_manifests import gpu_node
from support.events import list_events
from support.jobs import RUN_LONG, JobEnv, condition, job_manifest
from support.operator_looks import looked_at
from support.operator_process import OperatorProcess
from support.waiting import wait_for

# kwok's own knob: the pod stays in ContainerCreating this long (an image being pulled).
HOLD = {"pod-ready.stage.kwok.x-k8s.io/delay": "1h"}


def metric(operator: OperatorProcess, name: str, **labels: str) -> float:
    """The value of one sample of the operator's metrics (0 if it has none)."""
    for family in text_string_to_metric_families(operator.metrics()):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return 0.0


def warnings(jobs: JobEnv, name: str) -> dict[str, str]:
    """The job's Warning events: reason -> note (the latest of each reason)."""
    return {
        e["reason"]: e.get("note", "")
        for e in list_events(jobs.api, jobs.namespace)
        if e.get("type") == "Warning" and e.get("regarding", {}).get("name") == name
    }


def printed_reason(jobs: JobEnv, name: str) -> str:
    """The REASON column of `kubectl get mgj`."""
    header, row = jobs.cluster.kubectl("get", "mgj", name, "-n", jobs.namespace).stdout.splitlines()
    return row.split()[header.split().index("REASON")]


def containers_created(jobs: JobEnv, name: str, n: int) -> list[Any]:
    """The job's `n` pods once kwok has them bound and in ContainerCreating."""

    def probe() -> list[Any]:
        pods = jobs.pods(name)
        return pods if len(pods) == n and all(p.status.pod_ip for p in pods) else []

    return wait_for(probe, f"{n} pods of {name} created on nodes")


def set_waiting(jobs: JobEnv, pod: str, reason: str, message: str) -> None:
    """What the kubelet writes while a container cannot start."""
    state = {"waiting": {"reason": reason, "message": message}}
    trainer = {"name": "trainer", "image": "trainer:test", "ready": False, "state": state}
    status = {"containerStatuses": [trainer]}
    jobs.core.patch_namespaced_pod_status(pod, jobs.namespace, {"status": status})


def nothing_left_running(jobs: JobEnv, name: str) -> None:
    """No pod of the job is pending or running (cleanPodPolicy Running keeps the finished
    ones, with their logs)."""

    def settled() -> bool:
        return all(p.status.phase in ("Succeeded", "Failed") for p in jobs.pods(name))

    wait_for(settled, f"no pod of {name} pending or running")


PULL = 'Back-off pulling image "trainer:test": not found'
INVALID = 'Failed to apply default image tag "Trainer:Test": invalid reference format'


@pytest.mark.parametrize(
    ("reason", "kubelet", "timeout", "said"),
    [
        pytest.param(
            "ImagePullBackOff",
            PULL,
            3,
            "still failing after startPolicy.timeoutSeconds (3s)",
            id="image-pull-back-off-after-the-timeout",
        ),
        pytest.param(
            "InvalidImageName", INVALID, 300, "no retry can fix this", id="invalid-image-at-once"
        ),
    ],
)
def test_a_container_that_cannot_start_fails_the_job_and_frees_its_pods(
    reason: str,
    kubelet: str,
    timeout: int,
    said: str,
    operator: OperatorProcess,
    jobs: JobEnv,
) -> None:
    jobs.apply(job_manifest("stuck", annotations=HOLD, startPolicy={"timeoutSeconds": timeout}))
    containers_created(jobs, "stuck", 2)
    set_waiting(jobs, "stuck-1", reason, kubelet)
    status = jobs.wait_phase("stuck", "Failed", timeout=30)

    failed = condition(status, "Failed")
    assert (failed["reason"], status["reason"]) == (reason, reason)
    assert failed["message"].startswith(f"pod stuck-1 (replica 1) container trainer: {reason}")
    assert kubelet in failed["message"]
    assert said in failed["message"]
    assert 'image "trainer:test"' in failed["message"]
    assert kubelet in wait_for(lambda: warnings(jobs, "stuck").get(reason), "the Warning event")
    assert printed_reason(jobs, "stuck") == reason
    assert metric(operator, "mgj_jobs_failed_total", namespace=jobs.namespace) == 1
    nothing_left_running(jobs, "stuck")


def test_a_retried_problem_first_says_what_the_job_waits_for(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("pulling", annotations=HOLD, startPolicy={"timeoutSeconds": 300}))
    containers_created(jobs, "pulling", 2)
    set_waiting(jobs, "pulling-0", "ErrImagePull", PULL)

    def reported() -> dict[str, Any] | None:
        status = jobs.status("pulling")
        return status if status.get("reason") == "ErrImagePull" else None

    status = wait_for(reported, "the pull error on the job")
    running = condition(status, "Running")
    assert (status["phase"], running["status"]) == ("Pending", "False")
    assert running["message"] == (
        f'pod pulling-0 (replica 0) container trainer: ErrImagePull (image "trainer:test"): '
        f"{PULL}; the job fails if this lasts startPolicy.timeoutSeconds (300s)"
    )
    assert status["cannotStartSince"]
    assert (
        wait_for(lambda: warnings(jobs, "pulling").get("ErrImagePull"), "the event")
        == (running["message"])
    )
    assert printed_reason(jobs, "pulling") == "ErrImagePull"
    assert metric(operator, "mgj_job_info", job="pulling", phase="Pending") == 1


def test_with_on_timeout_wait_the_job_waits_and_runs_once_the_image_is_there(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    manifest = job_manifest(
        "patient", annotations=HOLD, startPolicy={"timeoutSeconds": 1, "onTimeout": "Wait"}
    )
    jobs.apply(manifest)
    containers_created(jobs, "patient", 2)
    set_waiting(jobs, "patient-0", "ImagePullBackOff", PULL)
    wait_for(lambda: jobs.status("patient").get("reason") == "ImagePullBackOff", "reported")
    # A pass past timeoutSeconds (the timer started before the report; the status's
    # timestamps have whole seconds) finds the job still waiting.
    looked_at(operator, jobs, "patient", after=time.time() + 1 + 1)
    status = jobs.status("patient")
    assert status["phase"] == "Pending"
    assert (
        "waiting for it to heal (startPolicy.onTimeout Wait)"
        in (condition(status, "Running")["message"])
    )
    assert len(jobs.pods("patient")) == 2

    # The image is pushed: kwok starts the containers now.
    for pod in ("patient-0", "patient-1"):
        jobs.annotate(pod, {"pod-ready.stage.kwok.x-k8s.io/delay": "0s"})
    status = jobs.wait_phase("patient", "Running", timeout=30)
    assert (status["reason"], condition(status, "Running")["reason"]) == (
        "PodsRunning",
        "PodsRunning",
    )
    assert "cannotStartSince" not in status


def test_a_job_no_node_can_ever_fit_says_so_at_once_then_fails_instead_of_requeueing(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    # The cluster's GPU nodes have 8 GPUs each.
    jobs.apply(job_manifest("huge", gpus=16, gang={"timeoutSeconds": 5}))

    def said() -> dict[str, Any] | None:
        status = jobs.status("huge")
        return status if condition(status, "Scheduled").get("reason") == "NoNodeFits" else None

    status = wait_for(said, "NoNodeFits on the job", timeout=30)
    message = condition(status, "Scheduled")["message"]
    # "it may use": the real node carries a taint the job does not tolerate.
    assert re.match(
        r"no node can ever fit pod huge-0: it asks for 16 nvidia.com/gpu, "
        r"the largest node (it may use )?has 8",
        message,
    ), message
    assert "Insufficient nvidia.com/gpu" in message  # the scheduler's own words follow
    assert "the job fails after gang.timeoutSeconds (5s)" in message
    assert (status["phase"], status["reason"]) == ("Pending", "NoNodeFits")
    assert printed_reason(jobs, "huge") == "NoNodeFits"
    assert "has 8" in wait_for(
        lambda: warnings(jobs, "huge").get("NoNodeFits"), "the Warning event"
    )

    status = jobs.wait_phase("huge", "Failed", timeout=30)
    assert (condition(status, "Failed")["reason"], status["reason"]) == ("NoNodeFits", "NoNodeFits")
    assert status["attempt"] == 1  # never requeued
    assert metric(operator, "mgj_jobs_failed_total", namespace=jobs.namespace) == 1
    nothing_left_running(jobs, "huge")


def test_a_new_node_is_seen_and_its_taint_decides_whether_a_job_fits(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    team = f"team-{uuid.uuid4().hex[:6]}"
    node = gpu_node(f"big-{team}", 16)
    node["spec"]["taints"].append({"key": "team", "value": team, "effect": "NoSchedule"})
    jobs.cluster.kubectl("create", "-f", "-", stdin=json.dumps(node))
    try:
        jobs.cluster.wait_nodes_ready([node["metadata"]["name"]])
        gang = {"timeoutSeconds": 300}
        jobs.apply(job_manifest("outsider", replicas=1, gpus=16, gang=gang))

        def said() -> dict[str, Any] | None:
            cond = condition(jobs.status("outsider"), "Scheduled")
            return cond if cond.get("reason") == "NoNodeFits" else None

        message = wait_for(said, "NoNodeFits for a job without the toleration")["message"]
        assert message.startswith(
            "no node can ever fit pod outsider-0: it asks for 16 nvidia.com/gpu, the largest "
            "node it may use has 8"
        )
        member = job_manifest("member", replicas=1, gpus=16, annotations=RUN_LONG, gang=gang)
        toleration = {"key": "team", "operator": "Equal", "value": team, "effect": "NoSchedule"}
        member["spec"]["template"]["spec"]["tolerations"] = [toleration]
        jobs.apply(member)
        status = jobs.wait_phase("member", "Running", timeout=30)
        assert status["reason"] == "PodsRunning"
        assert condition(status, "Scheduled") == {}  # never waited
    finally:
        jobs.cluster.kubectl("delete", "node", node["metadata"]["name"], "--wait=false")


def test_an_evicted_pod_is_retried_with_the_kubelets_message(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("evicted", annotations=RUN_LONG, runPolicy={"backoffLimit": 1}))
    wait_for(lambda: jobs.running("evicted", 2), "2 pods Running")
    kubelet = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi."
    disruption = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": kubelet,
    }
    evicted = {"phase": "Failed", "reason": "Evicted", "message": kubelet}
    jobs.core.patch_namespaced_pod_status(
        "evicted-0", jobs.namespace, {"status": {**evicted, "conditions": [disruption]}}
    )

    def restarted() -> dict[str, Any] | None:
        status = jobs.status("evicted")
        return status if status.get("attempt") == 2 else None

    status = wait_for(restarted, "a new attempt")
    failure = status["lastFailure"]
    assert (failure["pod"], failure["fault"]) == ("evicted-0", "Evicted")
    assert failure.get("exitCode") is None  # none: the kubelet ended it
    # An infrastructure fault: the Warning's reason names it; not counted against
    # backoffLimit, but a restart all the same.
    assert status["restarts"] == 0
    assert status["infrastructureRestarts"] == 1
    # The Warning keeps the message; the Restarting condition says it only until the new
    # attempt's pods run, which on simulated nodes can be before this test reads it.
    note = wait_for(lambda: warnings(jobs, "evicted").get("Evicted"), "the Warning event")
    assert "pod evicted-0 (replica 0) failed: disrupted (TerminationByKubelet)" in note
    assert kubelet in note
    jobs.wait_phase("evicted", "Running", timeout=30)
    assert metric(operator, "mgj_restarts_total", namespace=jobs.namespace) == 1
