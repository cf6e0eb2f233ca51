"""Runs: reading a run's metric streams, stop rules, checkpoints and process supervision."""
