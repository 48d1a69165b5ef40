"""Runtimes on the real API server (kwok's simulated pods): a job applied before its
runtime waits and then runs; a runtime edited or deleted while a job runs changes
neither its running attempt nor the next; a runtimeRef to a kind that does not exist is
refused and a merge that gives an invalid job fails it naming the field, while other
jobs run. The queue a runtime gives is admitted by the real Kueue: test_kueue.py. The
same rules without a cluster: tests/unit/controller/test_controller_runtimes.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from multigpu_operator.api.runtime import CLUSTER_RUNTIME_PLURAL
from multigpu_operator.api.spec import API_VERSION, GROUP, PLURAL, VERSION
from support.jobs import RUN_LONG, SIM, JobEnv, condition
from support.operator_process import OperatorProcess
from support.waiting import wait_for

pytestmark = pytest.mark.cluster


class Runtimes:
    """This test's ClusterMultiGPURuntimes, named after its namespace (cluster-scoped
    names never collide between tests or reruns), deleted at its end."""

    def __init__(self, jobs: JobEnv) -> None:
        self.jobs = jobs
        self.suffix = jobs.namespace[-6:]
        self.names: set[str] = set()

    def name(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    def apply(self, base: str, image: str = "trainer:test", **spec: Any) -> str:
        name = self.name(base)
        template = {
            "metadata": {"annotations": dict(RUN_LONG)},
            "spec": {"containers": [{"name": "trainer", "image": image}]},
        }
        body = {
            "apiVersion": API_VERSION,
            "kind": "ClusterMultiGPURuntime",
            "metadata": {"name": name},
            "spec": {
                "mode": "DistributedDataParallel",
                "gpusPerReplica": 0,
                "template": template,
                **spec,
            },
        }
        self.jobs.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        self.names.add(name)
        return name

    def delete(self, base: str) -> None:
        self.jobs.cluster.kubectl("delete", CLUSTER_RUNTIME_PLURAL, self.name(base))

    def cleanup(self) -> None:
        for name in self.names:
            self.jobs.cluster.kubectl(
                "delete", CLUSTER_RUNTIME_PLURAL, name, "--wait=false", "--ignore-not-found"
            )


@pytest.fixture
def runtimes(jobs: JobEnv) -> Iterator[Runtimes]:
    made = Runtimes(jobs)
    yield made
    made.cleanup()


def job(name: str, runtime: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "MultiGPUJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def pod_shapes(jobs: JobEnv, name: str) -> list[tuple[str, str, str]]:
    """Each live pod's name, image and command, as the operator created them."""
    return [
        (p.metadata.name, p.spec.containers[0].image, json.dumps(p.spec.containers[0].command))
        for p in jobs.pods(name)
    ]


def attempts(jobs: JobEnv, name: str) -> set[str]:
    return {p.metadata.labels.get("multigpu.dev/attempt", "") for p in jobs.pods(name)}


def test_a_job_applied_before_its_runtime_waits_then_runs(
    operator: OperatorProcess, jobs: JobEnv, runtimes: Runtimes
) -> None:
    runtime = runtimes.name("late")
    jobs.apply(job("early", runtime, replicas=2))

    def waiting() -> dict[str, Any] | None:
        status = jobs.status("early")
        created = condition(status, "Created")
        return created if created.get("reason") == "RuntimeNotFound" else None

    created = wait_for(waiting, "early waiting for its runtime", timeout=60)
    assert created["status"] == "False"
    assert f"ClusterMultiGPURuntime {runtime}" in created["message"]
    assert jobs.status("early")["phase"] == "Pending"
    assert jobs.pods("early") == []
    runtimes.apply("late")
    wait_for(lambda: jobs.running("early", 2), "early's 2 pods running", timeout=60)
    status = jobs.wait_phase("early", "Running")
    assert (status["runtime"]["kind"], status["runtime"]["name"]) == (
        "ClusterMultiGPURuntime",
        runtime,
    )
    # kubectl get shows which runtime a job uses.
    table = jobs.cluster.kubectl("get", "mgj", "early", "-n", jobs.namespace).stdout
    assert "RUNTIME" in table.splitlines()[0]
    assert runtime in table.splitlines()[1]


