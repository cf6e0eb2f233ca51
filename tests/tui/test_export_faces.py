"""Every face says a stale export, and "closed" only of an answered question (issue 41):
one real snapshot of a journal whose export predates a verdict, rendered by the screen's
window panel, `status`, `status --json`, the status log's line and `status --line`, and
Prometheus; then exported again with the question still open."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cockpit.campaign import load_campaign
from cockpit.close.conclusion import conclude_now
from cockpit.close.export_state import export_facts
from cockpit.engine import Engine
from cockpit.engine.snapshot import Snapshot, snapshot_json
from cockpit.headless.prometheus import render
from cockpit.headless.render_text import status_text
from cockpit.headless.status_line import status_line
from cockpit.headless.status_log import compact_json
from cockpit.telemetry import GpuSampler
from cockpit.tui.panels.window import WindowPanel
from tests.unit.test_export_state import BEAT, T0, Story, _campaign


def _snapshot(story: Story) -> Snapshot:
    engine = Engine(load_campaign(story.campaign.path), read_only=True,
                    gpu_sampler=GpuSampler(simulate=1))
    try:
        return engine.tick(T0 + timedelta(hours=1))
    finally:
        engine.close()


def _metric(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(name + "{")).split()[-1]


def test_a_stale_export_on_every_face_then_an_open_question(tmp_path: Path) -> None:
    campaign = _campaign(tmp_path, BEAT)
    story = Story(campaign)
    story.run("control")
    story.run("variant", verdict=None)
    state = story.state()
    story.export(export_facts(campaign, state, conclude_now(campaign, state)))
    story.add("result_accepted", run="variant", reason="ok",
              attempt=story.state().runs["variant"].attempt)
    snap = _snapshot(story)
    words = "export STALE: predates 1 verdict (variant) — cockpit export campaign.yaml"
    assert WindowPanel._next_line(snap).plain == words + " (or press e)"
    text = status_text(snap)
    assert words in text.splitlines()
    assert any(line.startswith("✓ export ") and "(export STALE: predates 1 verdict "
               "(variant))" in line for line in text.splitlines())
    assert snapshot_json(snap)["export"]["stale"] is True
    compact = compact_json(snap)
    assert compact["closed"] is None and compact["export"]["stale"] is True
    line = status_line(compact)
    assert line.startswith(words + " · ") and "closed" not in line
    prom = render(snap)
    assert (_metric(prom, "cockpit_export_stale"), _metric(prom, "cockpit_exported"),
            _metric(prom, "cockpit_closed")) == ("1.0", "1.0", "0.0")

    # Exported again: current, but no metric of the baseline was found: the question open.
    state = story.state()
    story.export(export_facts(campaign, state, conclude_now(campaign, state)))
    snap = _snapshot(story)
    words = "exported, question open: the baseline control reported no val/accuracy"
    assert WindowPanel._next_line(snap).plain == words
    assert words in status_text(snap).splitlines()
    line = status_line(compact_json(snap))
    assert line.startswith(words + " · ") and "closed" not in line
    prom = render(snap)
    assert (_metric(prom, "cockpit_export_stale"), _metric(prom, "cockpit_closed")) == \
        ("0.0", "0.0")
