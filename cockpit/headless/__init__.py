"""The screenless face: the tick loop, status log, status line, text rendering."""
