"""What the cockpit reads at run time besides its code: themes, the demo's sample
campaigns, the ``cockpit init`` template and the domain rules (``cockpit rules``).

In the repository ``themes`` and ``sample_campaigns`` here are links to the top-level
folders and ``domain.md`` a link to ``docs/domain.md`` (the user-facing copies); a wheel
carries their files. Read them through
:func:`asset`, which goes through ``importlib.resources`` and so works from an editable
install, a wheel, or a zip alike.
"""

from __future__ import annotations

from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path


def asset(*parts: str) -> Traversable:
    """The packaged resource at ``parts`` (e.g. ``asset("themes", "default.tcss")``)."""
    node: Traversable = files(__name__)
    for part in parts:
        node = node / part
    return node


def asset_path(*parts: str) -> Path:
    """A real filesystem path for a packaged folder or file (installed packages are files)."""
    node = asset(*parts)
    with as_file(node) as path:
        # Wheels installed by pip are plain files, so the path outlives the context.
        return Path(path)
