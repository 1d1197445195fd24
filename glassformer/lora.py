"""Low-rank adapters (LoRA, Hu et al., 2021, arXiv:2106.09685): fine-tune a few matrices, not the model.

A targeted projection y = x W^T + b (W: out x in, frozen) gains a trainable low-rank term::

    y = x W^T + b + (alpha / r) · (x A^T) B^T          A: r x in,  B: out x r,  r << in, out

B starts at zero and A as PEFT initializes it (Kaiming-uniform with a = sqrt(5)), so the adapted
model starts as the base model computes. rsLoRA (Kalajdzievski, 2023) scales by alpha / sqrt(r).

    gf.lora(lm, rank=8, alpha=16, targets=("q", "v"))   # every other parameter frozen
    lm.trace(ids)["blocks.0.attn.q.lora"]                # b t (h e): (alpha / r) (x A^T) B^T
    gf.save_adapter(lm, "adapter/")                      # PEFT's files: PeftModel.from_pretrained
    gf.merge_lora(lm)                                    # W <- W + (alpha / r) B A, adapters gone

Targets are the names the trace uses: ``q``, ``k``, ``v`` (row blocks of the fused ``qkv_proj`` =
[W_Q; W_K; W_V]), ``qkv`` (all of it: GPT-2's ``c_attn``), ``o``, ``gate``, ``up``, ``down``; the
module names ``q_proj``, ``o_proj``, ... and the HF family's own (``c_attn``, ``c_fc``) say the same.
An adapter's term is the hook point ``{attn|ffn}.{target}.lora`` of its block.

`save_adapter` and `load_adapter` write and read them as Hugging Face PEFT does
(`glassformer.formats.hf_peft`: ``adapter_config.json``, ``adapter_model.safetensors``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.fast import plain_linear, sharing_parameters
from glassformer.formats.hf_peft import PeftLayout, read_adapter, write_adapter
from glassformer.lm import LanguageModel
from glassformer.models import TransformerModel
from glassformer.nn.hooks import HookPoint, name_hook_points

# target -> (the block's part, its projection): the part's trace names hold the adapter's term
TARGETS = {
    "q": ("attn", "qkv_proj"),
    "k": ("attn", "qkv_proj"),
    "v": ("attn", "qkv_proj"),
    "qkv": ("attn", "qkv_proj"),
    "o": ("attn", "o_proj"),
    "gate": ("ffn", "gate_proj"),
    "up": ("ffn", "up_proj"),
    "down": ("ffn", "down_proj"),
}


class LowRank(nn.Module):
    """One adapter: s (x A^T) B^T for rows ``rows`` of its projection's output.  ... in -> ... out."""

    def __init__(
        self,
        d_in: int,
        rows: tuple[int, int],
        rank: int,
        alpha: float,
        dropout: float = 0.0,
        rslora: bool = False,
    ) -> None:
        super().__init__()
        self.rows, self.rank, self.alpha, self.rslora = rows, rank, alpha, rslora
        self.A = nn.Parameter(torch.empty(rank, d_in))  # r in
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as PEFT's lora_A (nn.Linear's own default)
        self.B = nn.Parameter(torch.zeros(rows[1] - rows[0], rank))  # out r: zero, so y starts as x W^T + b
        self.dropout = nn.Dropout(dropout)

    @property
    def scale(self) -> float:
        """s = alpha / r (rsLoRA: alpha / sqrt(r))."""
        return self.alpha / (math.sqrt(self.rank) if self.rslora else self.rank)

    def delta(self) -> torch.Tensor:
        """The weight update s B A.  -> out in."""
        return self.scale * self.B @ self.A

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * (self.dropout(x) @ self.A.T) @ self.B.T  # ... in -> ... r -> ... out

    def extra_repr(self) -> str:
        return (
            f"rows={self.rows[0]}:{self.rows[1]}, rank={self.rank}, alpha={self.alpha}, scale={self.scale:g}"
        )


