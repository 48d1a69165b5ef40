"""Small readings of Kubernetes objects the steps share: pods, quantities, what fits a
node, the job's conditions, timestamps, a Workload's admission."""
