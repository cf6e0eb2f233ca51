"""The browser face: `cockpit serve FILE` serves the TUI through textual-serve (the
``serve`` extra), on the loopback address behind a one-time token (:mod:`.access`:
who may reach it; :mod:`.server`: the server and the command each tab runs;
:mod:`.tabs`: their cap and their clients' messages; :mod:`.tab_driver`: a tab that
ends with its server)."""
