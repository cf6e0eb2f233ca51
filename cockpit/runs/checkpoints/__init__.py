"""Checkpoints: discovery, layout, interval advice, and the reload and resume checks."""
