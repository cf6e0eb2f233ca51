"""One metric, one name across frameworks: the canonical metric names and their aliases.

The Hugging Face Trainer's ``trainer_state.json`` says ``loss``/``eval_loss``, its
TensorBoard events ``train/loss``/``eval/loss``, a LightningModule usually
``train_loss``/``val_loss``. This module owns the one table that says they are the same
metric (:data:`CANONICAL`), the names a source must not alias (:data:`HF_RUN_MEAN`: the
Trainer's end-of-training ``train_loss`` is a mean over the whole run, not a step's loss),
and :class:`MetricNames`, the table plus a run's own mapping (the campaign file's
``runs.ID.metric_names``). The metric stream adds each point's canonical names beside the
source's own, so one rule, one acceptance check and one chart name one metric whatever
wrote it; a rule or check that names an alias finds the canonical value too (:func:`lookup`).

Standard library only: the in-process integrations (:mod:`cockpit.integrations`) import it
inside the user's training process.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

# canonical name -> the other spellings of the same metric (per framework and source)
CANONICAL: dict[str, tuple[str, ...]] = {
    "loss": ("train/loss", "train_loss"),  # the training loss: HF TensorBoard, Lightning
    "eval_loss": ("eval/loss", "val_loss"),  # HF trainer_state / TensorBoard, Lightning
    "grad_norm": ("train/grad_norm",),  # HF TensorBoard
    "learning_rate": ("lr", "train/learning_rate"),  # plain loops, HF TensorBoard
}
ALIASES: dict[str, str] = {alias: name for name, aliases in CANONICAL.items()
                           for alias in aliases}
# The Trainer logs `train_loss` once, at the end of training, as the mean training loss
# of the whole run: in its trainer_state.json that name is not a step's loss.
HF_RUN_MEAN = frozenset({"train_loss"})
LOSS = "loss"
GRAD_NORM = "grad_norm"


def canonical_name(name: str) -> str:
    """The table's canonical name of ``name`` (itself when it is no alias)."""
    return ALIASES.get(name, name)


def lookup(values: Mapping[str, float], name: str) -> float | None:
    """The value of ``name`` in ``values``: under its own name, else under its canonical
    name (a check on ``val_loss`` finds a Trainer's ``eval_loss``)."""
    if name in values:
        return values[name]
    return values.get(canonical_name(name))


def as_reported(reported: Collection[str]) -> list[str]:
    """The names as the run spells them, sorted: a canonical name is left out where one of
    its aliases is reported too (the stream added it beside the alias)."""
    names = set(reported) - {"max_steps"}
    return sorted(n for n in names if not any(a in names for a in CANONICAL.get(n, ())))


def suggestion(metric: str, reported: Collection[str]) -> str | None:
    """Did-you-mean for ``metric``, which the run never reported: the canonical name of
    the closest name the run is known by (``train/los`` suggests ``loss``), saying how the
    run spells it when that is another name."""
    spellings: dict[str, str] = {}  # a name the run is known by -> the name it reports
    for name in as_reported(reported):
        canonical = canonical_name(name)
        for candidate in (name, canonical, *CANONICAL.get(canonical, ())):
            spellings.setdefault(candidate, name)
    hit = difflib.get_close_matches(metric, sorted(spellings), n=1)
    if not hit:
        return None
    canonical, spelled = canonical_name(hit[0]), spellings[hit[0]]
    if canonical_name(metric) in CANONICAL and canonical in CANONICAL \
            and canonical != canonical_name(metric):
        return None  # two metrics of the table (eval_loss is no misspelt loss)
    return canonical if spelled == canonical else f"{canonical}, reported as {spelled}"


class MetricNames:
    """The table plus one run's own mapping (``{their_name: canonical}``), which wins."""

    def __init__(self, mapping: Mapping[str, str] | None = None) -> None:
        self.mapping: dict[str, str] = dict(mapping or {})
        # (names of a record, names not aliased) -> what to add: records of one source
        # mostly share their names, so each set is worked out once (bounded)
        self._plans: dict[tuple[tuple[str, ...], Collection[str]],
                          tuple[tuple[str, str], ...]] = {}

    def canonical(self, name: str, not_aliases: Collection[str] = ()) -> str:
        if name in self.mapping:
            return self.mapping[name]
        return name if name in not_aliases else canonical_name(name)

    def expand(self, values: Mapping[str, float],
               not_aliases: Collection[str] = ()) -> Mapping[str, float]:
        """``values`` with each value also under its canonical name (the source's own value
        under that name wins); the same mapping object when nothing is added."""
        plan = self.plan(values, not_aliases)
        if not plan:
            return values
        out = dict(values)
        for source, target in plan:
            out[target] = values[source]
        return out

    def add_canonical(self, values: dict[str, float],
                      not_aliases: Collection[str] = ()) -> None:
        """:meth:`expand` in place, for a dict nobody else holds yet (a point just read)."""
        for source, target in self.plan(values, not_aliases):
            values[target] = values[source]

    def plan(self, values: Collection[str], not_aliases: Collection[str] = ()
             ) -> tuple[tuple[str, str], ...]:
        """(name, canonical name to add) for a record with these names."""
        key = (tuple(values), not_aliases)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(values, not_aliases)
            if len(self._plans) >= PLANS_KEPT:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _plan(self, names: Collection[str], not_aliases: Collection[str]
              ) -> tuple[tuple[str, str], ...]:
        plan: dict[str, str] = {}  # target -> the first name that stands for it
        for name in names:
            target = self.canonical(name, not_aliases)
            if target != name and target not in names and target not in plan:
                plan[target] = name
        return tuple((source, target) for target, source in plan.items())


PLANS_KEPT = 256  # name sets remembered per MetricNames (a source with ever new names)
