"""The open uncertainties (D24): `cockpit next` and REPORT.md list the same things the
campaign left open — the question still open and the run it waits for, a failure with
the last meaningful line of its stderr (escaped: the run wrote it), the durations kept
as planned, the saves and reloads never measured and the checkpoints left on the box.
Real processes and files: a control that succeeds, a variant that crashes."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

from tests.helpers.campaigns import step_command, write_campaign
from tests.helpers.process import run_cockpit

# A variant that prints its cause to stderr, with a terminal escape in it, and crashes.
CRASH = textwrap.dedent("""
    import sys
    print("loading the corpus", file=sys.stderr)
    print("ValueError: bad split \\x1b]52;c;aGk=\\x07" + "x" * 600, file=sys.stderr)
    print("   ", file=sys.stderr)
    sys.exit(1)
""")


def _campaign(folder: Path) -> Path:
    path = write_campaign(folder, [
        {"id": "control", "run": "control", "duration": "10m", "resource": "cpu",
         "command": step_command(3, 0.01)},
        {"id": "variant", "run": "variant", "duration": "20m", "resource": "cpu",
         "after": ["control"], "command": [sys.executable, "crash.py"]},
        {"id": "analysis", "hours": 1, "resource": "human", "after": ["variant"]},
    ], runs={"control": {"acceptance": [{"metric": "val/accuracy", "min": 0.1}]},
             "variant": {"checkpoints": "ck/variant",
                         "acceptance": [{"metric": "val/accuracy", "min": 0.1}]}},
        extra={"conclusion": {"metric": "val/accuracy", "better": "higher",
                              "baseline": "control", "margin": 0.01,
                              "variants": ["variant"]}})
    (folder / "crash.py").write_text(CRASH)
    return path


def test_next_and_the_report_list_what_the_campaign_left_open(tmp_path: Path) -> None:
    path = _campaign(tmp_path)
    done = run_cockpit("headless", str(path), "--auto", "--until-done", "--interval", "0.1",
                       timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # the essential variant failed
    # A checkpoint the crashed variant left in its folder (written a minute ago).
    ck = tmp_path / "ck" / "variant" / "step-1.pt"
    ck.parent.mkdir(parents=True)
    ck.write_bytes(b"weights")
    old = time.time() - 60
    os.utime(ck, (old, old))

    out = tmp_path / "next.yaml"
    made = run_cockpit("next", str(path), "--out", str(out))
    assert made.returncode == 0, made.stderr
    text = out.read_text()
    assert "# open uncertainties: none recorded" not in text
    tail = text.split("# open uncertainties:\n", 1)[1].split("\n\n", 1)[0]
    points = [line.removeprefix("#   - ") for line in tail.splitlines()]
    wanted = [
        "the question is open: it waits for variant: failed (exit code 1): a crash says "
        "nothing of val/accuracy",
        "run variant failed: exit code 1: ValueError: bad split \\x1b]52;c;aGk=\\x07xxx",
        "stage analysis: duration never measured (no finished run of it): 1h kept as "
        "planned",
        "run variant: the cost of a save and a reload in a fresh process never measured",
        "run variant: 1 checkpoint(s) left on the box in ck/variant, not exported (the run "
        "is rejected)",
    ]
    for want in wanted:
        assert any(p.startswith(want) for p in points), (want, points)
    failure = next(p for p in points if p.startswith("run variant failed"))
    assert "\x1b" not in text and len(failure) < 300  # escaped, and capped
    assert not any("control" in p for p in points), points  # measured, accepted

    exported = run_cockpit("export", str(path), timeout=120)
    assert exported.returncode == 0, exported.stderr
    (report,) = (tmp_path / ".cockpit" / "export").glob("*/*/data/REPORT.md")
    listed = report.read_text().split("Open uncertainties:", 1)[1]
    for want in wanted:  # the same list, from the same function
        assert f"- {want}" in listed, (want, listed)
