"""Infrastructure faults and failure-policy rules through the pure reconcile pass: whole
lives of a job, with pods and nodes as plain dicts (no cluster)."""

from __future__ import annotations

from typing import Any

from support.lifecycle import JobRun, job_object
from support.policy import gpu_node

NODES = ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
TAINTED_BY = "DeletionByTaintManager"
RULES = "spec.runPolicy.failurePolicy.rules"


def started(run: JobRun) -> None:
    """Pods created and running, replica i on gpu-node-i."""
    run.nodes = [gpu_node(n) for n in NODES]
    run.step()
    run.step()
    for i, name in enumerate(sorted(run.pods)):
        run.set_phase(name, "Running")
        run.pods[name]["spec"]["nodeName"] = NODES[i]
    run.step()
    assert run.status["phase"] == "Running"


def lose_node(run: JobRun, node: str) -> str:
    """The node stops answering: the node lifecycle controller taints it and evicts
    its pods (DisruptionTarget, then deletion that the lost kubelet cannot finish)."""
    for n in run.nodes:
        if n["metadata"]["name"] == node:
            n["spec"]["taints"].append(
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
            )
    (name,) = [k for k, p in run.pods.items() if p["spec"].get("nodeName") == node]
    pod = run.pods[name]
    pod["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    pod["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": TAINTED_BY}
    ]
    return name


def replaced(run: JobRun, gone: str) -> None:
    """PodGC removes the pod of the lost node; the next pass creates the new attempt."""
    run.pods.pop(gone, None)
    run.step()
    free = [n for n in NODES if n not in run.status.get("avoidedNodes", [])]
    for name, node in zip(sorted(run.pods), free, strict=False):
        run.set_phase(name, "Running")
        run.pods[name]["spec"]["nodeName"] = node
    run.step()


def no_nulls(value: Any, path: str = "status") -> None:
    """A status field set to nothing would be written as null; only the exit code and
    the replica index of a failed pod may be."""
    if isinstance(value, dict):
        for key, sub in value.items():
            assert sub is not None or key in ("exitCode", "replicaIndex"), f"{path}.{key}"
            no_nulls(sub, f"{path}.{key}")
    elif isinstance(value, list):
        for sub in value:
            no_nulls(sub, path)


