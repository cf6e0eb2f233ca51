"""The close's files: the BagIt export writer, its verifier and the human report (D19-D24)."""

from __future__ import annotations

from cockpit.export.bag import (
    ARTIFACT_MODES,
    ExportError,
    ExportResult,
    default_export_root,
    export_campaign,
)
from cockpit.export.verifier import VerifyExportReport, verify_export

__all__ = [
    "ARTIFACT_MODES",
    "ExportError",
    "ExportResult",
    "VerifyExportReport",
    "default_export_root",
    "export_campaign",
    "verify_export",
]