@pytest.mark.parametrize("change", ["edited", "deleted"])
def test_a_runtime_changed_while_a_job_runs_leaves_attempt_2_as_attempt_1(
    operator: OperatorProcess, jobs: JobEnv, runtimes: Runtimes, change: str
) -> None:
    runtime = runtimes.apply("base", runPolicy={"backoffLimit": 3})
    jobs.apply(job("steady", runtime, replicas=2))
    wait_for(lambda: jobs.running("steady", 2), "attempt 1 running", timeout=60)
    first = pod_shapes(jobs, "steady")
    if change == "edited":
        runtimes.apply("base", image="trainer:other", runPolicy={"backoffLimit": 0})
    else:
        runtimes.delete("base")
    # A rank fails: every pod is replaced (attempt 2), from the copy the job started with.
    jobs.annotate("steady-1", {f"{SIM}/fail-after": "0s", f"{SIM}/exit-code": "137"})

    def attempt_2() -> bool:
        return jobs.status("steady").get("attempt") == 2 and bool(jobs.running("steady", 2))

    wait_for(attempt_2, "attempt 2 running", timeout=90)
    assert attempts(jobs, "steady") == {"2"}
    assert pod_shapes(jobs, "steady") == first
    status = jobs.status("steady")
    assert status["phase"] == "Running"
    assert status["restarts"] == 1


def test_a_missing_kind_is_refused_and_a_bad_merge_fails_alone(
    operator: OperatorProcess, jobs: JobEnv, runtimes: Runtimes
) -> None:
    nokind = {
        **job("nokind", "x"),
        "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "x"}},
    }
    answer = jobs.cluster.kubectl(
        "apply", "-n", jobs.namespace, "-f", "-", stdin=json.dumps(nokind), check=False
    )
    assert answer.returncode != 0
    assert "spec.runtimeRef.kind" in answer.stderr
    runtime = runtimes.apply("single", mode="DataParallel")
    jobs.apply(job("bad", runtime, replicas=2))
    jobs.apply(job("good", runtime))
    failed = condition(jobs.wait_phase("bad", "Failed"), "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert failed["message"].startswith("spec.replicas: spec.replicas must be 1")
    assert f"ClusterMultiGPURuntime {runtime}" in failed["message"]
    wait_for(lambda: jobs.running("good", 1), "good running", timeout=60)
    assert jobs.pods("bad") == []


def test_a_job_without_mode_or_runtime_is_refused(jobs: JobEnv) -> None:
    bare = {"apiVersion": API_VERSION, "kind": "MultiGPUJob", "metadata": {"name": "bare"}}
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(jobs.api).create_namespaced_custom_object(
            GROUP, VERSION, jobs.namespace, PLURAL, {**bare, "spec": {"replicas": 2}}
        )
    body = str(refused.value.body)
    assert "spec.mode: Invalid value" in body
    assert "spec.mode is required unless spec.runtimeRef" in body


def test_kubectl_explain_and_get_describe_the_runtimes(jobs: JobEnv, runtimes: Runtimes) -> None:
    explain = jobs.cluster.kubectl
    assert (
        "may not set to another value"
        in explain("explain", "clustermultigpuruntime.spec.lockedFields").stdout
    )
    assert (
        "Default for the jobs that use this runtime"
        in explain("explain", "multigpuruntime.spec.gpusPerReplica").stdout
    )
    assert "ClusterMultiGPURuntime" in explain("explain", "multigpujob.spec.runtimeRef").stdout
    name = runtimes.apply("shown", queueName="team-a")
    table = explain("get", "cmgjrt", name).stdout.splitlines()
    assert table[0].split() == ["NAME", "MODE", "LAUNCHER", "GPUS/REPLICA", "IMAGE", "QUEUE", "AGE"]
    assert table[1].split()[:2] == [name, "DistributedDataParallel"]
    assert "team-a" in table[1]
