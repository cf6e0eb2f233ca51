"""A served tab's Textual driver: textual-serve's web driver, which also ends the tab's
cockpit when its server is gone.

The server is the only writer of the tab's input pipe, so the pipe closing means the
server ended — killed -9 included, when no ``quit`` could be sent. Textual's web driver
then only stops reading, and the cockpit would tick on with nobody to see it (a served
tab that conducts would keep conducting). Here the input's end asks the app to quit,
as ``q`` does (the engine closes: the recording flushed, the lease given back), and a
timer ends the process after :data:`GONE_GRACE_S` if the app cannot. `cockpit serve`
names this driver in each tab's command (``TEXTUAL_DRIVER``).
"""

from __future__ import annotations

import os
import threading

from textual import messages
from textual.drivers.web_driver import WebDriver

GONE_GRACE_S = 15.0
GONE_EXIT_CODE = 3  # the hard way: the app did not quit in time


class TabDriver(WebDriver):
    def run_input_thread(self) -> None:
        super().run_input_thread()
        if self.exit_event.is_set():  # the app is stopping: the input was closed for it
            return
        self._app.post_message(messages.ExitApp())
        timer = threading.Timer(GONE_GRACE_S, os._exit, (GONE_EXIT_CODE,))
        timer.daemon = True
        timer.start()
