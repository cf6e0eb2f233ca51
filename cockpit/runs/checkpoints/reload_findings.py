"""What the reload worker records: the components of a restart and the words for them.

This module owns the vocabulary shared by the reload worker's parts: the components a
checkpoint may hold (model, optimizer, progress, RNG states, ...), which ones each kind
requires, their words in reports, the key spellings that reveal them in a torch dict,
the per-reload context (``Ctx``) the inspectors fill in, and the two failures
(``Unsafe``, ``Broken``). Standard library only: it runs in a training environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COMPONENTS = (
    "model", "optimizer", "progress", "scheduler", "scaler",
    "rng_python", "rng_numpy", "rng_torch", "rng_cuda", "data_position",
)


REQUIRED = {
    "train": ("model", "optimizer", "progress"),
    "inference": ("model",),
    "adapter": ("model",),
}


WORDS = {
    "model": "model parameters",
    "optimizer": "optimizer state",
    "progress": "progress (step/epoch)",
    "scheduler": "scheduler state",
    "scaler": "AMP scaler state",
    "rng_python": "python RNG state",
    "rng_numpy": "numpy RNG state",
    "rng_torch": "torch CPU RNG state",
    "rng_cuda": "CUDA RNG state",
    "data_position": "data position",
}


UNSAFE_WORDS = "needs unsafe unpickling (allow_unsafe_pickle: true in the campaign to load it)"


HF_RNG_WARNING = "HF Trainer and accelerate only log at INFO when RNG restore fails"


LIGHTNING_RNG_WARNING = "Lightning stores no RNG state"


MODEL_KEYS = ("model_state_dict", "model_state", "model", "state_dict", "net", "network",
               "module", "weights", "params", "model_ema", "ema")


OPT_KEYS = ("optimizer_state_dict", "optimizer_state", "optimizer", "optim", "opt",
             "optimizers", "optimizer_states")


STEP_KEYS = ("step", "global_step", "iteration", "iter", "it", "steps", "num_updates",
              "current_step", "total_steps", "update")


EPOCH_KEYS = ("epoch", "epochs", "current_epoch")


SCHED_KEYS = ("scheduler", "lr_scheduler", "sched", "scheduler_state_dict",
               "lr_scheduler_state_dict", "lr_schedulers", "schedulers")


SCALER_KEYS = ("scaler", "grad_scaler", "amp", "amp_scaler", "scaler_state_dict",
                "gradscaler", "native_amp_scaling_state")


RNG_KEYS = ("rng", "rng_state", "rng_states", "random_state", "random_states", "rngs",
             "torch_rng_state", "cuda_rng_state", "numpy_rng_state", "np_rng_state",
             "python_rng_state", "py_rng_state", "cpu_rng_state", "torch_cuda_rng_state")


DATA_KEYS = ("data_position", "sampler", "sampler_state", "data", "data_state",
              "dataloader", "dataloader_state", "dl_state", "data_index", "batch_idx",
              "consumed_samples", "samples_seen", "data_iter", "data_loader")


class Unsafe(Exception):
    def __init__(self, globals_needed: list[str]) -> None:
        super().__init__(", ".join(globals_needed))
        self.globals_needed = globals_needed


class Broken(Exception):
    """The file cannot be read: the message says why, in words."""


class Ctx:
    def __init__(self, result: dict[str, Any], allow_unsafe: bool) -> None:
        self.result = result
        self.allow_unsafe = allow_unsafe
        self.cuda_irrelevant = False  # the run had no CUDA: its RNG cannot be missing
        self.explain: dict[str, str] = {}  # component -> why it is missing, in words

    @property
    def present(self) -> dict[str, bool]:
        present: dict[str, bool] = self.result["present"]
        return present

    def warn(self, words: str) -> None:
        if words not in self.result["warnings"]:
            self.result["warnings"].append(words)

    def set_step(self, value: Any) -> None:
        if self.result["step"] is None and is_int(value):
            self.result["step"] = int(value)


def is_state_dict(value: Any) -> bool:
    if not isinstance(value, Mapping) or not value:
        return False
    return all(isinstance(k, str) and hasattr(v, "dtype") and hasattr(v, "shape")
               for k, v in value.items())


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (
        hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0
    )


def shorten(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
