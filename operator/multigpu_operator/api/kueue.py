"""Kueue's API as the operator uses it (kueue.x-k8s.io/v1beta2): the labels a job carries,
the Workload that stands for it in Kueue, and the conditions Kueue writes on it.

A MultiGPUJob labelled `kueue.x-k8s.io/queue-name` is represented in Kueue by a Workload
that the operator creates (Kueue's documented path for a job type it has no built-in
integration for: `integrations.externalFrameworks`). Kueue admits the Workload; the
operator then starts the job on the flavors Kueue assigned, stops it when Kueue evicts
it, and marks the Workload finished when the job ends. docs/kueue.md tells users.
"""

from __future__ import annotations

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
WORKLOADS = "workloads"
RESOURCE_FLAVORS = "resourceflavors"
WORKLOAD_PRIORITY_CLASSES = "workloadpriorityclasses"

# On the job.
QUEUE_NAME_LABEL = f"{GROUP}/queue-name"
PRIORITY_CLASS_LABEL = f"{GROUP}/priority-class"
# Set by MultiKueue on the copy of a job it creates in a worker cluster: the Workload
# MultiKueue made there for it, which the operator uses instead of making one. An
# annotation since Kueue 0.19 (feature gate WorkloadIdentifierAnnotations), a label
# before: both are read, the annotation first, as Kueue's PrebuiltWorkloadNameFor does.
PREBUILT_WORKLOAD_LABEL = f"{GROUP}/prebuilt-workload-name"
# spec.managedBy of a job that MultiKueue dispatches to a worker cluster.
MULTIKUEUE_CONTROLLER = f"{GROUP}/multikueue"
# On what MultiKueue creates in a worker cluster: the manager it came from.
MULTIKUEUE_ORIGIN_LABEL = f"{GROUP}/multikueue-origin"

# On the Workload.
JOB_UID_LABEL = f"{GROUP}/job-uid"
RESOURCE_IN_USE_FINALIZER = f"{GROUP}/resource-in-use"
POD_SET = "workers"  # one pod set: every replica of a job has the same template

# The Workload's conditions.
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
REQUEUED = "Requeued"
FINISHED = "Finished"
EVICTED_BY_PREEMPTION = "Preempted"
