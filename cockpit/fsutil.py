"""Small filesystem helpers shared by the writers (standard library only: training
scripts import cockpit.resume, which uses these)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable; a no-op where the platform
    cannot open a folder for fsync (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
