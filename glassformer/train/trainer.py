"""The training loop: one readable step, periodic evaluation, checkpoints, resume.

One optimization step::

    for each of grad_accum micro-batches:
        loss = CE(model(batch), labels) / grad_accum        (autocast: train/precision.py)
               (+ a mixture of experts' router losses: aux_coef * aux + z_coef * z)
        loss.backward()                                     (fp16: loss x scale)
    clip the global gradient norm to grad_clip         (fp16: gradients / scale first)
    optimizer.step(); scheduler.step(); zero the gradients

Every ``eval_interval`` steps (and at the end) the model is scored on a fixed set of
validation batches — loss, perplexity, token accuracy, expected calibration error — and
samples a little text; the line goes to ``metrics.jsonl`` and TensorBoard. A checkpoint
holds everything needed to resume bit for bit: weights, optimizer, schedule, step, the
batcher's position and every RNG. Ctrl-C saves one and exits cleanly. A LoRA run
(``train.lora_rank`` > 0) trains adapters on its pretrained model alone; its checkpoint holds the
merged model, the adapters and their PEFT files (`glassformer.train.lora_run`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from glassformer import fast
from glassformer.formats.run_directory import PROGRESS
from glassformer.models import TransformerModel
from glassformer.nn.moe import RouterLosses, collected_router_logits, router_losses
from glassformer.train import (
    checkpoint,
    device,
    distributed,
    distributed_checkpoint,
    lora_run,
    metrics,
    precision,
    scale,
)
from glassformer.train.compile_trial import CompileTrial
from glassformer.train.data import model_input, tokens_in
from glassformer.train.denormals import flush_denormal
from glassformer.train.optim import make_optimizer
from glassformer.train.schedules import make_scheduler
from glassformer.train.settings import RunConfig
from glassformer.train.tensorboard_log import TensorBoardLog

Batch = dict[str, torch.Tensor]


@dataclass
class EvalResult:
    loss: float
    accuracy: float
    ece: float
    tokens: int

    @property
    def perplexity(self) -> float:
        return metrics.perplexity(self.loss)


class Trainer:
    """Trains ``net`` on ``train_batches`` (an iterator of batch dicts with state_dict /
    load_state_dict) and evaluates on the fixed list ``val_batches``."""

    def __init__(
        self,
        run: RunConfig,
        net: TransformerModel,
        tokenizer: Any,
        train_batches: Iterator[Batch],
        val_batches: list[Batch],
        run_dir: str | Path,
        sample: Callable[[TransformerModel], str] | None = None,
        extra_eval: Callable[[TransformerModel], dict[str, float]] | None = None,
        log: Callable[[str], None] = print,
        on_eval: Callable[[TransformerModel, int], None] | None = None,
    ) -> None:
        self.run, self.settings = run, run.train
        self.device = device.resolve(run.train.device)  # "auto": cuda, else mps, else cpu
        # LoRA: adapters on the pretrained net, every other weight frozen, before the optimizer sees it
        lora_lines = lora_run.add(net, run.train) if run.train.lora_rank else []
        # glassformer.fast: attention in float32 under bf16 autocast (CPU attention is slower
        # in bf16), the decode product when sampling; both compute what the plain path does.
        self.net, self.tokenizer = fast.enable(net.to(self.device)), tokenizer
        tokens = run.train.batch_size * run.train.context
        self.precision = precision.choose(run.train.dtype, net.config, self.device, tokens)  # auto: measured
        self.scaler = self.precision.scaler()  # fp16's loss scaling; passes through otherwise
        self.setup_lines = [device.describe(run.train.device, self.device), self.precision.describe()]
        self.setup_lines += lora_lines + scale.apply(net, run.train.checkpoint_activations, run.train.compile)
        # several processes (torchrun): DDP or FSDP2, each rank a slice of every global batch
        self.parallel = distributed.Parallel(self.net, run.train.parallel)  # one process: nothing
        self.compile_trial = CompileTrial(self.net, run.train.compile, self.parallel.world)  # "auto": timed
        log = log if self.parallel.is_main else (lambda _: None)  # rank 0 alone speaks and writes
        if run.train.lora_rank and self.parallel.world > 1:  # DCP's shards would hold unmerged weights
            raise ValueError("train.lora_rank > 0 trains in one process; launch it without torchrun")
        self.train_batches, self.val_batches = train_batches, val_batches
        self.run_dir = Path(run_dir)
        self.sample, self.extra_eval, self.log = sample, extra_eval, log
        self.on_eval = on_eval  # called with (net, step) after each evaluation: the film
        s = self.settings
        self.optimizer = make_optimizer(
            net,
            s.optimizer,
            lr=s.lr,
            weight_decay=s.weight_decay,
            betas=(s.beta1, s.beta2),
            momentum=s.momentum,
            fused=self.device.type == "cuda",
        )
        self.scheduler = make_scheduler(
            self.optimizer,
            s.schedule,
            warmup_steps=s.warmup_steps,
            total_steps=s.steps,
            min_lr_ratio=s.min_lr_ratio,
            d_model=net.config.d_model,
        )
        self.step = 0
        self.router_stats: RouterLosses | None = None  # a mixture's last router losses and loads
        self.router_term = 0.0  # what they added to the last training loss
        self.metrics_log = self.parallel.log(metrics.MetricsLog(self.run_dir / "metrics.jsonl"))
        self.progress_log = self.parallel.log(metrics.MetricsLog(self.run_dir / PROGRESS, fsync=False))
        self.tensorboard: TensorBoardLog | None = None  # rank 0's, when train.tensorboard

    # one step -----------------------------------------------------------------------
    def loss(
        self, batch: Batch, label_smoothing: float = 0.0, router: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean cross-entropy over scored positions, logits b t v) for one batch; for a
        classifier (``config.n_classes``) the logits are b c and ``labels`` b, one per row.
        With ``router``, a mixture of experts adds its router losses (`router_loss`)."""
        forward = lambda: self.parallel.forward(self.net)(  # noqa: E731  (DDP's while training)
            model_input(batch),  # ids, or an image batch's pixels
            batch.get("decoder_input_ids"),
            batch.get("attention_mask"),
            batch.get("decoder_attention_mask"),
        )  # b t v, or b c
        if not (router and self.net.config.moe):
            logits = forward()
            return metrics.cross_entropy(logits, batch["labels"], label_smoothing), logits
        with collected_router_logits(self.net.hook_points) as router_logits:
            logits = forward()
        loss = metrics.cross_entropy(logits, batch["labels"], label_smoothing)
        return loss + self.router_loss(router_logits, batch.get("attention_mask")), logits

    def router_loss(self, router_logits: list[torch.Tensor], mask: torch.Tensor | None) -> torch.Tensor:
        """aux_coef * load-balancing loss + z_coef * z-loss over the MoE layers; each expert's
        load is kept for the progress line."""
        config, s = self.net.config, self.settings
        losses = router_losses(router_logits, config.experts_per_token, config.router, mask)
        term = s.router_aux_loss_coef * losses.aux + s.router_z_loss_coef * losses.z
        self.router_stats, self.router_term = losses, term.item()
        return term

    def _autocast(self):
        return self.precision.autocast()  # bf16 / fp16 autocast, or nothing for float32

    def train_step(self) -> tuple[float, float, int]:
        """One optimizer step; returns (loss, gradient norm before clipping, tokens seen)."""
        s = self.settings
        self.net.train()
        total, tokens = 0.0, 0
        for _ in range(s.grad_accum):
            whole = device.to_device(next(self.train_batches), self.device)
            batch, share = self.parallel.shard(whole)  # this rank's rows (all of them in one process)
            with self._autocast():
                loss, _ = self.loss(batch, s.label_smoothing, router=True)
            loss_share = self.parallel.weighted(loss, share)  # averaged over ranks: the global mean
            self.scaler.scale(loss_share / s.grad_accum).backward()  # fp16: times the loss scale
            total += (loss.item() - self.router_term) * share / s.grad_accum  # the cross-entropy alone
            tokens += tokens_in(whole, self.net.config.n_patches)
        self.scaler.unscale_(self.optimizer)  # fp16: the true gradients, before clipping
        norm = torch.nn.utils.clip_grad_norm_(
            self.net.parameters(), s.grad_clip if s.grad_clip > 0 else math.inf
        )
        self.scaler.step(self.optimizer)  # optimizer.step(), skipped by fp16 if a gradient overflowed
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return self.parallel.reduce_sum(total), float(distributed.local_value(norm)), tokens

    # evaluation ---------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> EvalResult:
        """Loss, accuracy and calibration over the fixed validation batches (the ECE from one
        set of confidence bins over every batch: an average of per-batch ECEs would be biased
        upward, badly so for small batches of classifier rows)."""
        self.net.eval()
        losses, accuracies, bins, counts = [], [], [], []
        for batch in self.val_batches:
            batch = device.to_device(batch, self.device)
            with self._autocast():
                loss, logits = self.loss(batch)
            n = int((batch["labels"] != -100).sum())
            losses.append(loss.item() * n)
            accuracies.append(metrics.token_accuracy(logits.float(), batch["labels"]) * n)
            bins.append(metrics.calibration_bins(logits.float(), batch["labels"]))
            counts.append(n)
        n = max(sum(counts), 1)
        return EvalResult(sum(losses) / n, sum(accuracies) / n, metrics.pooled_calibration_error(bins), n)

    # the loop -----------------------------------------------------------------------
    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train to ``settings.steps``; returns the last evaluation line.

        Denormal floats are flushed to zero while it runs (late in training some gradients
        and Adam moments are denormals, which the CPU handles ~100x slower): see
        `glassformer.train.denormals`; the setting is put back when it returns or raises.
        """
        with flush_denormal():
            if resume:
                self._restore()
            else:
                self.save()  # a run directory is usable (and listable) from the first second
            if self.settings.tensorboard and self.parallel.is_main:
                self.tensorboard = TensorBoardLog.open(self.run_dir, self.step, self.log)
            for line in self.setup_lines:  # the device, the dtype and why, the tools of scale
                self.log(line)
            try:
                return self._train_to_the_end()
            finally:
                if self.tensorboard is not None:
                    self.tensorboard.close(self.net, self.tokenizer, self.step)

    def _train_to_the_end(self) -> dict[str, Any]:
        s = self.settings
        quiet = None if self.parallel.is_main else True  # tqdm's None: shown on a terminal
        bar = tqdm(total=s.steps, initial=self.step, desc=self.run.name, unit="step", disable=quiet)
        stop = self.parallel.stop_request()  # Ctrl-C waits for the step's end
        try:
            with stop:
                return self._train_steps(bar, stop)
        except KeyboardInterrupt:
            bar.close()
            if self.parallel.world > 1 and not stop.stopping:  # not at an agreed step: no collective save
                self.log(f"interrupted at step {self.step}: --resume continues from the last checkpoint")
                raise
            self.save()
            self.log(f"interrupted at step {self.step}: checkpoint saved; continue with --resume")
            raise
        finally:
            bar.close()

    def _train_steps(self, bar: tqdm, stop: distributed.StopRequest) -> dict[str, Any]:
        """Steps, evaluations and checkpoints up to ``settings.steps``; the last evaluation line."""
        s = self.settings
        window_loss, window_tokens, window_time = [], 0, 0.0
        last: dict[str, Any] = {}
        while self.step < s.steps:
            start = time.perf_counter()
            loss, norm, tokens = self.train_step()
            seconds = time.perf_counter() - start
            window_time += seconds
            decided = self.compile_trial.after_step(seconds, s.steps - self.step)
            if decided:
                self.log(decided)
            window_loss.append(loss)
            window_tokens += tokens
            tokens_per_s = window_tokens / max(window_time, 1e-9)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:,.0f}")
            self._scalar("train/loss", loss)
            self._scalar("train/grad_norm", norm)
            self._scalar("train/lr", self.scheduler.get_last_lr()[0])
            self._progress(loss, norm, tokens_per_s)
            if self.step % s.eval_interval == 0 or self.step == s.steps:
                train_loss = sum(window_loss) / len(window_loss)
                last = self.parallel.on_full_model(  # on rank 0; the others wait
                    self, self._evaluate_and_log, train_loss, tokens_per_s
                )
                window_loss, window_tokens, window_time = [], 0, 0.0
            if self.step % s.checkpoint_interval == 0 or self.step == s.steps:
                self.save()
            if stop.agreed():  # every rank, after this same step
                raise KeyboardInterrupt
        return last

    def _evaluate_and_log(self, train_loss: float, tokens_per_s: float) -> dict[str, Any]:
        result = self.evaluate()
        line: dict[str, Any] = {
            "step": self.step,
            "train_loss": round(train_loss, 5),
            "val_loss": round(result.loss, 5),
            "val_ppl": round(result.perplexity, 4),
            "val_accuracy": round(result.accuracy, 5),
            "val_ece": round(result.ece, 5),
            "tokens_per_s": round(tokens_per_s, 1),
            "lr": self.scheduler.get_last_lr()[0],
        }
        if self.setup_lines:  # the first evaluation of this process records its setup
            line["setup"], self.setup_lines = self.setup_lines, []
        if self.extra_eval is not None:  # in the run's precision, as the evaluation above
            with self._autocast():
                line.update(self.extra_eval(self.net))
        if self.sample is not None:
            line["sample"] = self.sample(self.net)
        self.metrics_log.append(line)
        for key in ("val_loss", "val_accuracy", "val_ece", "val_ppl"):
            self._scalar(f"val/{key[4:]}", line[key])
        if self.tensorboard is not None:
            row = device.to_device({k: v[:1] for k, v in self.val_batches[0].items()}, self.device)
            self.tensorboard.evaluation(self.net, lambda: self.loss(row), self.step)
        if self.on_eval is not None:
            self.on_eval(self.net, self.step)
        shown = ", ".join(
            f"{k} {v:,.0f}" if k == "tokens_per_s" else f"{k} {v:.4g}"
            for k, v in line.items()
            if isinstance(v, float) and k != "lr"
        )
        self.log(f"step {self.step}: {shown}")
        if "sample" in line:
            self.log("  sample: " + line["sample"].replace("\n", "\n          ")[:400])
        return line

    def _progress(self, loss: float, norm: float, tokens_per_s: float) -> None:
        """One line of ``progress.jsonl``: what the live charts of the workshop's lab read."""
        line = {"step": self.step, "loss": round(loss, 5), "grad_norm": round(norm, 5)}
        line |= {"lr": self.scheduler.get_last_lr()[0], "tokens_per_s": round(tokens_per_s, 1)}
        if self.router_stats is not None:  # a mixture of experts: its router and each layer's load
            stats = self.router_stats
            line |= {"router_aux": round(stats.aux.item(), 5), "router_z": round(stats.z.item(), 5)}
            line["expert_load"] = [[round(x, 4) for x in layer] for layer in stats.load.tolist()]
            line["expert_overflow"] = [round(x, 4) for x in stats.over_capacity().tolist()]  # past 1.25
        self.progress_log.append(line | {"steps": self.settings.steps, "time": round(time.time(), 3)})

    # checkpoints --------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "data": self.train_batches.state_dict(),
            "rng": checkpoint.capture_rng(),
            "scaler": self.scaler.state_dict(),  # fp16's loss scale ({} otherwise)
        }

    def save(self) -> None:
        if self.parallel.world > 1:  # DCP's shards beside rank 0's consolidated files
            distributed_checkpoint.save(self)
            return
        state, weights = self._state(), None
        if self.settings.lora_rank:  # the merged model to read, the adapters to resume (lora_run)
            state["adapters"], weights = lora_run.adapter_state(self.net), lora_run.merged_weights(self.net)
        run = self.run.to_dict()
        checkpoint.save_checkpoint(self.run_dir, self.net, self.tokenizer, run, state, weights=weights)
        if self.settings.lora_rank:
            lora_run.write_peft(self.net, self.run_dir, self.settings.init_from)

    def _restore(self) -> None:
        state = checkpoint.load_trainer_state(self.run_dir)
        if not distributed_checkpoint.restore(self, state):  # a one-process checkpoint
            if self.settings.lora_rank:  # the adapters, on the base that prepare loaded afresh
                lora_run.restore(self.net, state.get("adapters"))
            else:
                net, _ = checkpoint.load_model(self.run_dir)
                self.net.load_state_dict(net.state_dict())
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.train_batches.load_state_dict(state["data"])
        checkpoint.restore_rng(state["rng"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.metrics_log.truncate_after(self.step)  # evaluations after the checkpoint are redone
        self.progress_log.truncate_after(self.step)
        self.log(f"resumed {self.run_dir} at step {self.step}")

    def _scalar(self, tag: str, value: float) -> None:
        if self.tensorboard is not None:
            self.tensorboard.scalar(tag, value, self.step)