def node_affinity(pod: dict[str, Any]) -> Any:
    required = pod["spec"]["affinity"]["nodeAffinity"]
    return required["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]


def test_a_node_lost_mid_run_starts_a_new_attempt_not_counted_and_avoids_the_node() -> None:
    run = JobRun(job_object(replicas=2, gpusPerReplica=8, runPolicy={"backoffLimit": 0}))
    started(run)
    gone = lose_node(run, "gpu-node-1")
    decision = run.step()
    assert decision.restarts == 1  # a restart all the same (mgj_restarts_total)
    assert run.status["phase"] == "Restarting"
    assert run.status["restarts"] == 0  # backoffLimit 0 would have failed the job
    assert run.status["infrastructureRestarts"] == 1
    assert run.status["avoidedNodes"] == ["gpu-node-1"]
    restarting = run.condition("Restarting")
    assert restarting["reason"] == "NodeLost"
    assert "on node gpu-node-1" in restarting["message"]
    assert "infrastructure retry 1 of 10, not counted against backoffLimit" in restarting["message"]
    last = run.status["lastFailure"]
    assert (last["fault"], last["node"], last["rule"]) == (
        "NodeLost",
        "gpu-node-1",
        "spec.runPolicy.infrastructureRetries",
    )
    replaced(run, gone)
    assert run.status["phase"] == "Running"
    assert run.attempts() == {"2"}
    not_in = {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-node-1"]}
    for pod in run.pods.values():
        assert node_affinity(pod) == [{"matchExpressions": [not_in]}]
    assert "avoiding nodes gpu-node-1" in run.condition("Created")["message"]
    first, second = run.status["attempts"]
    assert (first["attempt"], first["reason"]) == (1, "NodeLost")
    assert first["rule"] == "spec.runPolicy.infrastructureRetries"
    assert first["failedPods"] == [
        {
            "pod": gone,
            "replicaIndex": 1,
            "node": "gpu-node-1",
            "exitCode": None,
            "reason": "pod deleted (node lost, evicted or deleted by hand)",
        }
    ]
    assert {"startTime", "endTime"} <= set(first)
    assert second == {"attempt": 2, "startTime": second["startTime"]}
    assert ("Warning", "NodeLost") in run.events()
    no_nulls(run.status)


def test_a_gpu_reported_unhealthy_restarts_naming_the_device() -> None:
    run = JobRun(job_object(replicas=2, gpusPerReplica=8))
    started(run)
    run.pods["job-0"]["status"]["containerStatuses"] = [
        {
            "name": "trainer",
            "state": {"running": {}},
            "allocatedResourcesStatus": [
                {
                    "name": "nvidia.com/gpu",
                    "resources": [{"resourceID": "GPU-7f3a", "health": "Unhealthy"}],
                }
            ],
        }
    ]
    decision = run.step()
    assert run.status["phase"] == "Restarting"
    assert set(decision.delete_pods) == {"job-0", "job-1"}
    assert run.status["restarts"] == 0
    assert run.status["lastFailure"]["device"] == "GPU-7f3a"
    assert run.condition("Restarting")["reason"] == "GPUUnhealthy"
    assert "gpu-node-0 (device GPU-7f3a)" in run.condition("Restarting")["message"]
    assert run.status["avoidedNodes"] == ["gpu-node-0"]
    run.step()
    assert all(node_affinity(p) for p in run.pods.values())


def test_oom_under_a_fail_job_rule_fails_naming_the_rule() -> None:
    oom_rule = {"name": "no-oom-retry", "action": "FailJob", "onReasons": ["OOMKilled"]}
    run = JobRun(
        job_object(replicas=2, gpusPerReplica=8, runPolicy={"failurePolicy": {"rules": [oom_rule]}})
    )
    started(run)
    run.set_phase("job-1", "Failed", 137)
    run.pods["job-1"]["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = (
        "OOMKilled"
    )
    run.step()
    assert run.status["phase"] == "Failed"
    failed = run.condition("Failed")
    assert failed["reason"] == "FailurePolicy"
    assert failed["message"].startswith(f"{RULES}[0] (no-oom-retry) matched: pod job-1")
    assert run.status["lastFailure"]["rule"] == f"{RULES}[0] (no-oom-retry)"
    (attempt,) = run.status["attempts"]
    assert attempt["reason"] == "FailurePolicy"
    assert attempt["failedPods"][0]["exitCode"] == 137
    # Finished: later passes leave the history as it is.
    again = run.step(60)
    assert again.status.as_api()["attempts"] == run.status["attempts"]


def test_infrastructure_retries_used_up_fail_the_job_naming_the_budget() -> None:
    run = JobRun(job_object(replicas=2, gpusPerReplica=8, runPolicy={"infrastructureRetries": 1}))
    started(run)
    gone = lose_node(run, "gpu-node-1")
    run.step()
    replaced(run, gone)
    assert run.status["phase"] == "Running"
    lose_node(run, run.pods["job-0"]["spec"]["nodeName"])
    run.step()
    assert run.status["phase"] == "Failed"
    failed = run.condition("Failed")
    assert failed["reason"] == "InfrastructureRetriesExceeded"
    assert "used up runPolicy.infrastructureRetries (1)" in failed["message"]
    assert run.status["lastFailure"]["rule"] == "spec.runPolicy.infrastructureRetries"
    assert run.status["restarts"] == 0


def test_a_restart_not_counted_rule_with_its_own_budget() -> None:
    retry = {
        "name": "data-hiccup",
        "action": "RestartJobNotCounted",
        "maxRestarts": 1,
        "onExitCodes": {"operator": "In", "values": [75]},
    }
    run = JobRun(
        job_object(replicas=2, runPolicy={"backoffLimit": 0, "failurePolicy": {"rules": [retry]}})
    )
    run.step()
    for expected in ("Restarting", "Failed"):
        run.run_all()
        run.step()
        run.set_phase("job-0", "Failed", 75)
        run.step()
        assert run.status["phase"] == expected
        run.step()
    assert run.status["restarts"] == 0
    assert run.status["ruleRestarts"] == [{"index": 0, "restarts": 1}]
    failed = run.condition("Failed")
    assert failed["reason"] == "MaxRestartsExceeded"
    assert f"{RULES}[0] (data-hiccup)'s maxRestarts (1)" in failed["message"]
    assert [a["attempt"] for a in run.status["attempts"]] == [1, 2]
    no_nulls(run.status)


def elastic_run(**run_policy: Any) -> JobRun:
    return JobRun(
        job_object(
            "Elastic",
            replicas=3,
            gpusPerReplica=8,
            elastic={"minReplicas": 2, "maxReplicas": 4},
            runPolicy=run_policy,
        )
    )


def disrupt(run: JobRun, name: str) -> None:
    run.pods[name]["status"] = {
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": TAINTED_BY}],
    }


def test_elastic_ignore_replaces_the_pod_and_counts_nothing() -> None:
    ignore = {"action": "Ignore", "onPodConditions": ["DisruptionTarget"]}
    run = elastic_run(backoffLimit=0, failurePolicy={"rules": [ignore]})
    started(run)
    disrupt(run, "job-2")
    decision = run.step()
    assert decision.delete_pods == ("job-2",)
    assert run.status["phase"] == "Running"
    assert run.status["restarts"] == 0
    assert "infrastructureRestarts" not in run.status
    assert run.status["lastFailure"]["rule"] == f"{RULES}[0]"
    again = run.step()
    assert [p["metadata"]["name"] for p in again.create_pods] == ["job-2"]
    # The node is avoided all the same: it lost a pod of the job.
    assert run.status["avoidedNodes"] == ["gpu-node-2"]
    no_nulls(run.status)


def test_elastic_node_lost_is_an_infrastructure_retry() -> None:
    run = elastic_run(backoffLimit=0, infrastructureRetries=1)
    started(run)
    disrupt(run, "job-1")
    run.step()
    assert (run.status["phase"], run.status["infrastructureRestarts"]) == ("Running", 1)
    run.step()
    run.set_phase("job-1", "Running")
    run.pods["job-1"]["spec"]["nodeName"] = "gpu-node-0"
    disrupt(run, "job-1")
    run.step()
    assert run.condition("Failed")["reason"] == "InfrastructureRetriesExceeded"


def test_the_attempt_history_keeps_the_latest_ten() -> None:
    run = JobRun(job_object(replicas=2, runPolicy={"backoffLimit": 20}))
    run.step()
    for _ in range(12):
        run.run_all()
        run.step()
        run.set_phase("job-1", "Failed", 1)
        run.step()
        run.step()
    attempts = run.status["attempts"]
    assert [a["attempt"] for a in attempts] == list(range(4, 14))
    assert all(a["reason"] == "PodFailed" for a in attempts[:-1])
    assert all(a["rule"] == "spec.runPolicy.backoffLimit" for a in attempts[:-1])
    assert "endTime" not in attempts[-1]
    no_nulls(run.status)
    assert "avoidedNodes" not in run.status  # the job's own failures avoid no node
    assert "infrastructureRestarts" not in run.status


def test_an_elastic_pod_evicted_from_a_lost_node_is_judged_once_while_it_leaves() -> None:
    run = elastic_run()
    started(run)
    run.nodes.append(gpu_node("gpu-node-3"))  # room for all 3 pods without gpu-node-2
    gone = lose_node(run, "gpu-node-2")
    first = run.step()
    assert gone not in first.delete_pods  # Kubernetes is deleting it already
    assert (run.status["phase"], run.status["infrastructureRestarts"]) == ("Running", 1)
    assert run.status["avoidedNodes"] == ["gpu-node-2"]
    assert ("Warning", "NodeLost") in run.events()
    run.step()
    assert run.status["infrastructureRestarts"] == 1  # seen again, judged once
    run.pods.pop(gone)
    again = run.step()
    assert [p["metadata"]["name"] for p in again.create_pods] == [gone]
    assert node_affinity(again.create_pods[0])
    assert run.status["restarts"] == 0


def removed_and_collected(run: JobRun, node: str) -> str:
    """The node is removed; PodGC marks its pod Failed and deletes it at once (grace 0),
    so no pass sees the pod Failed: only gone, and its last state in the watch."""
    run.nodes = [n for n in run.nodes if n["metadata"]["name"] != node]
    (name,) = [k for k, p in run.pods.items() if p["spec"].get("nodeName") == node]
    pod = run.pods.pop(name)
    pod["status"] = {
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}],
    }
    run.gone[name] = pod
    return name


