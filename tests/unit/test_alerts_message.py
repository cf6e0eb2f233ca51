"""An alert's words (pure) and a level's priority on ntfy (issue 26)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cockpit.alerts.deliver import _with_priority
from cockpit.alerts.message import Alert, body, title
from cockpit.alerts.targets import Target

NOW = datetime(2026, 12, 4, 3, 0, tzinfo=timezone.utc)


def test_the_body_says_what_happened_what_was_done_what_to_do_and_the_time_left() -> None:
    alert = Alert("rule:12", "critical", "rule finite-loss fired on wild-lr: loss is nan",
                  "stopped wild-lr", "cockpit status c.yaml")
    text = body(alert, NOW + timedelta(hours=26, minutes=5), NOW).splitlines()
    assert text == ["rule finite-loss fired on wild-lr: loss is nan", "done: stopped wild-lr",
                    "you: cockpit status c.yaml", "1d2h left in the window"]
    assert body(alert, NOW - timedelta(seconds=1), NOW).endswith("the rental window has ended")
    assert body(alert, None, NOW).endswith("window end unknown")
    assert title(alert, "demo", 2) == "cockpit critical: demo · machine 2"


def test_the_persons_command_is_kept_whole_where_a_line_would_be_cut() -> None:
    """A fetch command from a deep folder is longer than an alert line may be: cut, it
    would fetch nothing (found by the landing test once its temp folder grew), so the
    command line keeps it whole, and is still bounded."""
    fetch = "rsync -avP --partial box:" + "/deep" * 80 + "/export.tar ./"
    assert len(fetch) > 300
    alert = Alert("landing:landed", "critical", f"landed: fetch it now: {fetch}",
                  "exported", fetch)
    lines = body(alert, None, NOW).splitlines()
    assert lines[2] == f"you: {fetch}"
    assert lines[0].endswith("chars)") and len(lines[0]) < 400  # the what line is cut
    huge = Alert("k", "warn", "-", "-", "x" * 10_000)
    assert len(body(huge, None, NOW).splitlines()[2]) < 2100


def test_untrusted_words_reach_the_phone_printable_and_bounded() -> None:
    alert = Alert("k", "warn", "run \x1b[2Jevil\nsecond line" + "x" * 5000, "-", "-")
    first = body(alert, None, NOW).splitlines()[0]
    assert "\x1b" not in first and "\\x1b" in first and "\\x0a" in first
    assert len(first) < 400  # bounded, with the count of what was cut


def test_ntfy_gets_the_level_as_its_priority_unless_the_url_names_one() -> None:
    assert _with_priority("ntfy://h/topic", "critical") == "ntfy://h/topic?priority=max"
    assert _with_priority("ntfys://h/t?tags=x", "warn") == "ntfys://h/t?tags=x&priority=high"
    assert _with_priority("ntfy://h/t?priority=low", "critical") == "ntfy://h/t?priority=low"
    assert _with_priority("json://h/hook", "critical") == "json://h/hook"


def test_a_target_is_shown_by_label_and_scheme_never_its_url() -> None:
    target = Target("phone", "ntfy://ntfy.sh/secret-topic", frozenset({"critical"}))
    assert target.shown == "phone (ntfy)" and "secret" not in repr(target)
    assert target.takes("critical") and not target.takes("info")
