"""From a `RunConfig` to everything the trainer needs: tokenizer, model, batches, samplers.

* LM / MLM on a corpus: the corpus ("shakespeare" or .txt files), a tokenizer ("char":
  the corpus's characters, nanoGPT style; "bpe": a byte-level BPE trained on the
  training split and cached; or a tokenizer file), the ids tokenized once into
  memory-mapped files in the data directory, random windows for training and a fixed
  set of validation windows.
* Synthetic tasks (``objective = "task"`` for decoders, ``"seq2seq"`` for encoder-
  decoders): the task's pairs, a different seed for validation, and exact match of
  greedy answers on held-out examples as an extra metric.
* Sequence classification (``objective = "classify"``): the genre of Shakespeare's
  passages, split by play (`glassformer.train.genres`), class-balanced training batches,
  every validation passage once, macro-F1 and the confusion matrix as extra metrics; the
  model is built from scratch or is ``train.init_from`` (MiniLM) under a new head.
* Image classification (``objective = "classify"``, ``corpus = "digits"``): a vision
  transformer on scikit-learn's 8 x 8 digits, split once (`glassformer.train.images`); no
  tokenizer: the batches hold pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from glassformer.generate import GenerationSettings, generate_ids
from glassformer.models import TransformerModel, build, with_classifier
from glassformer.tokenizers import Tokenizer, load_tokenizer
from glassformer.tokenizers.char import CharTokenizer
from glassformer.train import classification, images
from glassformer.train import corpus as corpora
from glassformer.train.data import LMBatches, MLMBatches
from glassformer.train.genres import GENRES, shakespeare_genres
from glassformer.train.settings import RunConfig
from glassformer.train.tasks import TASKS, make_task
from glassformer.train.token_files import token_file
from glassformer.train.trainer import Trainer

MASK, PAD, EOT = "[MASK]", "[PAD]", "<|endoftext|>"


@dataclass
class Prepared:
    """A run ready to train."""

    net: TransformerModel
    tokenizer: Tokenizer
    train_batches: Any
    val_batches: list[dict[str, torch.Tensor]]
    sample: Callable[[TransformerModel], str] | None
    extra_eval: Callable[[TransformerModel], dict[str, float]] | None
    val_chars_per_token: float | None = None

    def trainer(self, run: RunConfig, out: str | Path, **options: Any) -> Trainer:
        """A `Trainer` of this net on these batches, writing the run directory ``out``;
        ``options`` are the trainer's own keywords (``sample``, ``extra_eval``, ``on_eval``, ``log``)."""
        return Trainer(run, self.net, self.tokenizer, self.train_batches, self.val_batches, out, **options)


def prepare(
    run: RunConfig, data_dir: str | Path | None = None, log: Callable[[str], None] = print
) -> Prepared:
    data_dir = Path(data_dir or corpora.default_data_dir())
    torch.manual_seed(run.train.seed)
    if run.train.init_from != "scratch" and run.data.objective not in ("classify", "lm"):
        raise ValueError(
            f"train.init_from={run.train.init_from!r} starts a classifier from a pretrained body "
            "(data.objective='classify') or goes on training a pretrained language model "
            f"(data.objective='lm'); data.objective={run.data.objective!r} trains from scratch"
        )
    _check_family(run)
    if run.data.objective in ("task", "seq2seq"):
        return _prepare_task(run)
    if run.data.objective == "classify":
        return _prepare_classify(run, data_dir)
    return _prepare_corpus(run, data_dir, log)


def load_corpus(name: str, data_dir: Path) -> corpora.Corpus:
    if name == "shakespeare":
        return corpora.shakespeare(data_dir)
    if name in TASKS:
        raise ValueError(f"{name!r} is a synthetic task: set data.objective to 'task' or 'seq2seq'")
    return corpora.text_files(name)


def _tokenizer(run: RunConfig, corpus: corpora.Corpus, data_dir: Path, log) -> Tokenizer:
    kind = run.data.tokenizer
    mlm = run.data.objective == "mlm"
    if kind == "char":
        specials = (MASK, PAD) if mlm else ()
        return CharTokenizer.from_text(corpus.train + corpus.val, special_tokens=specials)
    if kind == "bpe":
        from glassformer.tokenizers.bpe_train import train_bpe

        size = run.data.bpe_vocab_size
        path = data_dir / "tokenizers" / f"{corpus.name}-bpe{size}{'-mlm' if mlm else ''}.json"
        if path.exists():
            return load_tokenizer(path)
        log(f"training a {size:,}-token BPE tokenizer on {corpus.name} (cached in {path})")
        tokenizer = train_bpe(corpus.train, size, special_tokens=[EOT, MASK, PAD] if mlm else [EOT])
        tokenizer.save(path)
        return tokenizer
    return load_tokenizer(kind)


