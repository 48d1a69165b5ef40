"""Pure policies: decisions from a job and its observed state, no I/O.

- `step.py`, `inputs.py`: the shapes of a pass (what it reads, what a step sees and
  returns, what the pass decides); `training.py`: what the job's processes report;
  `progress_reads.py`: which processes to read and when a job may show what they said.
- `steps/`: the steps reconcile.decide() runs, one entry function each, and what a pass
  does before them (`refusals`) and after them (`progress`, `status`).
- `failures/`: failure handling in one place: the failed pod read, the fault, the rules
  and their budgets, the attempt ended, the nodes avoided, failing a job.
- `kube/`: small readings of Kubernetes objects the steps share.
"""
