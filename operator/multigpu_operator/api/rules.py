"""Cross-field rules of a MultiGPUJob, as CEL with their messages, declared once.

api/schema.py attaches them to the objects they belong to in the CRD, where the API
server evaluates them; `validate()` (api/validation.py, for `mgj render`) evaluates the
same strings offline with a CEL library, so both report the same message. A message that states the
values it is about is a CEL expression too (messageExpression), with a fixed message
beside it for when that expression cannot be evaluated. Transition rules (those that
read `oldSelf`, the stored object) guard updates only; offline validation checks new
objects and skips them.
"""

from __future__ import annotations

from multigpu_operator.api.failure_policy_rules import FAILURE_POLICY_RULES
from multigpu_operator.api.placement import PLACEMENT_RULES
from multigpu_operator.api.rule import Rule
from multigpu_operator.api.spec import MAX_NAME_LENGTH, JobSpec, Launcher, Mode

__all__ = ["FAILURE_POLICY_RULES", "NAME_RULES", "SPEC_RULES", "Rule"]

_DEFAULT_REPLICAS = JobSpec.model_fields["replicas"].default

# NVIDIA's device plugin names MIG slices nvidia.com/mig-<profile> (its "mixed" strategy).
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# DNS-1035 label: the job name becomes a Service name, and Services require it.
DNS1035_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"

# One message per rule, shown by the API server and by `validate()`.
MSG_DATA_PARALLEL_REPLICAS = (
    "spec.replicas must be 1 when spec.mode is DataParallel: one process drives all GPUs of one "
    "pod; use DistributedDataParallel to train across several pods"
)
MSG_ELASTIC_REQUIRED = (
    "spec.elastic (minReplicas, maxReplicas) is required when spec.mode is Elastic"
)
MSG_ELASTIC_ONLY_FOR_ELASTIC = (
    "spec.elastic is only allowed when spec.mode is Elastic: remove spec.elastic or set "
    "spec.mode: Elastic"
)
MSG_ELASTIC_MIN_MAX = (
    "spec.elastic.minReplicas must be less than or equal to spec.elastic.maxReplicas"
)
MSG_ELASTIC_REPLICAS_RANGE = (
    "spec.replicas must be between spec.elastic.minReplicas and spec.elastic.maxReplicas when "
    f"spec.mode is Elastic (spec.replicas defaults to {_DEFAULT_REPLICAS}): set spec.replicas "
    "inside that range, or scale the job within it"
)
# The same, with the numbers: "spec.replicas is 5, outside ... (1..4) ...". (The strings
# library's format(): the API server's cost estimate refuses string(int) concatenations.)
MSG_EXPR_ELASTIC_REPLICAS_RANGE = (
    "'spec.replicas is %d, outside spec.elastic.minReplicas..maxReplicas (%d..%d) of this "
    f"Elastic job (spec.replicas defaults to {_DEFAULT_REPLICAS}): set spec.replicas inside that "
    "range, or scale the job within it'.format([self.replicas, self.elastic.minReplicas, "
    "self.elastic.maxReplicas])"
)
MSG_REPLICAS_FIXED = (
    "spec.replicas cannot change unless spec.mode is Elastic: the world size (WORLD_SIZE) of a "
    "DistributedDataParallel, DataParallel or ModelParallel job is fixed when it starts; delete "
    "and re-create the job to change it, or use spec.mode Elastic"
)
# The same, with the mode and the numbers.
MSG_EXPR_REPLICAS_FIXED = (
    "'spec.replicas cannot change from %d to %d when spec.mode is %s: the world size "
    "(WORLD_SIZE) is fixed when the job starts; delete and re-create the job to change it, or "
    "use spec.mode Elastic'.format([oldSelf.replicas, self.replicas, self.mode])"
)
MSG_MANAGED_BY_IMMUTABLE = (
    "spec.managedBy is immutable: the controller that runs a job is chosen when it is "
    "created; delete and re-create the job to hand it to another"
)
MSG_DNS_NAMES_IMMUTABLE = (
    "spec.dnsNames is immutable: the job's Service selects its pods when it is created; "
    "delete and re-create the job to change it"
)
MSG_SCRIPT_ONE_PROCESS = (
    "spec.launcher Script starts one process per pod, but with spec.gpusPerReplica above 1 "
    "each pod of a DistributedDataParallel job (or of a ModelParallel job across pods) runs one "
    "process per GPU: set spec.launcher to Torchrun, which starts them, or use one GPU per "
    "replica (spec.gpusPerReplica: 1) and more replicas"
)
MSG_ELASTIC_LAUNCHER = (
    "spec.launcher must be Torchrun when spec.mode is Elastic: elastic training needs "
    "torchrun's rendezvous; remove spec.launcher or set it to Torchrun"
)
MSG_MODEL_PARALLEL_ONLY = (
    "spec.modelParallel is only allowed when spec.mode is ModelParallel: remove "
    "spec.modelParallel or set spec.mode: ModelParallel"
)
MSG_MODEL_PARALLEL_STAGES = (
    "spec.modelParallel.stages must equal spec.replicas x max(spec.gpusPerReplica, 1) when "
    "spec.mode is ModelParallel with several replicas (one pipeline stage per process); omit "
    "spec.modelParallel.stages to get exactly that"
)
MSG_MIG_ONE_SLICE = (
    "spec.gpusPerReplica must be 0 or 1 when spec.gpuResource is a MIG profile "
    f"({MIG_RESOURCE_PREFIX}*): one CUDA process sees only one MIG device, so a pod's second "
    "slice would fail DistributedDataParallel at LOCAL_RANK 1 and be left idle by "
    "DataParallel; use several replicas of one slice each (spec.gpusPerReplica: 1), or whole "
    "GPUs"
)
MSG_NAME_TOO_LONG = (
    f"metadata.name must be at most {MAX_NAME_LENGTH} characters: pods are named "
    "<name>-<index> and their hostnames must fit in 63 characters; choose a shorter name"
)
MSG_NAME_DNS1035 = (
    "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
    "letter and ending with a letter or digit): it becomes the job's Service name and the pods' "
    "hostnames"
)


