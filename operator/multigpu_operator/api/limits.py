"""The largest job the API accepts: a maximum for every count and duration of the spec.

Each bound is what a real cluster and a real training run can use, so that a typo
(`replicas: 100000`, `activeDeadlineSeconds: 1000000000000`) is refused by the API server
with a message naming the field, instead of being planned: the operator builds every pod
of a job at once, the status counts processes in an int32, and times computed from these
durations must stay dates. The README's "Limits" table states them for users; the fields'
descriptions (`kubectl explain`) state them too.
"""

from __future__ import annotations

# Kubernetes is tested up to 5,000 nodes, and multi-node training runs one pod per node
# (gpusPerReplica = the node's GPUs), so no job needs more pods. Also spec.elastic's
# minReplicas and maxReplicas.
MAX_REPLICAS = 5000
# The most devices one node offers: 8 GPUs, each split into up to 7 MIG instances (56).
MAX_GPUS_PER_REPLICA = 64
# With both, a job has at most 320,000 processes: worldSize always fits its int32.
MAX_WORLD_SIZE = MAX_REPLICAS * MAX_GPUS_PER_REPLICA
# A pipeline stage holds at least one layer; the largest models have a few hundred.
MAX_PIPELINE_STAGES = 1024
# Each micro-batch holds at least one sample; Megatron-style schedules use hundreds.
MAX_MICRO_BATCHES = 4096
# Every retry replaces pods and reloads a checkpoint, minutes each: a job that failed a
# thousand times is broken, not unlucky. runPolicy.backoffLimit, elastic.maxRestarts.
MAX_RETRIES = 1000
# Waiting longer than a week for pods is waiting forever, which gang.onTimeout,
# startPolicy.onTimeout and elastic.onBelowMin `Wait` already say. gang.timeoutSeconds,
# gang.requeueAfterSeconds, startPolicy.timeoutSeconds, elastic.belowMinTimeoutSeconds.
MAX_WAIT_SECONDS = 7 * 24 * 3600
# No training run plans further than a year ahead; leaving the field unset means no limit.
# runPolicy.activeDeadlineSeconds, runPolicy.ttlSecondsAfterFinished.
MAX_JOB_SECONDS = 366 * 24 * 3600
# Restarts after infrastructure faults (a node lost, a GPU gone bad): a job that lost ten
# nodes is on a cluster that needs repair. runPolicy.infrastructureRetries.
DEFAULT_INFRASTRUCTURE_RETRIES = 10
# runPolicy.failurePolicy: rules per job, and values per match (exit codes, reasons).
MAX_FAILURE_RULES = 16
MAX_MATCH_VALUES = 32
# status: the attempts kept (the latest), the failed pods each keeps, the nodes avoided.
MAX_ATTEMPTS_KEPT = 10
MAX_FAILED_PODS_KEPT = 8
MAX_AVOIDED_NODES = 32
