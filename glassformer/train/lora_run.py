"""A LoRA run: adapters added to ``train.init_from``, trained alone, and checkpointed.

With ``train.lora_rank`` > 0 the trainer adds adapters to the pretrained model (`add`, before its
optimizer is built: the optimizer sees only what has ``requires_grad``, the adapters' A and B) and
each checkpoint writes::

    model.safetensors   the adapted model merged, W + (alpha / r) B A for each adapted W: the run
                        opens as any fine-tuned run (gf.load, glassformer generate, the workshop's
                        compare of base and run), its config.json the base's own
    trainer_state.pt    "adapters": every A and B by name (`adapter_state`). Resume puts them back
                        on a fresh copy of the base (`restore`): merged weights cannot be split again
    adapter/            the adapters in PEFT's files (`gf.save_adapter`: adapter_config.json,
                        adapter_model.safetensors), for ``PeftModel.from_pretrained`` or
                        ``gf.load_adapter`` on the base

>>> import glassformer as gf
>>> from glassformer.train.settings import TrainConfig
>>> net = gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4))
>>> add(net, TrainConfig(init_from="base", lora_rank=4, lora_targets=["q", "v"]))[0]
'LoRA: rank 4, alpha 16 on q, v: 1,024 of 36,288 parameters train (2.82%)'
>>> sorted(adapter_state(net))[:2]
['stack.blocks.0.attn.qkv_proj.adapters.q.A', 'stack.blocks.0.attn.qkv_proj.adapters.q.B']
>>> sorted(merged_weights(net)) == sorted(unique_state_dict(gf.build(net.config)))  # the base's names
True
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from glassformer.formats.hf_peft import PeftLayout
from glassformer.formats.run_directory import ADAPTER, unique_state_dict
from glassformer.lora import LoRALinear, lora, save_adapter
from glassformer.train.settings import TrainConfig


def add(net: nn.Module, settings: TrainConfig) -> list[str]:
    """Adapters on ``net`` as ``settings`` asks (every other weight frozen); the lines that say so."""
    lora(net, rank=settings.lora_rank, alpha=settings.lora_alpha, targets=settings.lora_targets)
    trained = sum(p.numel() for p in net.parameters() if p.requires_grad)
    total = sum(p.numel() for p in net.parameters())
    lines = [
        f"LoRA: rank {settings.lora_rank}, alpha {settings.lora_alpha:g} on "
        f"{', '.join(settings.lora_targets)}: {trained:,} of {total:,} parameters train "
        f"({100 * trained / total:.2f}%)"
    ]
    try:
        PeftLayout(net.config)
    except ValueError as error:  # no Hugging Face family holds this model: PEFT could not read it
        lines.append(f"no {ADAPTER}/ in PEFT's files: {error}")
    return lines


def _adapted(net: nn.Module) -> list[tuple[str, LoRALinear]]:
    net = getattr(net, "_orig_mod", net)  # torch.compile's wrapper
    return [(path, m) for path, m in net.named_modules() if isinstance(m, LoRALinear)]


def _adapter_parameters(net: nn.Module) -> dict[str, nn.Parameter]:
    """Every adapter's A and B under its state-dict name."""
    return {
        name: p
        for path, linear in _adapted(net)
        for name, p in linear.adapters.named_parameters(prefix=f"{path}.adapters")
    }


def adapter_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """Every adapter's A and B under its state-dict name, copied to the CPU (trainer_state.pt's)."""
    return {name: p.detach().cpu().clone() for name, p in _adapter_parameters(net).items()}


def merged_weights(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net``'s weights with each adapter folded in, W[rows] + (alpha / r) B A, under the base's
    names (the adapters' own left out): what model.safetensors holds. ``net`` is left as it is."""
    weights = unique_state_dict(getattr(net, "_orig_mod", net))  # on the CPU: the parameters' own
    for path, linear in _adapted(net):
        weight = weights[f"{path}.weight"] = weights[f"{path}.weight"].clone()  # out in, a copy to add to
        for adapter in linear.adapters.values():
            start, stop = adapter.rows
            weight[start:stop] += adapter.delta().detach().cpu().to(weight.dtype)
    names = _adapter_parameters(net).keys()
    return {name: tensor for name, tensor in weights.items() if name not in names}


def restore(net: nn.Module, saved: object) -> None:
    """Put a checkpoint's adapters (`adapter_state`) back on ``net``, each name and shape checked."""
    own = _adapter_parameters(net)
    if not isinstance(saved, dict) or set(saved) != set(own):
        missing = sorted(set(own) - set(saved)) if isinstance(saved, dict) else ["all of them"]
        raise ValueError(
            "the checkpoint's LoRA adapters do not match this run's (train.lora_rank, lora_targets): "
            f"missing {', '.join(missing[:3]) or 'none'}; restart the run without --resume"
        )
    for name, param in own.items():
        tensor = saved[name]
        if not isinstance(tensor, torch.Tensor) or tensor.shape != param.shape:
            raise ValueError(f"the checkpoint's adapter {name} is not a tensor of shape {tuple(param.shape)}")
        with torch.no_grad():
            param.copy_(tensor)


def write_peft(net: nn.Module, run_dir: Path, base_name: str) -> None:
    """The adapters in PEFT's files, in ``run_dir/adapter`` (replaced whole); nothing where no
    Hugging Face family holds the model (`add` said so)."""
    net = getattr(net, "_orig_mod", net)
    try:
        PeftLayout(net.config)
    except ValueError:
        return
    save_adapter(net, Path(run_dir) / ADAPTER, base_model_name_or_path=base_name, overwrite=True)
