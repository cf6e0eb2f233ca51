"""TUI tests: the Textual face through Pilot, snapshots and a real tmux terminal."""
