"""In-process integrations: one line in a training script that uses a framework's loop.

- :mod:`cockpit.integrations.hf`: ``trainer.add_callback(CockpitCallback())`` for the
  Hugging Face ``transformers`` Trainer;
- :mod:`cockpit.integrations.lightning`: ``Trainer(callbacks=[CockpitCallback()])`` for
  PyTorch Lightning (``lightning`` or ``pytorch_lightning``, whichever the script uses).

Each reports through :mod:`cockpit.report` (the run's ``$COCKPIT_REPORT`` file) every
logged metric under its own and its canonical name, the step and max steps, each save
with its measured cost and path, honours :func:`cockpit.report.save_requested` (the
landing) and reports the non-finite values the framework hides. What they share lives in
:mod:`cockpit.integrations.reporting`. Nothing here imports a framework until a callback
is constructed: importing ``cockpit`` never imports ``transformers`` or ``lightning``.
See docs/training-scripts.md.
"""