def _prepare_corpus(run: RunConfig, data_dir: Path, log) -> Prepared:
    net, tokenizer = pretrained_lm(run) if run.train.init_from != "scratch" else (None, None)
    corpus = load_corpus(run.data.corpus, data_dir)
    if tokenizer is None:  # fine-tuning reads the pretrained model's own
        tokenizer = _tokenizer(run, corpus, data_dir, log)
    stem = data_dir / "tokens" / f"{corpus.name}-{tokenizer.kind}{tokenizer.vocab_size}"
    train_ids = token_file(corpus.train, tokenizer, f"{stem}-train.bin")
    val_ids = token_file(corpus.val, tokenizer, f"{stem}-val.bin")
    s = run.train
    if run.data.objective == "mlm":
        special = tokenizer.special_tokens
        options = dict(
            vocab_size=tokenizer.vocab_size, mask_token_id=special[MASK], special_ids=tuple(special.values())
        )
        train = MLMBatches(train_ids, s.context, s.batch_size, s.seed, **options)
        val = MLMBatches(val_ids, s.context, s.batch_size, s.seed, **options).fixed(s.eval_batches)
        config = run.model_config(tokenizer.vocab_size, pad_token_id=special[PAD])
        return Prepared(build(config), tokenizer, train, val, None, None)
    train = LMBatches(train_ids, s.context, s.batch_size, s.seed)
    val = LMBatches(val_ids, s.context, s.batch_size, s.seed).fixed(s.eval_batches)
    net = net or build(run.model_config(tokenizer.vocab_size))
    prompt = tokenizer.encode("\n")
    n_sample = s.sample_tokens
    if net.config.positions == "learned":  # learned positions end at max_seq_len
        n_sample = min(n_sample, net.config.max_seq_len - len(prompt))
    chars_per_token = len(corpus.val) / len(val_ids)
    return Prepared(
        net, tokenizer, train, val, _text_sampler(tokenizer, prompt, n_sample), None, chars_per_token
    )


def _text_sampler(tokenizer: Tokenizer, prompt: list[int], n: int) -> Callable[[TransformerModel], str]:
    settings = GenerationSettings(max_new_tokens=n, temperature=0.8, top_k=200, seed=0)

    def sample(net: TransformerModel) -> str:
        net.eval()
        return tokenizer.decode(generate_ids(net, [prompt], settings)[0])

    return sample


# the family each objective trains (a classifier's body is the preset's own choice)
OBJECTIVE_FAMILY = {"lm": "decoder", "mlm": "encoder", "task": "decoder", "seq2seq": "encoder_decoder"}


def _check_family(run: RunConfig) -> None:
    """The preset's model.family is the one its objective trains (the one place a run reads it)."""
    expected = OBJECTIVE_FAMILY.get(run.data.objective)
    family = run.model.get("family", "decoder")
    if expected is not None and family != expected:
        raise ValueError(
            f"data.objective={run.data.objective!r} trains a {expected}; set model.family={expected!r}, "
            f"not {family!r}"
        )


def _prepare_task(run: RunConfig) -> Prepared:
    task = make_task(run.data.corpus, **run.data.task)
    architecture = "decoder" if run.data.objective == "task" else "encoder-decoder"
    s = run.train
    config = run.model_config(
        task.vocab_size,
        max_seq_len=max(task.max_seq_len(architecture), run.model.get("max_seq_len", 0)),
        pad_token_id=task.pad_id,
        bos_token_id=task.bos_id,
        eos_token_id=task.eos_id,
        decoder_start_token_id=task.bos_id if architecture != "decoder" else None,
    )
    net = build(config)
    train = task.batches(architecture, s.batch_size, s.seed)
    val = task.batches(architecture, s.batch_size, s.seed + 1).fixed(s.eval_batches)
    held_out = task.pairs(200, seed=s.seed + 2)
    prompts = [
        src + ([task.sep_id] if task.separated and architecture == "decoder" else []) for src, _ in held_out
    ]
    settings = GenerationSettings(
        max_new_tokens=task.max_target_length, greedy=True, stop_token_ids=(task.eos_id,)
    )

    def answers(net: TransformerModel, n: int) -> list[list[int]]:
        net.eval()
        return generate_ids(net, prompts[:n], settings)

    def extra_eval(net: TransformerModel) -> dict[str, float]:
        predicted = answers(net, len(prompts))
        hits = sum(task.exact_match(p, tgt) for p, (_, tgt) in zip(predicted, held_out, strict=True))
        return {"exact_match": round(hits / len(held_out), 4)}

    def sample(net: TransformerModel) -> str:
        shown = [
            f"{task.decode(src)} -> {task.decode(pred)}"
            for (src, _), pred in zip(held_out[:3], answers(net, 3), strict=True)
        ]
        return " | ".join(shown)

    return Prepared(net, task.tokenizer, train, val, sample, extra_eval)


