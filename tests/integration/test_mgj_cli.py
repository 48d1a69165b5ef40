"""`mgj` as a user runs it against the local cluster: the installed console script in a
process of its own, the cluster's kubeconfig in KUBECONFIG, `-n` for the test's
namespace, and the operator running. Every job subcommand, the kubectl plugin, and what
wrong input shows (one line, a non-zero exit, never a traceback).

The simulated (kwok) pods run and end as their annotations script them; the kubelet that
serves a failed rank's log is the real node's (tests/cluster/realnode.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.images import TRAINER_IMAGE
from cluster.localcluster import LocalCluster
from support.jobs import RUN_LONG, SIM, JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.real_pods import on_real_node

pytestmark = pytest.mark.cluster

# The console scripts the package installs beside the interpreter (pyproject.toml).
BIN = Path(sys.executable).parent
MGJ = BIN / "mgj"
TABLE_HEADER = ["NAME", "PHASE", "ATTEMPT", "PROGRESS", "ETA", "RUNTIME", "AGE"]


def user_env(cluster: LocalCluster) -> dict[str, str]:
    """A user's environment: the cluster's kubeconfig, kubectl and the scripts on PATH,
    and this checkout's code (PYTHONPATH, as the tests import it)."""
    path = os.pathsep.join([str(BIN), *map(str, cluster.tools.path_entries), os.environ["PATH"]])
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": path,
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    # A user's stdout is buffered when piped (the test runner's may not be): what a
    # reader that went away does to mgj depends on it.
    env.pop("PYTHONUNBUFFERED", None)
    return env


