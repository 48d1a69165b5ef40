"""Programs that tests start as separate ranks."""
