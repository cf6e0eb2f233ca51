"""The model, built from a run's params: replace it with yours.

A tiny GPT-2 built from a config (``GPT2Config``), never downloaded. The campaign file
names it for each run (``model: "model:make_model"``): the export's ``reload.py`` can call
it with the run's params (those it takes, here ``n_embd`` and ``n_layer``) to rebuild the
model from the bag's own copy of this file. Each checkpoint folder (``checkpoint-N/``)
also holds the config, so ``GPT2LMHeadModel.from_pretrained(folder)`` rebuilds it
without this file. Keep this module free of the cockpit and of the training loop.
"""

from __future__ import annotations

from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 48  # the corpus's (corpus.VOCAB)
CONTEXT = 32  # tokens the model attends to (corpus.SEQ_LEN)


def make_model(n_embd: int = 32, n_layer: int = 2, n_head: int = 2) -> GPT2LMHeadModel:
    config = GPT2Config(vocab_size=VOCAB, n_positions=CONTEXT, n_embd=n_embd,
                        n_layer=n_layer, n_head=n_head, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)
