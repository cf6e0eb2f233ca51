"""Alerts that reach a person away from the screen (issue 26): where they go (targets,
from a file outside the campaign: URLs hold tokens), what one says, and its delivery
through apprise (one URL scheme for ntfy, Slack, Discord, Telegram, email, webhooks).

:mod:`cockpit.alerts.targets` reads the targets, :mod:`cockpit.alerts.message` builds
an alert's words (pure), :mod:`cockpit.alerts.deliver` sends one alert to one target.
A target's URL is never written to the journal, a status output or the export: only
its label and its scheme are shown.
"""
