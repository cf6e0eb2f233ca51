"""What ``verify-export TAR`` accepts before unpacking: the limits and their defaults.

Apart from :mod:`cockpit.export.tar_verify` so every command's argument parser can name
the defaults without importing the verifier (and the acceptance and engine behind it).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class TarLimits:
    """What ``verify-export TAR`` accepts before unpacking (flags override each)."""

    # An export holds the code, the plan, the journal, per run a few files and the
    # chosen checkpoints: thousands of files at most, never tens of thousands.
    max_members: int = 10_000
    # The whole unpacked bag, and one file of it (a large checkpoint fits; a TiB does not).
    max_total_bytes: int = 512 * GIB
    max_file_bytes: int = 128 * GIB


DEFAULT_LIMITS = TarLimits()