_ELASTIC = f"'{Mode.ELASTIC}'"
_MP = f"'{Mode.MODEL_PARALLEL}'"
_DP = f"'{Mode.DATA_PARALLEL}'"

# Attached to spec. CEL runs after defaulting, so replicas, gpusPerReplica and launcher are
# always present; the optional objects are guarded with has().
SPEC_RULES: tuple[Rule, ...] = (
    Rule(
        cel=f"self.mode != '{Mode.DATA_PARALLEL}' || self.replicas == 1",
        message=MSG_DATA_PARALLEL_REPLICAS,
        field_path=".replicas",
    ),
    Rule(
        cel=f"self.mode != {_ELASTIC} || has(self.elastic)",
        message=MSG_ELASTIC_REQUIRED,
        field_path=".elastic",
    ),
    Rule(
        cel=f"!has(self.elastic) || self.mode == {_ELASTIC}",
        message=MSG_ELASTIC_ONLY_FOR_ELASTIC,
        field_path=".elastic",
    ),
    Rule(
        cel="!has(self.elastic) || self.elastic.minReplicas <= self.elastic.maxReplicas",
        message=MSG_ELASTIC_MIN_MAX,
        field_path=".elastic.minReplicas",
    ),
    Rule(
        cel=(
            f"self.mode != {_ELASTIC} || !has(self.elastic) || "
            "(self.elastic.minReplicas <= self.replicas && "
            "self.replicas <= self.elastic.maxReplicas)"
        ),
        message=MSG_ELASTIC_REPLICAS_RANGE,
        message_expression=MSG_EXPR_ELASTIC_REPLICAS_RANGE,
        field_path=".replicas",
    ),
    # `kubectl scale` of a fixed world would otherwise look like a lost pod (scaling up)
    # or be ignored (scaling down) while the pods keep the old WORLD_SIZE.
    Rule(
        cel=f"self.mode == {_ELASTIC} || self.replicas == oldSelf.replicas",
        message=MSG_REPLICAS_FIXED,
        message_expression=MSG_EXPR_REPLICAS_FIXED,
        field_path=".replicas",
    ),
    # As Job's and JobSet's: a controller never has to hand a running job over. At the
    # spec (not the field) so that setting or removing it is an update too.
    Rule(
        cel=(
            "has(self.managedBy) == has(oldSelf.managedBy) && "
            "(!has(self.managedBy) || self.managedBy == oldSelf.managedBy)"
        ),
        message=MSG_MANAGED_BY_IMMUTABLE,
        field_path=".managedBy",
    ),
    # The Service is created once (children.py) and never updated.
    Rule(
        cel="self.dnsNames == oldSelf.dnsNames",
        message=MSG_DNS_NAMES_IMMUTABLE,
        field_path=".dnsNames",
    ),
    Rule(
        cel=f"self.mode != {_ELASTIC} || self.launcher == '{Launcher.TORCHRUN}'",
        message=MSG_ELASTIC_LAUNCHER,
        field_path=".launcher",
    ),
    # A plain script is one process; one process per GPU needs a launcher (plan/env.py
    # sets no RANK for it). Elastic has its own rule above.
    Rule(
        cel=(
            f"self.launcher != '{Launcher.SCRIPT}' || self.gpusPerReplica <= 1 || "
            f"self.mode == {_DP} || self.mode == {_ELASTIC} || "
            f"(self.mode == {_MP} && self.replicas == 1)"
        ),
        message=MSG_SCRIPT_ONE_PROCESS,
        field_path=".launcher",
    ),
    Rule(
        cel=f"!has(self.modelParallel) || self.mode == {_MP}",
        message=MSG_MODEL_PARALLEL_ONLY,
        field_path=".modelParallel",
    ),
    Rule(
        cel=(
            f"self.mode != {_MP} || self.replicas == 1 || !has(self.modelParallel) || "
            "!has(self.modelParallel.stages) || self.modelParallel.stages == "
            "self.replicas * (self.gpusPerReplica > 0 ? self.gpusPerReplica : 1)"
        ),
        message=MSG_MODEL_PARALLEL_STAGES,
        field_path=".modelParallel.stages",
    ),
    # CUDA enumerates a single MIG instance per process whatever the pod was given, in
    # every mode (DataParallel and a one-pod pipeline included).
    Rule(
        cel=f"self.gpusPerReplica <= 1 || !self.gpuResource.startsWith('{MIG_RESOURCE_PREFIX}')",
        message=MSG_MIG_ONE_SLICE,
        field_path=".gpusPerReplica",
    ),
    *FAILURE_POLICY_RULES,
    *PLACEMENT_RULES,
)

# Attached to the root object, where CEL sees metadata.name.
NAME_RULES: tuple[Rule, ...] = (
    Rule(
        cel=f"size(self.metadata.name) <= {MAX_NAME_LENGTH}",
        message=MSG_NAME_TOO_LONG,
        field_path=".metadata.name",
    ),
    Rule(
        cel=f"self.metadata.name.matches('{DNS1035_LABEL}')",
        message=MSG_NAME_DNS1035,
        field_path=".metadata.name",
    ),
)
