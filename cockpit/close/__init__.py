"""The closing phase: acceptance checks, the conclusion and the budget at the close."""
