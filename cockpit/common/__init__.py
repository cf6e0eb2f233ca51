"""The ground floor: errors, safe file writes, untrusted text, JSON from files, units.

Imports nothing else from cockpit."""
