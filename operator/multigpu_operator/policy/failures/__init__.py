"""Failure handling in one place: a failed or lost pod read (failed_pods), the fault
that ended it (faults), the rules' verdict and budgets (rules), the attempt it ends
(end_attempt, attempts), the nodes kept off (avoidance), and failing a job (fail)."""
