"""The model, built from a run's params: replace it with yours.

The campaign file names it for each run (``model: "model:make_model"``): the export's
``reload.py`` calls it with the run's params (those it takes, here ``hidden``) to
rebuild the model from the bag's own copy of this file, with only torch installed, and
loads the accepted checkpoint into it. So keep this module free of the cockpit and of
the training loop: torch, and your own model code.
"""

from __future__ import annotations

import torch

FEATURES = 16
CLASSES = 4


def make_model(hidden: int = 32) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, CLASSES))
