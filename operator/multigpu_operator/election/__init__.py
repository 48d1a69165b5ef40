"""Leader election on a Lease: the loop that campaigns, renews and steps down
(elector.py), and client-go's rules for when a Lease may be taken, pure
(lease_rules.py)."""
