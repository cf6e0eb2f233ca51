"""Where a person's own cockpit files live (outside any campaign): an environment
variable naming the file, else ``$XDG_CONFIG_HOME/cockpit/NAME`` (``~/.config`` unset)."""

from __future__ import annotations

import os
from pathlib import Path


def config_file(env_var: str, name: str) -> Path:
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cockpit" / name