class LoRALinear(nn.Linear):
    """An nn.Linear (its own W and b, frozen) with adapters on blocks of its output rows::

    y = x W^T + b + sum_k place_k(s_k (x A_k^T) B_k^T)     (place_k: zeros outside rows_k)

    Each adapter's term passes through its hook point, declared on the block's part (``attn``,
    ``ffn``) so that its name reads ``blocks.{i}.attn.q.lora``."""

    @classmethod
    def over(cls, linear: nn.Linear) -> LoRALinear:
        """A LoRALinear over ``linear``'s own Parameter objects (ties and state dict names kept)."""
        adapted = sharing_parameters(linear, cls)
        adapted.adapters = nn.ModuleDict()
        adapted.points = {}  # target -> HookPoint, held in a dict: the part declares the point
        return adapted

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)  # ... out
        for target, adapter in self.adapters.items():
            start, stop = adapter.rows
            term = self.points[target](adapter(x))  # ... (stop - start)
            y = y + F.pad(term, (start, self.out_features - stop))  # ... out
        return y

    def plain(self) -> nn.Linear:
        """An ordinary nn.Linear over the same parameters (the adapters left behind)."""
        return plain_linear(self)


# -- adding and merging -------------------------------------------------------------------------


def lora(
    model: LanguageModel | TransformerModel,
    rank: int = 8,
    alpha: float = 16,
    targets: Iterable[str] = ("q", "v"),
    dropout: float = 0.0,
) -> LanguageModel | TransformerModel:
    """Add adapters of rank ``rank`` to projections ``targets`` of every block (self-attention and
    FFN of each stack), freeze every other parameter, and return ``model``.

    >>> import glassformer as gf
    >>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4)))
    >>> before = lm.logits([[1, 2, 3]])
    >>> _ = gf.lora(lm, rank=4, alpha=8, targets=("qkv", "o_proj"))
    >>> [name for name, p in lm.net.named_parameters() if p.requires_grad][:2]
    ['stack.blocks.0.attn.qkv_proj.adapters.qkv.A', 'stack.blocks.0.attn.qkv_proj.adapters.qkv.B']
    >>> torch.equal(lm.logits([[1, 2, 3]]), before)  # B = 0: the base model's function
    True
    >>> lm.trace([[1, 2, 3]], names=["blocks.*.attn.o.lora"])["blocks.1.attn.o.lora"].shape
    torch.Size([1, 3, 32])
    """
    net = as_net(model)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank={rank!r} must be a positive integer (typical: 4 to 64)")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout={dropout!r} must lie in [0, 1)")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha > 0:
        raise ValueError(
            f"alpha={alpha!r} must be a positive number (the scale is alpha / rank; typical: 2 rank)"
        )
    places = _projections(net, resolve_targets(net, targets))  # all checked before any is changed
    net.requires_grad_(False)
    for part, projection, target in places:
        add_adapter(part, projection, target, rank, alpha, dropout=dropout)
    name_points(net)
    return model


def merge_lora(model: LanguageModel | TransformerModel) -> LanguageModel | TransformerModel:
    """Fold every adapter into its weight, W[rows] <- W[rows] + s B A, and remove the adapters
    and their hook points. The parameters stay frozen as `lora` left them
    (``net.requires_grad_(True)`` to train them all)."""
    net = as_net(model)
    for part, name, linear in adapted_projections(net):
        with torch.no_grad():
            for target, adapter in linear.adapters.items():
                start, stop = adapter.rows
                linear.weight[start:stop] += adapter.delta().to(linear.weight.dtype)  # out in
                delattr(part, f"hook_{target}_lora")
        setattr(part, name, linear.plain())
    name_points(net)
    return model


def resolve_targets(net: TransformerModel, targets: Iterable[str]) -> list[str]:
    """Our target names for ``targets``: ours (``q``), the module names (``q_proj``) or the HF
    family's (``c_attn``; ``c_proj`` is both GPT-2's ``o`` and ``down``, as PEFT reads it)."""
    targets = [targets] if isinstance(targets, str) else list(targets)
    aliases: dict[str, set[str]] = {name: {name} for name in TARGETS}
    aliases.update({f"{name}_proj": {name} for name in TARGETS})
    if any(name not in aliases for name in targets):  # the HF family's names, from its key map
        for name, ours in _hf_names(net).items():
            aliases.setdefault(name, set()).update(ours)
    chosen: list[str] = []
    for name in targets:
        if name not in aliases:
            raise ValueError(f"unknown LoRA target {name!r}; valid targets: {', '.join(sorted(aliases))}")
        chosen += [t for t in TARGETS if t in aliases[name] and t not in chosen]
    if "qkv" in chosen and {"q", "k", "v"} & set(chosen):
        raise ValueError(
            "LoRA target 'qkv' already holds the rows of 'q', 'k' and 'v': choose one or the other"
        )
    if not chosen:
        raise ValueError("no LoRA targets given; valid targets: " + ", ".join(sorted(aliases)))
    return chosen


