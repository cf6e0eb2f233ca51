"""Import hygiene: the engine and the headless face never load Textual or Rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
import cockpit.engine, cockpit.headless.loop, cockpit.cli, cockpit.headless.render_text
import cockpit.engine.snapshot
from cockpit.cli import main
code = main(["status", sys.argv[1]])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
print("LOADED", loaded, file=sys.stderr)
sys.exit(10 if loaded else code)
"""


def test_headless_paths_never_import_textual_or_rich(tmp_path: Path) -> None:
    campaign = tmp_path / "illustrative.yaml"
    campaign.write_text((ROOT / "sample_campaigns" / "illustrative.yaml").read_text())
    proc = subprocess.run([sys.executable, "-c", CODE, str(campaign)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert "LOADED []" in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "window" in proc.stdout  # the status path really ran


def test_missing_theme_exits_2_naming_the_file(tmp_path: Path) -> None:
    campaign = tmp_path / "illustrative.yaml"
    campaign.write_text((ROOT / "sample_campaigns" / "illustrative.yaml").read_text())
    proc = subprocess.run([sys.executable, "-m", "cockpit", str(campaign), "--theme", "nope"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "nope.tcss" in proc.stderr
