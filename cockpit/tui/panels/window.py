"""The window panel: the rental window, its countdown, the forecast and what is next."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from cockpit.engine.snapshot import Snapshot, landing_words
from cockpit.tui import text as tx
from cockpit.tui.panels.base import LivePanel, block, level, styled


class WindowPanel(LivePanel):
    def render_snapshot(self, snap: Snapshot) -> None:
        w = snap.window
        verdict_level = tx.VERDICT_LEVEL.get(w.verdict, "info")
        width = max(self.content_size.width, 20)
        bar_w = max(min(width - 70, 30), 6)
        verdict = (f"exceeds by {tx.hours_text(-w.forecast_slack_s)}" if w.verdict == "exceeds"
                   else f"{w.verdict} ({tx.hours_text(w.forecast_slack_s)} to spare)")
        lines: list[Text] = [
            styled([("window ", "bold"), (f"{w.start:%m-%d %H:%M} → {w.end:%m-%d %H:%M} UTC  ",
                                          ""),
                    (tx.countdown(w.remaining_s), "bold"), (" left  ", ""),
                    # The point of no return where it matters (on_deadline: land, a
                    # landing under way, or past it) takes the place of the used bar.
                    *(self._landing(snap) or [
                        (tx.bar(w.used_pct / 100, bar_w), level("accent")),
                        (f" {w.used_pct:.0f}% used", "")])]),
            styled([("forecast end ", ""), (tx.clock(w.forecast_end), "bold"),
                    ("  ", ""), (tx.level_word(verdict_level, verdict), level(verdict_level)),
                    # D13: the pilot's measured/planned ratio scales the GPU stages left.
                    (f"  pilot ×{w.pilot_ratio:.2f}" if w.pilot_ratio is not None else "",
                     level("warn") if (w.pilot_ratio or 1.0) > 1.0 else ""),
                    ("   retrieve by ", ""), (tx.clock(w.retrieval_deadline), "bold")]),
            self._next_line(snap),
        ]
        self.set_class(w.verdict == "exceeds", "-exceeds")
        self.set_class(w.verdict == "tight", "-tight")
        self.show(block(lines))

    @staticmethod
    def _landing(snap: Snapshot) -> list[tuple[str, str | Style]]:
        """`lands in 5h12m`, `landing`, `landed`, `past the point of no return`; nothing
        for a campaign that does not land by itself and is not past the point (its
        point of no return is in `status`, the text window line and Prometheus)."""
        words = landing_words(snap)
        urgent = bool(snap.landing) or (words or "").startswith("past")
        if words is None or not (snap.window.landing_mode or urgent):
            return []
        return [(words, level("warn") if urgent else "bold")]

    @staticmethod
    def _next_line(snap: Snapshot) -> Text:
        """The landing's newest step, a stale export, the overrun options, a pending
        decision, a revision, the close (or an export of a question still open), the
        conclusion or the question: the first that applies."""
        if snap.landing:
            return styled([("landing: ", level("warn")), (snap.landing[-1], "")])
        export = snap.export
        words = export.words() if export is not None else None  # the one wording
        if export is not None and export.stale is not None and words:
            return styled([(words, level("warn")), (" (or press e)", "")])
        if snap.window.options:
            return styled([("options (o): ", level("warn")),
                           (" · ".join(snap.window.options), "")])
        if snap.pending_decisions:
            return styled([("decision pending at ", level("warn")),
                           (", ".join(snap.pending_decisions), "bold"), (" — press d", "")])
        if snap.revised:
            return styled([("the question is under revision: nothing more starts",
                            level("warn"))])
        if export is not None and export.closed and words:
            return styled([(words, level("ok")), (" — fetch by ", ""),
                           (f"{snap.window.retrieval_deadline:%m-%d %H:%M} UTC", "bold")])
        if words:  # exported, the question open
            return styled([(words, level("warn"))])
        if snap.conclusion and any(r.verdict == "accepted" for r in snap.runs):
            return styled([("conclusion: ", "bold"), (snap.conclusion, "")])
        return styled([(f"question: {snap.question}", level("muted"))])
