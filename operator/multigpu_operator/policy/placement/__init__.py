"""Placing a job's pods by network topology (pure): docs/placement.md."""
