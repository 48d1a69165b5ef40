"""Deterministic names and labels of everything the operator creates for a job.

Names never depend on time or randomness: a retried create after a crash hits
AlreadyExists instead of making a duplicate.
"""

from __future__ import annotations

from multigpu_operator.api.spec import GROUP

LABEL_JOB_NAME = f"{GROUP}/job-name"
LABEL_REPLICA_INDEX = f"{GROUP}/replica-index"
LABEL_MODE = f"{GROUP}/mode"
# The attempt that created a pod (1, 2, ...): a retry replaces pods under the same names.
LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "multigpu-operator"
# Selects every child of every job: what the operator's pod watch asks the API server for.
CHILD_SELECTOR = LABEL_JOB_NAME


def pod_name(job_name: str, index: int) -> str:
    return f"{job_name}-{index}"


def service_name(job_name: str) -> str:
    """The job's headless Service; also the pods' DNS subdomain."""
    return job_name


def pod_dns_name(job_name: str, namespace: str, index: int) -> str:
    """Stable DNS name of replica `index` (resolves via the pod's search domains)."""
    return f"{pod_name(job_name, index)}.{service_name(job_name)}.{namespace}.svc"


def job_selector(job_name: str) -> str:
    """Label selector matching the children of one job."""
    return f"{LABEL_JOB_NAME}={job_name}"