def target_rows(part: nn.Module, target: str, out_features: int) -> tuple[int, int]:
    """The rows of its projection's output a target adapts: a block of [W_Q; W_K; W_V] (h e, g e
    and g e rows of an attention ``part``), or all ``out_features``."""
    if target not in ("q", "k", "v"):
        return (0, out_features)
    q, kv = part.n_heads * part.d_head, part.n_kv_heads * part.d_head
    return {"q": (0, q), "k": (q, q + kv), "v": (q + kv, q + 2 * kv)}[target]


def as_net(model: LanguageModel | TransformerModel) -> TransformerModel:
    """The network a LanguageModel wraps, or the network itself; TypeError for anything else."""
    net = model.net if isinstance(model, LanguageModel) else model
    if not isinstance(net, TransformerModel):
        raise TypeError(
            f"LoRA adapts a Glassformer model (gf.LanguageModel or gf.build), got {type(model).__name__}"
        )
    return net


def _projections(net: TransformerModel, targets: list[str]) -> list[tuple[nn.Module, str, str]]:
    """(part, projection name, target) for each target of each block; ValueError where a block
    has no such plain projection."""
    places = []
    if any(True for _ in adapted_projections(net)):
        raise ValueError("this model has LoRA adapters already: merge them first (gf.merge_lora)")
    for stack in net.stacks:
        for i, block in enumerate(stack.blocks):
            for target in targets:
                part_name, projection = TARGETS[target]
                linear = getattr(getattr(block, part_name), projection, None)
                if not isinstance(linear, nn.Linear):
                    why = "its FFN is not gated" if target == "gate" else "it is not one plain linear layer"
                    why = "its FFN is a mixture of experts" if net.config.moe and part_name == "ffn" else why
                    raise ValueError(f"cannot adapt {target!r} of {stack.name} block {i}: {why}")
                places.append((getattr(block, part_name), projection, target))
    return places


def add_adapter(part: nn.Module, projection: str, target: str, rank: int, alpha: float, **options) -> LowRank:
    """An adapter on ``part.projection`` for ``target``, its hook point declared on ``part``."""
    linear = getattr(part, projection)
    if not isinstance(linear, LoRALinear):
        linear = LoRALinear.over(linear)
        setattr(part, projection, linear)
    rows = target_rows(part, target, linear.out_features)
    adapter = LowRank(linear.in_features, rows, rank, alpha, **options).to(
        linear.weight.device, linear.weight.dtype
    )
    linear.adapters[target] = adapter
    linear.points[target] = HookPoint(f"{target}.lora")
    setattr(part, f"hook_{target}_lora", linear.points[target])
    return adapter


def adapted_projections(net: nn.Module) -> Iterator[tuple[nn.Module, str, LoRALinear]]:
    """(part, projection name, LoRALinear) of every adapted projection."""
    for part in list(net.modules()):
        for name, child in list(part.named_children()):
            if isinstance(child, LoRALinear):
                yield part, name, child


def name_points(net: TransformerModel) -> None:
    """Name the hook points again: the adapters' appeared (or went) since the stacks named theirs."""
    for stack in net.stacks:
        stack.hook_points = name_hook_points(stack, prefix=stack.name)
    net.__dict__.pop("hook_points", None)  # the model's cached list of every point


def _hf_names(net: TransformerModel) -> dict[str, set[str]]:
    """The HF family's module names for our targets, read at the first block: ``c_attn`` -> qkv,
    ``c_proj`` -> o and down (GPT-2); none when no HF family holds this model."""
    try:
        layout = PeftLayout(net.config)
    except ValueError:
        return {}
    block, names = net.stacks[0].blocks[0], {}
    paths = {id(module): path for path, module in net.named_modules()}
    for target, (part_name, projection) in TARGETS.items():
        part = getattr(block, part_name)
        linear = getattr(part, projection, None)
        if not isinstance(linear, nn.Linear):
            continue
        weight, rows = (
            f"{paths[id(part)]}.{projection}.weight",
            target_rows(part, target, linear.out_features),
        )
        try:
            pieces = layout.modules(weight, rows, linear.out_features)
        except ValueError:  # GPT-2's q: a part of c_attn
            continue
        if len(pieces) == 1:
            names.setdefault(pieces[0][0].rsplit(".", 1)[-1], set()).add(target)
    return names


