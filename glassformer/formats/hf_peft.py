"""LoRA adapters in Hugging Face PEFT's files (peft 0.21): where each goes, written and read.

A PEFT LoRA directory holds ``adapter_config.json`` (r, lora_alpha, target_modules, ...) and
``adapter_model.safetensors`` with, for each adapted HF module, ``base_model.model.{module}.lora_A.weight``
(r x in) and ``.lora_B.weight`` (out x r): the module computes y = x W^T + b + s (x A^T) B^T
(`glassformer.lora`). Which HF module holds which rows of our weights comes from the export's
key map (`PeftLayout`, over `glassformer.formats.hf_export.choose_family`), never from a table of
its own: Llama's ``model.layers.{i}.self_attn.q_proj`` is rows 0:h e of our ``qkv_proj``, GPT-2's
``transformer.h.{i}.attn.c_attn`` all of it (so there q, k and v cannot be adapted apart).

This module reads and writes the files; `glassformer.lora` (``gf.save_adapter``,
``gf.load_adapter``) puts the matrices onto a model and takes them off it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from glassformer.atomic import write_directory_atomic
from glassformer.config import ModelConfig
from glassformer.formats.hf_export import choose_family
from glassformer.formats.key_map import Conv1D, Mapped, TheirRows
from glassformer.formats.safetensors_file import SafetensorsFile

CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."  # PeftModel -> LoraModel -> the HF model, in PEFT's key names
# adapter_config.json as peft 0.21.2's save_pretrained writes it for a plain LoRA (its defaults);
# save_adapter sets r, lora_alpha, lora_dropout, use_rslora, fan_in_fan_out, target_modules, ...
PEFT_DEFAULTS = {
    "alora_invocation_tokens": None,
    "alpha_pattern": {},
    "arrow_config": None,
    "auto_mapping": None,
    "base_model_name_or_path": None,
    "bias": "none",
    "corda_config": None,
    "ensure_weight_tying": False,
    "eva_config": None,
    "exclude_modules": None,
    "fan_in_fan_out": False,
    "inference_mode": True,
    "init_lora_weights": True,
    "kasa_config": None,
    "layer_replication": None,
    "layers_pattern": None,
    "layers_to_transform": None,
    "loftq_config": {},
    "lora_alpha": 8,
    "lora_bias": False,
    "lora_dropout": 0.0,
    "lora_ga_config": None,
    "megatron_config": None,
    "megatron_core": "megatron.core",
    "modules_to_save": None,
    "monteclora_config": None,
    "peft_type": "LORA",
    "peft_version": "0.21.2",  # the PEFT release whose files these are
    "qalora_group_size": 16,
    "r": 8,
    "rank_pattern": {},
    "revision": None,
    "target_modules": None,
    "target_parameters": None,
    "task_type": "CAUSAL_LM",
    "trainable_token_indices": None,
    "use_bdlora": None,
    "use_dora": False,
    "use_qalora": False,
    "use_rslora": False,
    "velora_config": None,
}


class PeftLayout:
    """The export's key map read for adapters: the HF modules that hold our weights' rows.

    >>> from glassformer.config import ModelConfig
    >>> layout = PeftLayout(ModelConfig(d_model=32, n_layers=1, n_heads=4, vocab_size=50))  # GPT-2's
    >>> layout.modules("stack.blocks.0.attn.qkv_proj.weight", (0, 96), 96)
    [('transformer.h.0.attn.c_attn', (0, 96))]
    >>> layout.target_modules({"transformer.h.0.attn.c_proj"})  # not mlp.c_proj: named in full
    ['transformer.h.0.attn.c_proj']
    """

    def __init__(self, config: ModelConfig, model_type: str | None = None) -> None:
        _, _, mapping = choose_family(config, model_type)
        items = [m for m in mapping if m.ours.endswith(".weight") and m.theirs.endswith(".weight")]
        self.by_weight: dict[str, list[Mapped]] = {}  # our weight -> the items that fill it
        for item in items:
            self.by_weight.setdefault(item.ours, []).append(item)
        self.by_module = {item.theirs.removesuffix(".weight"): item for item in items}  # HF module -> item

    def modules(
        self, weight: str, rows: tuple[int, int], out_features: int
    ) -> list[tuple[str, tuple[int, int]]]:
        """The HF modules that hold ``rows`` of our ``weight``, each with its rows of it, in order:
        PEFT adapts a module whole, so each must lie inside ``rows``."""
        pieces = []
        for item in self.by_weight.get(weight, []):
            start, stop = item.rows or (0, out_features)
            module = item.theirs.removesuffix(".weight")
            inside = rows[0] <= start and stop <= rows[1]
            if start < rows[1] and rows[0] < stop and (not inside or isinstance(item.transform, TheirRows)):
                raise ValueError(
                    f"HF holds rows {start}:{stop} of {weight} and more in one module, {module!r}, which "
                    "PEFT adapts whole; adapt all of it (GPT-2's c_attn: target 'qkv')"
                )
            if inside:
                pieces.append((module, (start, stop)))
        return sorted(pieces, key=lambda piece: piece[1])

    def place(self, module: str) -> tuple[str, tuple[int, int] | None]:
        """Our weight that HF ``module`` is, and its rows of it (None: all)."""
        item = self.by_module.get(module)
        if item is None or isinstance(item.transform, TheirRows):
            raise ValueError(f"{WEIGHTS_FILE} adapts {module!r}, which is not one of this model's HF modules")
        return item.ours, item.rows

    def target_modules(self, adapted: set[str]) -> list[str]:
        """PEFT's ``target_modules``: each module's last name (``q_proj``) where that names no module
        left unadapted, its full name where it would (GPT-2's ``c_proj``: attention's and the FFN's)."""
        out = set()
        for module in adapted:
            short = module.rsplit(".", 1)[-1]
            named = {m for m in self.by_module if _named_by(m, [short])}
            out |= {short} if named <= adapted else {module}
        return sorted(out)

    def fan_in_fan_out(self, adapted: set[str]) -> bool:
        """Whether the adapted modules store W as (in, out) (GPT-2's Conv1D): PEFT's flag for merging."""
        return any(isinstance(self.by_module[m].transform, Conv1D) for m in adapted)


def write_adapter(directory: Path, pairs: dict[str, tuple[torch.Tensor, torch.Tensor]], fields: dict) -> None:
    """``adapter_model.safetensors`` (module -> (A, B)) and ``adapter_config.json`` (PEFT's
    defaults and ``fields``), written into a hidden sibling, then renamed into place."""
    from safetensors.torch import save

    tensors = {}
    for module, (a, b) in sorted(pairs.items()):
        tensors[f"{PEFT_PREFIX}{module}.lora_A.weight"] = a.detach().cpu().contiguous().clone()  # r in
        tensors[f"{PEFT_PREFIX}{module}.lora_B.weight"] = b.detach().cpu().contiguous().clone()  # out r
    config = {**PEFT_DEFAULTS, **fields}
    with write_directory_atomic(directory, (CONFIG_FILE, WEIGHTS_FILE, "README.md")) as staging:
        (staging / WEIGHTS_FILE).write_bytes(save(tensors, metadata={"format": "pt"}))
        (staging / CONFIG_FILE).write_text(
            json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )


def read_adapter(directory: Path) -> tuple[dict, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """The checked config (`check_config`) and module -> (A, B) of a PEFT LoRA directory; every
    module must be one ``target_modules`` names (PEFT would skip it). Safetensors only: a pickled
    ``adapter_model.bin`` is never read."""
    config = check_config(_read_json(directory / CONFIG_FILE))
    if not (directory / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(
            f"{directory} has no {WEIGHTS_FILE} (a pickled adapter_model.bin is not read)"
        )
    file = SafetensorsFile(directory / WEIGHTS_FILE)
    pairs = {}
    for module, (key_a, key_b) in _pairs(file.keys()).items():
        if not _named_by(module, config["target_modules"]) or _named_by(module, config["exclude_modules"]):
            raise ValueError(
                f"{WEIGHTS_FILE} adapts {module!r}, which target_modules does not name (PEFT skips it)"
            )
        pairs[module] = (file.read(key_a), file.read(key_b))  # r in, out r
    if not pairs:
        raise ValueError(f"{directory / WEIGHTS_FILE} holds no LoRA matrices")
    return config, pairs


# adapter_config.json, key by key. Read: what the adapters compute and where they go.
READ = ("peft_type", "r", "lora_alpha", "use_rslora", "lora_dropout", "target_modules", "exclude_modules")
# keys that change the computation, with the values we compute as PEFT does; others refused by name
MUST_BE = {
    "use_dora": (False,),  # DoRA: a learned magnitude per output row (Liu et al., 2024)
    "bias": ("none",),  # biases trained beside the adapters
    "lora_bias": (False,),  # a bias on lora_B
    "modules_to_save": (None, []),  # whole modules trained and saved beside the adapters
    "rank_pattern": ({},),  # a rank per module
    "alpha_pattern": ({},),  # an alpha per module
    "layers_to_transform": (None,),  # adapters on some layers only
    "layer_replication": (None,),  # layers repeated to deepen the model
    "target_parameters": (None, []),  # adapters on bare parameters (a mixture's experts)
    "trainable_token_indices": (None,),  # rows of the embedding trained too
    "use_qalora": (False,),  # QALoRA's pooled inputs
    "init_lora_weights": (True, False, "gaussian"),  # PiSSA, OLoRA, CorDA, LoftQ change W as well
    "alora_invocation_tokens": (None,),  # activated LoRA: adapters on after these tokens only
    "ensure_weight_tying": (False,),  # adapters tied across tied modules
    "use_bdlora": (None, False),  # block-diagonal LoRA
    "arrow_config": (None,),  # Arrow: routing among several adapters
    "kasa_config": (None,),  # KaSA: an SVD-based variant
    "monteclora_config": (None,),  # MonteCLoRA: sampled adapters
    "velora_config": (None,),  # VeLoRA's compressed activations
}
# keys that leave what the adapted model computes as it is
IGNORED = {
    "auto_mapping": "the class PEFT wraps the model in",
    "base_model_name_or_path": "a note of the base model (the caller passes the model)",
    "revision": "the base model's revision, a note",
    "task_type": "the PEFT wrapper class; the keys say where the adapters go",
    "inference_mode": "whether PEFT marks the adapters trainable",
    "peft_version": "the writer's version",
    "fan_in_fan_out": "the base weight's layout (GPT-2's Conv1D); lora_A and lora_B are the same either way",
    "layers_pattern": "read only with layers_to_transform",
    "megatron_config": "Megatron's parallel layers (none here)",
    "megatron_core": "Megatron's module, as above",
    "loftq_config": "initialization only (init_lora_weights chooses it)",
    "eva_config": "initialization only",
    "corda_config": "initialization only",
    "lora_ga_config": "initialization only",
    "qalora_group_size": "read only with use_qalora",
    "runtime_config": "PEFT's runtime options (ephemeral GPU offload)",
}


def check_config(config: dict) -> dict:
    """``adapter_config.json`` read strictly: the keys of `READ` checked and returned, each of
    `MUST_BE` at a value we compute, each of `IGNORED` left; an unknown key passes only empty
    (None, false, {}, []: PEFT's new options start off), or is refused by name.

    >>> check_config({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_dora": True})
    Traceback (most recent call last):
    ...
    ValueError: adapter_config.json: use_dora=True is not supported (supported: False)
    >>> check_config({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": True})["use_rslora"]
    True
    """
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{CONFIG_FILE}: peft_type={config.get('peft_type')!r}; only LoRA adapters are read")
    r, alpha = config.get("r"), config.get("lora_alpha")
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"{CONFIG_FILE}: r={r!r} must be a positive integer")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ValueError(f"{CONFIG_FILE}: lora_alpha={alpha!r} must be a number")
    for key, value in config.items():
        if key in MUST_BE and value not in MUST_BE[key]:
            allowed = ", ".join(repr(v) for v in MUST_BE[key])
            raise ValueError(f"{CONFIG_FILE}: {key}={value!r} is not supported (supported: {allowed})")
        if (
            key not in READ
            and key not in MUST_BE
            and key not in IGNORED
            and value not in (None, False, {}, [], "")
        ):
            raise ValueError(
                f"{CONFIG_FILE}: unknown option {key}={value!r}; refusing to guess what it changes"
            )
    return {
        "r": r,
        "lora_alpha": alpha,
        "use_rslora": bool(config.get("use_rslora", False)),
        "lora_dropout": float(config.get("lora_dropout") or 0.0),
        "target_modules": config.get("target_modules"),
        "exclude_modules": config.get("exclude_modules"),
    }


def _named_by(module: str, targets: str | list[str] | None) -> bool:
    """Whether PEFT's ``target_modules`` (or ``exclude_modules``) picks ``module``: a string is a
    regular expression over the whole name, a list holds names matched at the end after a dot."""
    if not targets:
        return False
    if isinstance(targets, str):
        return re.fullmatch(targets, module) is not None
    return any(module == t or module.endswith("." + t) for t in targets)


def _pairs(keys: list[str]) -> dict[str, tuple[str, str]]:
    """HF module -> (its lora_A key, its lora_B key); ValueError naming a key of another kind."""
    found: dict[str, dict[str, str]] = {}
    for key in keys:
        match = re.fullmatch(re.escape(PEFT_PREFIX) + r"(.+)\.lora_([AB])\.weight", key)
        if match is None:
            raise ValueError(
                f"{WEIGHTS_FILE} holds {key!r}, which is not a LoRA matrix "
                f"(base_model.model.<module>.lora_A.weight / .lora_B.weight); refusing to guess what it does"
            )
        found.setdefault(match[1], {})[match[2]] = key
    for module, pair in found.items():
        if set(pair) != {"A", "B"}:
            raise ValueError(
                f"{WEIGHTS_FILE} holds lora_{''.join(pair)} of {module!r} without its other matrix"
            )
    return {module: (pair["A"], pair["B"]) for module, pair in found.items()}


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"no {path.name} in {path.parent}: not a PEFT adapter directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds a JSON {type(value).__name__}, not an object")
    return value
