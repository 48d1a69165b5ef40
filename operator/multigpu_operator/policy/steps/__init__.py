"""The steps reconcile.decide() runs, in its order (reconcile.STEPS), one entry function
each, and what the pass does before and after them (refusals, the status it concludes)."""