def mgj(
    jobs: JobEnv, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`mgj ARGS -n NAMESPACE` (unless ARGS name one), its output piped."""
    assert MGJ.exists(), f"{MGJ} missing: install the package (pip install -e operator)"
    where = [] if "-n" in args else ["-n", jobs.namespace]
    return subprocess.run(
        [str(MGJ), *args, *where],
        input=stdin,
        env=user_env(jobs.cluster),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def started(jobs: JobEnv, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(MGJ), *args, "-n", jobs.namespace],
        env=user_env(jobs.cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def one_error_line(done: subprocess.CompletedProcess[str], *said: str) -> None:
    """Failed with one line on stderr that says `said`, and nothing on stdout."""
    assert done.returncode != 0, done
    assert done.stdout == ""
    assert done.stderr.startswith("error: "), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    for words in said:
        assert words in done.stderr


def pod_line(shown: str, pod: str) -> list[str]:
    """The words of `mgj get JOB`'s line for `pod`: replica, name, node, state."""
    return next(line.split() for line in shown.splitlines() if f" {pod} " in line)


def test_submit_get_wait_describe_delete_on_simulated_pods(
    operator: OperatorProcess, jobs: JobEnv, tmp_path: Path
) -> None:
    runs = job_manifest("runs", replicas=2, annotations=RUN_LONG)
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump(runs))
    fails = job_manifest(
        "fails",
        replicas=1,
        annotations={f"{SIM}/fail-after": "1s", f"{SIM}/exit-code": "3"},
        runPolicy={"backoffLimit": 0},
    )
    submitted = mgj(jobs, "submit", str(tmp_path / "runs.yaml"))
    assert (submitted.returncode, submitted.stdout, submitted.stderr) == (0, "runs\n", "")
    submitted = mgj(jobs, "submit", "-", stdin=yaml.safe_dump(fails))
    assert (submitted.returncode, submitted.stdout, submitted.stderr) == (0, "fails\n", "")

    running = mgj(jobs, "wait", "runs", "--for", "Running", "--timeout", "60")
    assert running.returncode == 0, running
    lines = running.stdout.splitlines()
    assert lines[-1] == "runs is Running"
    assert lines[-2].startswith("runs: Running (PodsRunning), attempt 1, 2/2 pods running")
    assert "\r" not in running.stdout  # piped: a line per change, no live line

    shown = mgj(jobs, "get", "runs").stdout
    assert "Phase:     Running" in shown
    assert "Attempt:   1    Restarts: 0" in shown
    for index, pod in enumerate(jobs.pods("runs")):
        node = pod.spec.node_name
        assert pod_line(shown, f"runs-{index}") == [f"r{index}", f"runs-{index}", node, "Running"]

    failed = mgj(jobs, "wait", "fails", "--timeout", "60")
    assert failed.returncode == 1, failed
    assert failed.stderr == "job 'fails' is Failed: BackoffLimitExceeded\n"
    described = mgj(jobs, "describe", "fails").stdout
    assert "Phase:     Failed (BackoffLimitExceeded)" in described
    assert "Failed=True BackoffLimitExceeded" in described
    node = jobs.pods("fails")[0].spec.node_name
    assert (
        f"Last failure: attempt 1, pod fails-0 (replica 0) on {node}: Error, exit code 3"
        in described
    )
    events = described.split("Events:\n", 1)[1].splitlines()
    assert any(e.split()[:2] == ["Warning", "BackoffLimitExceeded"] for e in events), described

    table = mgj(jobs, "get").stdout.splitlines()
    assert table[0].split() == TABLE_HEADER
    assert sorted(row.split()[:3] for row in table[1:]) == [
        ["fails", "Failed", "1"],
        ["runs", "Running", "1"],
    ]
    # The kubectl plugin: kubectl finds kubectl-mgj on PATH and runs it.
    assert (BIN / "kubectl-mgj").exists()
    plugin = subprocess.run(
        ["kubectl", "mgj", "get", "runs", "-n", jobs.namespace],
        env=user_env(jobs.cluster),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (plugin.returncode, plugin.stderr) == (0, ""), plugin
    assert plugin.stdout.splitlines()[:2] == shown.splitlines()[:2]

    # The job ends while `mgj wait` waits: it says so and exits 0.
    waiting = started(jobs, "wait", "runs", "--timeout", "60")
    for pod in jobs.pods("runs"):
        jobs.annotate(pod.metadata.name, {f"{SIM}/succeed-after": "0s"})
    out, err = waiting.communicate(timeout=90)
    assert (waiting.returncode, err) == (0, ""), (out, err)
    assert out.splitlines()[-1] == "runs is Succeeded"
    assert out.splitlines()[-2].startswith("runs: Succeeded")

    # Its pods go first (foreground deletion), then the job; mgj returns when it is gone.
    deleted = mgj(jobs, "delete", "runs")
    assert (deleted.returncode, deleted.stdout) == (0, "runs deleted\n")
    one_error_line(
        mgj(jobs, "get", "runs"), f"no MultiGPUJob 'runs' in namespace '{jobs.namespace}'"
    )


def test_a_reader_that_goes_away_ends_mgj_quietly(jobs: JobEnv) -> None:
    for index in range(3):
        jobs.apply(job_manifest(f"quiet-{index}"))
    piped = subprocess.run(
        ["bash", "-c", f"'{MGJ}' get -n {jobs.namespace} | head -1"],
        env=user_env(jobs.cluster),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (piped.returncode, piped.stderr) == (0, "")
    assert piped.stdout.split() == TABLE_HEADER
    # The reader gone before mgj writes a byte: its first write meets a closed pipe.
    proc = started(jobs, "get")
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert err == ""


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(["get", "nope"], ["no MultiGPUJob 'nope' in namespace"], id="no-job"),
        pytest.param(["wait", "nope"], ["no MultiGPUJob 'nope'"], id="wait-no-job"),
        pytest.param(["logs", "nope"], ["no MultiGPUJob 'nope'"], id="logs-no-job"),
        pytest.param(["describe", "nope"], ["no MultiGPUJob 'nope'"], id="describe-no-job"),
        pytest.param(["delete", "nope"], ["no MultiGPUJob 'nope'"], id="delete-no-job"),
        pytest.param(
            ["get", "there", "-n", "default"],
            ["no MultiGPUJob 'there' in namespace 'default'"],
            id="wrong-namespace",
        ),
        pytest.param(
            ["submit", "{dir}/invalid.yaml"], ["spec.replicas", "greater than or equal to 1"],
            id="invalid-value",
        ),
        pytest.param(
            ["submit", "{dir}/unknown.yaml"], ['unknown field "spec.replica"'],
            id="unknown-field",
        ),
        pytest.param(
            ["submit", "{dir}/missing.yaml"], ["No such file or directory"], id="no-file"
        ),
    ],
)  # fmt: skip
def test_wrong_input_is_one_line_and_a_nonzero_exit(
    jobs: JobEnv, tmp_path: Path, argv: list[str], said: list[str]
) -> None:
    jobs.apply(job_manifest("there"))
    invalid = job_manifest("invalid", replicas=0)
    (tmp_path / "invalid.yaml").write_text(yaml.safe_dump(invalid))
    unknown = job_manifest("unknown")
    unknown["spec"]["replica"] = unknown["spec"].pop("replicas")
    (tmp_path / "unknown.yaml").write_text(yaml.safe_dump(unknown))
    one_error_line(mgj(jobs, *(a.replace("{dir}", str(tmp_path)) for a in argv)), *said)