# -- PEFT's files -------------------------------------------------------------------------------


def save_adapter(
    model: LanguageModel | TransformerModel,
    directory: str | Path,
    base_model_name_or_path: str | None = None,
    *,
    model_type: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write the adapters as PEFT writes them, for the HF model the export writes (``model_type``
    as `save_hf`'s), so that ``PeftModel.from_pretrained(hf_model, directory)`` computes what ours
    does: ``adapter_config.json`` and ``adapter_model.safetensors``, renamed into place whole. A
    directory that holds files is replaced only with ``overwrite`` (and only PEFT's files there)."""
    net, directory = as_net(model), Path(directory)
    adapted = [(path, m) for path, m in net.named_modules() if isinstance(m, LoRALinear)]
    if not adapted:
        raise ValueError("this model has no LoRA adapters to save (gf.lora adds them)")
    if directory.is_dir() and any(directory.iterdir()) and not overwrite:
        raise FileExistsError(f"{directory} holds files; pass overwrite=True to replace the adapter there")
    layout, pairs, kinds = PeftLayout(net.config, model_type), {}, set()
    for path, linear in adapted:
        for adapter in linear.adapters.values():
            kinds.add((adapter.rank, adapter.alpha, adapter.rslora, adapter.dropout.p))
            first = adapter.rows[0]
            for module, (start, stop) in layout.modules(f"{path}.weight", adapter.rows, linear.out_features):
                pairs[module] = (adapter.A, adapter.B[start - first : stop - first])  # r in, its rows r
    if len(kinds) > 1:
        raise ValueError("the adapters differ in rank, alpha or dropout; PEFT's rank_pattern is not written")
    ((rank, alpha, rslora, dropout),) = kinds
    c = net.config
    fields = {
        "base_model_name_or_path": base_model_name_or_path,
        "task_type": "SEQ_2_SEQ_LM" if c.seq2seq else "CAUSAL_LM" if c.generates else None,
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": dropout,
        "use_rslora": rslora,
        "fan_in_fan_out": layout.fan_in_fan_out(set(pairs)),
        "target_modules": layout.target_modules(set(pairs)),
    }
    write_adapter(directory, pairs, fields)
    return directory


def load_adapter(
    model: LanguageModel | TransformerModel, directory: str | Path, *, model_type: str | None = None
) -> LanguageModel | TransformerModel:
    """Read a PEFT LoRA adapter (ours, or PEFT's ``save_pretrained``) onto ``model``, strictly:
    each ``adapter_config.json`` key that changes the computation read or refused by name
    (`glassformer.formats.hf_peft.check_config`), each matrix placed or refused by name, nothing
    changed until all are placed. Every other parameter is frozen, as `lora` does."""
    net = as_net(model)
    if any(True for _ in adapted_projections(net)):
        raise ValueError("this model has LoRA adapters already: merge them first (gf.merge_lora)")
    config, pairs = read_adapter(Path(directory))
    layout, modules, plan = PeftLayout(net.config, model_type), dict(net.named_modules()), []
    r = config["r"]
    for module, (a, b) in pairs.items():
        weight, rows = layout.place(module)
        path, projection = weight.removesuffix(".weight").rsplit(".", 1)
        part = modules[path]
        linear = getattr(part, projection)
        rows = rows or (0, linear.out_features)
        named = [t for t, (_, p) in TARGETS.items() if p == projection]
        target = next((t for t in named if target_rows(part, t, linear.out_features) == rows), None)
        if target is None:
            raise ValueError(
                f"{module!r} is rows {rows[0]}:{rows[1]} of our {weight}, which no LoRA target adapts"
            )
        if a.shape != (r, linear.in_features) or b.shape != (rows[1] - rows[0], r):
            raise ValueError(
                f"{module!r}: lora_A {tuple(a.shape)} and lora_B {tuple(b.shape)}; r={r} asks for "
                f"({r}, {linear.in_features}) and ({rows[1] - rows[0]}, {r})"
            )
        plan.append((part, projection, target, a, b))
    net.requires_grad_(False)
    for part, projection, target, a, b in plan:
        options = {"dropout": config["lora_dropout"], "rslora": config["use_rslora"]}
        adapter = add_adapter(part, projection, target, r, config["lora_alpha"], **options)
        with torch.no_grad():
            adapter.A.copy_(a), adapter.B.copy_(b)
    name_points(net)
    return model