def pretrained_lm(run: RunConfig) -> tuple[TransformerModel, Tokenizer]:
    """``train.init_from`` (a registry name such as "smollm2-135m-instruct", a Hugging Face
    checkpoint or a run directory) as it is, to go on predicting the next token (LoRA's
    adapters, ``train.lora_rank``, are the trainer's to add), and its own tokenizer."""
    from glassformer.loading import load

    s = run.train
    if run.data.tokenizer != "pretrained":
        raise ValueError(
            f"train.init_from={s.init_from!r} reads its own tokenizer's ids: set data.tokenizer='pretrained'"
        )
    if run.model:
        raise ValueError(
            f"train.init_from={s.init_from!r} keeps its own architecture; the preset's [model] table "
            f"must be empty, not {', '.join(sorted(run.model))}"
        )
    pretrained = load(s.init_from, fast_paths=False)
    config = pretrained.net.config
    if not config.generates:
        raise ValueError(
            f"data.objective='lm' predicts the next token, and {s.init_from!r} does not write text "
            "(no causal LM head)"
        )
    if s.context > config.max_seq_len:
        raise ValueError(
            f"train.context={s.context:,} exceeds max_seq_len={config.max_seq_len:,} of {s.init_from!r}"
        )
    return pretrained.net, pretrained.tokenizer


def pretrained_classifier(run: RunConfig) -> tuple[TransformerModel, Tokenizer]:
    """``train.init_from`` (a registry name such as "minilm-l6", a Hugging Face checkpoint or a
    run directory) under a new head of the genres, its ``[model]`` fields applied; and its own
    tokenizer."""
    from glassformer.loading import load

    if run.data.tokenizer != "pretrained":
        raise ValueError(
            f"train.init_from={run.train.init_from!r} reads its own tokenizer's ids: "
            "set data.tokenizer='pretrained'"
        )
    pretrained = load(run.train.init_from, fast_paths=False)
    fields = dict(run.model)
    pooling = fields.pop("classifier_pooling", None)
    net = with_classifier(pretrained.net, len(GENRES), pooling=pooling, class_names=GENRES, **fields)
    return net, pretrained.tokenizer


def _prepare_classify(run: RunConfig, data_dir: Path) -> Prepared:
    """The genre task: passages tokenized (at most ``train.context`` tokens, a closing [SEP]
    kept), a model from scratch or ``train.init_from`` under a new head, balanced batches; or
    the digits (`_prepare_digits`)."""
    if run.data.corpus == images.DIGITS_CORPUS:
        return _prepare_digits(run)
    if run.data.corpus != "shakespeare-genre":
        raise ValueError(
            "data.objective='classify' has two tasks, data.corpus='shakespeare-genre' (text) and "
            f"{images.DIGITS_CORPUS!r} (images), not {run.data.corpus!r}"
        )
    split = shakespeare_genres(data_dir, **run.data.task)
    s, n_classes = run.train, len(GENRES)
    if s.init_from != "scratch":
        net, tokenizer = pretrained_classifier(run)
    else:
        if run.data.tokenizer == "pretrained":
            raise ValueError(
                "data.tokenizer='pretrained' names the tokenizer of train.init_from, which is 'scratch'"
            )
        if run.data.tokenizer == "char":
            text = "".join(p.text for p in split.train + split.val)
            tokenizer = CharTokenizer.from_text(text, pad_token=PAD)
        else:
            tokenizer = load_tokenizer(run.data.tokenizer)
        fixed = {"n_classes": n_classes, "class_names": GENRES, "pad_token_id": tokenizer.pad_token_id}
        net = build(run.model_config(tokenizer.vocab_size, **fixed))
    limit, closing = min(s.context, net.config.max_seq_len), tokenizer.encode("")[-1:] or [None]

    def rows(passages) -> tuple[classification.Encoded, list[int]]:
        def encode(text: str) -> list[int]:
            return classification.truncate(tokenizer.encode(text), limit, closing[0])

        return classification.Encoded([p.text for p in passages], encode), [p.label for p in passages]

    pad = net.config.pad_token_id or 0
    train = classification.ClassificationBatches(
        *rows(split.train), s.batch_size, s.seed, pad_id=pad, n_classes=n_classes
    )
    val = classification.in_order(*rows(split.val), s.batch_size, pad)
    sample = classification.sampler(val, [p.text for p in split.val], GENRES)
    return Prepared(net, tokenizer, train, val, sample, classification.extra_eval(val))


def _prepare_digits(run: RunConfig) -> Prepared:
    """A vision transformer on the 8 x 8 digits (`glassformer.train.images`): trained from
    scratch on the training images, evaluated on every held-out image; no tokenizer."""
    if run.train.init_from != "scratch":
        raise ValueError(f"the digits are learned from scratch; train.init_from={run.train.init_from!r}")
    split = images.digits_task(**run.data.task)
    s = run.train
    net = build(images.digits_config(run))
    train = images.ImageBatches(split.train_images, split.train_labels, s.batch_size, s.seed)
    val = images.in_order(split.test_images, split.test_labels, s.batch_size)
    sample = images.sampler(val, images.DIGITS)
    return Prepared(net, None, train, val, sample, classification.extra_eval(val))