def failing_rank_job(name: str) -> dict[str, Any]:
    """Two CPU pods on the real node: rank 0 says so and succeeds, rank 1 says so and
    fails a moment later, and the job is not retried."""
    script = (
        "import os, sys, time\n"
        "rank = int(os.environ['RANK'])\n"
        "print(f'rank {rank} of {os.environ[\"WORLD_SIZE\"]} started', flush=True)\n"
        "if rank == 1:\n"
        "    time.sleep(3)\n"
        "    print('rank 1 gives up: no data', flush=True)\n"
        "    sys.exit(1)\n"
    )
    job = job_manifest(name, replicas=2, runPolicy={"backoffLimit": 0})
    trainer = job["spec"]["template"]["spec"]["containers"][0]
    trainer.update(image=TRAINER_IMAGE, command=["python", "-c", script])
    return on_real_node(job, memory="128Mi")


def test_logs_of_a_failed_rank_from_the_real_node(operator: OperatorProcess, jobs: JobEnv) -> None:
    assert TRAINER_IMAGE in jobs.cluster.real_node.image_labels(), (
        f"{TRAINER_IMAGE} not on the real node: run `make images` first"
    )
    submitted = mgj(jobs, "submit", "-", stdin=json.dumps(failing_rank_job("gives-up")))
    assert submitted.stdout == "gives-up\n", submitted
    # Followed before the job has pods: it waits for them, then streams every rank's
    # lines until the job has ended, and ends by itself.
    follow = started(jobs, "logs", "gives-up", "--follow")
    out, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, (out, err)
    assert sorted(out.splitlines()) == [
        "[gives-up-0 r0] rank 0 of 2 started",
        "[gives-up-1 r1] rank 1 gives up: no data",
        "[gives-up-1 r1] rank 1 of 2 started",
    ]
    # Piped, stderr has the job's status, a line per change, the last one how it ended.
    assert err.splitlines()[-1].startswith("gives-up: Failed (BackoffLimitExceeded)"), err
    failed = mgj(jobs, "wait", "gives-up", "--for", "Succeeded")
    assert failed.returncode == 1
    assert failed.stderr == "job 'gives-up' is Failed: BackoffLimitExceeded\n"
    rank_1 = mgj(jobs, "logs", "gives-up", "--attempt", "1", "--replica", "1")
    assert (rank_1.returncode, rank_1.stderr) == (0, "")
    assert rank_1.stdout == (
        "[gives-up-1 r1] rank 1 of 2 started\n[gives-up-1 r1] rank 1 gives up: no data\n"
    )
    described = mgj(jobs, "describe", "gives-up").stdout
    assert (
        "Last failure: attempt 1, pod gives-up-1 (replica 1) on real-node: Error, exit code 1"
        in described
    ), described
