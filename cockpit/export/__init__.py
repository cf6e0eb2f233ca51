"""The close's files: the BagIt export writer, its verifier and the human report (D19-D24).

The names below load on first use: a command that needs only a light module of this
package (``tar_verify``'s limits, for every command's argument parser) must not import
the writer, the engine and the report with it (``status --line`` answers a tmux status
bar every few seconds)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cockpit.export.bag import (
        ARTIFACT_MODES,
        ExportError,
        ExportResult,
        default_export_root,
        export_campaign,
    )
    from cockpit.export.verifier import VerifyExportReport, verify_export

_WHERE = {
    "ARTIFACT_MODES": "bag", "ExportError": "bag", "ExportResult": "bag",
    "default_export_root": "bag", "export_campaign": "bag",
    "VerifyExportReport": "verifier", "verify_export": "verifier",
}

__all__ = [
    "ARTIFACT_MODES",
    "ExportError",
    "ExportResult",
    "VerifyExportReport",
    "default_export_root",
    "export_campaign",
    "verify_export",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"cockpit.export.{module}"), name)
