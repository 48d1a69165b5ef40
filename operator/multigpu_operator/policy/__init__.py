"""Pure policies: decisions from a job and its observed state, no I/O.

- `step.py`, `inputs.py`: the shapes of a pass (what it reads, what a step sees and
  returns, what the pass decides); `training.py`: what the job's processes report;
  `progress_reads.py`: which processes to read and when a job may show what they said.
- `steps/`: the steps reconcile.decide() runs, one entry function each, and what a pass
  does before them (`refusals`) and after them (`progress`, `status`).
- `failures/`: failure handling in one place: the failed pod read, the fault, the rules
  and their budgets, the attempt ended, the nodes avoided, failing a job.
- `placement/`: spec.placement: the topology domains, which one holds a job now, the
  pods pinned there in rank order (the step is `steps/placement.py`).
- `runtime_use.py`: which copy of a job's runtime a pass merges with, and the wait for
  one not there yet.
- `kube/`: small readings of Kubernetes objects the steps share.
"""