def test_an_elastic_pod_collected_with_its_removed_node_is_a_node_loss_judged_once() -> None:
    run = elastic_run()
    started(run)
    run.nodes.append(gpu_node("gpu-node-3"))
    gone = removed_and_collected(run, "gpu-node-2")
    first = run.step()
    assert (run.status["phase"], run.status["infrastructureRestarts"]) == ("Running", 1)
    assert run.status["avoidedNodes"] == ["gpu-node-2"]
    assert ("Warning", "NodeLost") in run.events()
    assert gone not in first.delete_pods
    assert not first.create_pods  # replaced next, once its node is avoided
    assert first.requeue_after is not None
    assert first.requeue_after <= 1
    again = run.step()
    assert [p["metadata"]["name"] for p in again.create_pods] == [gone]
    assert node_affinity(again.create_pods[0])
    run.step()
    assert run.status["infrastructureRestarts"] == 1  # its last state seen again, judged once
    assert run.status["restarts"] == 0


def test_a_ddp_pod_collected_with_its_removed_node_starts_an_attempt_not_counted() -> None:
    run = JobRun(job_object(replicas=3, gpusPerReplica=8, runPolicy={"backoffLimit": 0}))
    started(run)
    removed_and_collected(run, "gpu-node-1")
    run.step()
    assert run.condition("Restarting")["reason"] == "NodeLost"
    assert (run.status["restarts"], run.status["infrastructureRestarts"]) == (0, 1)
    assert run.status["avoidedNodes"] == ["gpu-node-1"]
