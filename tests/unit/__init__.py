"""Unit tests: pure functions and single modules, milliseconds each."""
