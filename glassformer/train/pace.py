"""How long a run takes on this machine, told before it starts: its own steps, timed here.

`measure(run)` builds the run's model and times the trainer's own optimizer step
(`Trainer.train_step`: forward, backward, clipping, the optimizer and the schedule, under bf16
autocast when the run asks for it), the median of ``TIMED_STEPS`` steps after ``WARMUP_STEPS``
(the first step allocates the optimizer's state and the autocast caches), and one evaluation. Then
`estimate_seconds` is arithmetic::

    seconds = steps * step_s + evaluations * evaluation_s,   evaluations = ceil(steps / eval_interval)

(the trainer evaluates every ``eval_interval`` steps and after the last one).

A synthetic task's data is made in a moment, and so are the digits (bundled with scikit-learn),
so their run is the real one (`runs.prepare`): its batches, its validation set and what its
evaluation scores. A corpus's or a
classifier's run would first download its text and tokenize it; its stand-in is the run's
model on random ids of the run's batch size and context, which cost what real ids do (every
layer does the same arithmetic whatever the ids), with ``eval_batches`` validation batches;
its evaluation's sample and extra figures are not timed. Neither counts the start of the
process, the data's preparation (a download, a tokenizer trained), the checkpoints, the
TensorBoard logs or the film the lab records at each evaluation: the estimate is of the
training itself.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
import tempfile
import time
from dataclasses import dataclass

import torch

from glassformer.config import ModelConfig
from glassformer.models import build
from glassformer.tokenizers import load_tokenizer
from glassformer.train.genres import GENRES
from glassformer.train.images import DIGITS_CORPUS
from glassformer.train.runs import Prepared, prepare, pretrained_classifier, pretrained_lm
from glassformer.train.settings import RunConfig

WARMUP_STEPS = 1
TIMED_STEPS = 3
TIMED_EVAL_BATCHES = 2  # an evaluation's forward passes are alike: two timed, the rest counted
CHAR_VOCABULARY = 65  # the characters of tiny Shakespeare, what a "char" tokenizer has there


@dataclass(frozen=True)
class Pace:
    """What one optimizer step and one evaluation of a run take on this machine, in seconds."""

    step_s: float
    evaluation_s: float


def measure(run: RunConfig) -> Pace:
    """Time ``run``'s optimizer step and evaluation here (see the module docstring). The
    random state is put back afterwards: the model's initialization draws from it."""
    with torch.random.fork_rng(devices=[]), tempfile.TemporaryDirectory(prefix="glassformer-pace-") as folder:
        torch.manual_seed(run.train.seed)
        prepared = stand_in(run)
        timed = dataclasses.replace(prepared, val_batches=prepared.val_batches[:TIMED_EVAL_BATCHES])
        trainer = timed.trainer(run, folder, log=lambda line: None)  # its run files go to the folder
        for _ in range(WARMUP_STEPS):
            trainer.train_step()
        step_s = _seconds(trainer.train_step, TIMED_STEPS)
        passes_s = _seconds(trainer.evaluate) * len(prepared.val_batches) / len(timed.val_batches)
        extras = [work for work in (prepared.extra_eval, prepared.sample) if work is not None]
        extras_s = sum(_seconds(work, 1, trainer.net) for work in extras)
    return Pace(step_s, passes_s + extras_s)


def estimate_seconds(run: RunConfig, pace: Pace) -> float:
    """The seconds ``run``'s steps and evaluations take at ``pace``."""
    return run.train.steps * pace.step_s + evaluations(run) * pace.evaluation_s


def evaluations(run: RunConfig) -> int:
    """How often ``run`` evaluates: every ``eval_interval`` steps, and after the last step."""
    return math.ceil(run.train.steps / run.train.eval_interval)


def stand_in(run: RunConfig) -> Prepared:
    """``run`` ready to train without its data: a synthetic task's or the digits' real
    preparation; for a corpus or a text classifier, its model on random ids (the module
    docstring says why)."""
    if run.data.objective in ("task", "seq2seq") or run.data.corpus == DIGITS_CORPUS:
        return prepare(run)
    if run.train.init_from != "scratch":  # a new head on it, or the language model as it is
        net, _ = pretrained_classifier(run) if run.data.objective == "classify" else pretrained_lm(run)
    else:
        net = build(_config(run))
    batch = _random_batch(run, net.config)
    return Prepared(net, None, itertools.repeat(batch), [batch] * run.train.eval_batches, None, None)


def _config(run: RunConfig) -> ModelConfig:
    """The ModelConfig ``run`` trains from scratch, with the vocabulary its tokenizer will have."""
    kind = run.data.tokenizer
    if kind == "char":
        vocabulary, pad = CHAR_VOCABULARY, 0
    elif kind == "bpe":
        vocabulary, pad = run.data.bpe_vocab_size, 0
    else:  # a named tokenizer or a file
        tokenizer = load_tokenizer(kind)
        vocabulary, pad = tokenizer.vocab_size, tokenizer.pad_token_id or 0
    if run.data.objective == "classify":
        return run.model_config(vocabulary, n_classes=len(GENRES), class_names=GENRES, pad_token_id=pad)
    return run.model_config(vocabulary, pad_token_id=pad)


def _random_batch(run: RunConfig, config: ModelConfig) -> dict[str, torch.Tensor]:
    """One batch of ``run``'s shape for ``config``'s model: ids b t, and labels b t (a language
    model, masked or not) or b (a classifier, whose passages are at most ``context`` long)."""
    b, t = run.train.batch_size, min(run.train.context, config.max_seq_len)
    ids = torch.randint(config.vocab_size, (b, t))  # b t
    if config.n_classes:
        labels = torch.randint(config.n_classes, (b,))  # b
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    return {"input_ids": ids, "labels": torch.randint(config.vocab_size, (b, t))}  # b t


def _seconds(work, times: int = 1, *arguments) -> float:
    """The median wall-clock seconds of ``work(*arguments)`` over ``times`` runs: a moment the
    machine is busy elsewhere slows one run, not the figure."""
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        work(*arguments)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)
