"""Shared test helpers: campaigns to write, the cockpit command, sshd, the TUI campaign."""
