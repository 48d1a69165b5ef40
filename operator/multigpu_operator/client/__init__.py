"""A small typed client of MultiGPUJobs for notebooks and scripts, and what `mgj`'s
job commands use: create, get, list, wait, logs, delete.

    from multigpu_operator.client import Client
    jobs = Client(namespace="team")
    name = jobs.create("examples/cpu-ddp.yaml")
    status = jobs.wait(name, timeout=600)

Through the Cluster verbs the operator uses (cluster/protocol.py, on a Kube of the
kubeconfig's current context, whose namespace is the default one; tests give the
in-memory one). `AsyncClient` is the same in async form; `Client` runs each call in an
event loop of its own, as `mgj` does (`run_with`). Which pods' logs and how their lines
look: log_pods.py; reading them: pod_logs.py; `mgj render --server`'s dry run: dry_run.py.
"""

from multigpu_operator.client.aio import AsyncClient
from multigpu_operator.client.blocking import Client, run_with
from multigpu_operator.client.views import (
    ClientError,
    InvalidJob,
    JobEnded,
    JobNotFound,
    JobView,
    PodView,
    WaitTimeout,
    context_namespace,
    kubeconfig_login,
    manifest_of,
)

__all__ = [
    "AsyncClient",
    "Client",
    "ClientError",
    "InvalidJob",
    "JobEnded",
    "JobNotFound",
    "JobView",
    "PodView",
    "WaitTimeout",
    "context_namespace",
    "kubeconfig_login",
    "manifest_of",
    "run_with",
]
