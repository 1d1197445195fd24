"""LoRA adapters (`glassformer.lora`) against Hugging Face PEFT, and their invariants.

The reference: a tiny random HF Llama and GPT-2, converted with ``gf.from_hf``; our adapters
saved with ``gf.save_adapter`` and loaded by ``peft.PeftModel.from_pretrained`` onto the HF model
give our logits, and PEFT's own ``save_pretrained`` loaded with ``gf.load_adapter`` gives PEFT's.
B is made random first: at its initial zero every adapter adds nothing and the test could not fail.
"""

from __future__ import annotations

import json
import warnings

import pytest
import safetensors.torch
import torch

import glassformer as gf
from glassformer import fast, fast_decode
from glassformer.lora import LoRALinear
from glassformer.nn.hooks import hook_name
from glassformer.train.optim import make_optimizer
from tests.conftest import tiny_model

transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")
warnings.filterwarnings("ignore")

VOCAB = 96
IDS = torch.tensor([[5, 17, 3, 42, 8, 61, 9, 30, 2, 77, 14]])


def _llama():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # q has 32 rows of qkv_proj, k and v 16 each
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _gpt2():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def _randomize_b(module: torch.nn.Module, marker: str) -> None:
    """B (and nothing else) random: ours ``.B``, PEFT's ``lora_B``."""
    torch.manual_seed(7)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if name.endswith(marker):
                param.normal_(0.0, 0.2)


def _hf_logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.mark.parametrize(
    "build, targets",
    [
        (_llama, ("q", "v")),
        (_llama, ("qkv", "o_proj", "gate", "up", "down")),  # qkv: three HF modules sharing A
        (_gpt2, ("c_attn", "c_proj", "c_fc")),  # HF names: c_proj is attention's o and the FFN's down
        (_gpt2, ("o",)),  # c_proj of attention only: written by its full name
    ],
)
def test_our_adapter_loads_into_peft_with_our_logits(tmp_path, build, targets):
    hf = build()
    lm = gf.from_hf(hf)
    gf.lora(lm, rank=4, alpha=8, targets=targets)
    _randomize_b(lm.net, ".B")
    folder = gf.save_adapter(lm, tmp_path / "adapter", base_model_name_or_path="tiny")
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8
    theirs = peft.PeftModel.from_pretrained(hf, folder).eval()
    diff = (_hf_logits(theirs) - lm.logits(IDS)).abs().max().item()
    assert diff < 1e-5
    with theirs.disable_adapter():  # the adapters matter: without them the logits differ
        assert (_hf_logits(theirs) - lm.logits(IDS)).abs().max().item() > 1e-3
    theirs.save_pretrained(tmp_path / "again")  # PEFT writes back what we wrote, key for key
    again = json.loads((tmp_path / "again" / "adapter_config.json").read_text())
    assert {**again, "target_modules": sorted(again["target_modules"])} == config
    ours, back = (
        safetensors.torch.load_file(f / "adapter_model.safetensors") for f in (folder, tmp_path / "again")
    )
    assert ours.keys() == back.keys() and all(torch.equal(ours[k], back[k]) for k in ours)


@pytest.mark.parametrize(
    "build, options",
    [
        (_llama, dict(target_modules=["q_proj", "v_proj", "down_proj"])),
        (_llama, dict(target_modules=["k_proj", "o_proj"], use_rslora=True)),  # alpha / sqrt(r)
        (_gpt2, dict(target_modules=["c_attn"], fan_in_fan_out=True)),  # all of our qkv_proj
    ],
)
def test_peft_s_adapter_loads_into_ours_with_peft_s_logits(tmp_path, build, options):
    hf = build()
    lm = gf.from_hf(hf)  # before PEFT changes hf's modules in place
    theirs = peft.get_peft_model(hf, peft.LoraConfig(r=4, lora_alpha=16, task_type="CAUSAL_LM", **options))
    _randomize_b(theirs, "lora_B.default.weight")
    theirs.save_pretrained(tmp_path / "adapter")
    gf.load_adapter(lm, tmp_path / "adapter")
    diff = (_hf_logits(theirs.eval()) - lm.logits(IDS)).abs().max().item()
    assert diff < 1e-5


def test_gpt2_s_fused_c_attn_refuses_q_alone(tmp_path):
    lm = gf.from_hf(_gpt2())
    gf.lora(lm, rank=2, targets=("q",))
    with pytest.raises(ValueError, match=r"c_attn.*PEFT adapts whole.*target 'qkv'"):
        gf.save_adapter(lm, tmp_path / "adapter")
    assert not (tmp_path / "adapter").exists()


def test_the_adapted_model_starts_as_the_base_and_merges_into_it():
    net = tiny_model(positions="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2)
    lm = gf.LanguageModel(net)
    base = lm.logits(IDS % 61)
    gf.lora(lm, rank=4, alpha=8, targets=("q", "k", "v", "o", "gate", "up", "down"))
    assert torch.equal(lm.logits(IDS % 61), base)  # B = 0
    _randomize_b(net, ".B")
    adapted = lm.logits(IDS % 61)
    assert (adapted - base).abs().max() > 1e-3
    gf.merge_lora(lm)
    assert not any(isinstance(m, LoRALinear) for m in net.modules())
    assert not any(name.endswith(".lora") for name in lm.activation_names())
    assert not any("adapters" in name for name in net.state_dict())
    torch.testing.assert_close(lm.logits(IDS % 61), adapted, atol=1e-5, rtol=0)


def test_the_trace_holds_the_adapter_s_term():
    """``blocks.{i}.attn.q.lora`` is (alpha / r) (x A^T) B^T of the attention's input x."""
    lm = gf.LanguageModel(tiny_model())
    gf.lora(lm, rank=4, alpha=12, targets=("q", "down"))
    _randomize_b(lm.net, ".B")
    name, down = hook_name("attn.q.lora", 1), hook_name("ffn.down.lora", 0)
    assert name in lm.activation_names() and down in lm.activation_names()
    trace = lm.trace(IDS % 61, names=[name, hook_name("attn.in", 1)])
    adapter = lm.net.stack.blocks[1].attn.qkv_proj.adapters["q"]
    x = trace[hook_name("attn.in", 1)]  # b t d
    expected = 12 / 4 * (x @ adapter.A.T) @ adapter.B.T  # b t (h e)
    torch.testing.assert_close(trace[name], expected)
    with lm.net.hooks({name: lambda term, _: torch.zeros_like(term)}):  # the term, ablated
        ablated = lm.logits(IDS % 61)
    assert not torch.allclose(ablated, lm.logits(IDS % 61))


def test_only_the_adapters_train():
    net = tiny_model()
    gf.lora(net, rank=2, targets=("q_proj", "v_proj", "up"))
    before = {name: p.detach().clone() for name, p in net.named_parameters()}
    optimizer = make_optimizer(net, lr=1e-2)
    net.train()
    for _ in range(3):
        logits = net(IDS % 61)  # b t v
        loss = torch.nn.functional.cross_entropy(logits[0, :-1], (IDS % 61)[0, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    changed = {name for name, p in net.named_parameters() if not torch.equal(p, before[name])}
    trainable = {name for name, p in net.named_parameters() if p.requires_grad}
    assert changed == trainable and changed  # A moves once B has (B from zero, A by its gradient)
    assert all(".adapters." in name for name in trainable)


def test_fast_decode_steps_aside_for_adapters():
    net = fast.enable(tiny_model())
    gf.lora(net, rank=2, targets=("qkv", "o"))
    _randomize_b(net, ".B")
    assert "LoRA" in fast_decode.unsupported(net)
    lm = gf.LanguageModel(net)
    fast_tokens = lm.generate([3, 4, 5], max_new_tokens=6, temperature=0)
    fast.disable(net)
    assert lm.generate([3, 4, 5], max_new_tokens=6, temperature=0) == fast_tokens


def test_unknown_targets_name_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown LoRA target 'query'; valid targets: .*c_attn.*q_proj"):
        gf.lora(tiny_model(), targets=("query",))
    with pytest.raises(ValueError, match="'gate' .* not gated"):
        gf.lora(tiny_model(), targets=("gate",))
    net = tiny_model()
    with pytest.raises(ValueError, match="'qkv' already holds"):
        gf.lora(net, targets=("qkv", "v"))
    assert all(p.requires_grad for p in net.parameters())  # refused before anything changed


@pytest.mark.parametrize(
    "key, value",
    [
        ("use_dora", True),
        ("bias", "all"),
        ("rank_pattern", {"q_proj": 8}),
        ("alpha_pattern", {"q_proj": 32}),
        ("modules_to_save", ["lm_head"]),
        ("init_lora_weights", "pissa"),
        ("a_future_option", 3),
    ],
)
def test_a_config_option_that_changes_the_computation_is_refused_by_name(tmp_path, key, value):
    lm = gf.from_hf(_llama())
    gf.lora(lm, rank=2, targets=("q",))
    folder = gf.save_adapter(lm, tmp_path / "adapter")
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, key: value}))
    fresh = gf.from_hf(_llama())
    with pytest.raises(ValueError, match=key):
        gf.load_adapter(fresh, folder)
    assert not any(isinstance(m, LoRALinear) for m in fresh.net.modules())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "a_future_option": None}))
    gf.load_adapter(fresh, folder)  # an unknown option left off passes


def test_save_refuses_a_folder_with_files_and_reads_no_pickle(tmp_path):
    lm = gf.from_hf(_llama())
    gf.lora(lm, rank=2)
    folder = gf.save_adapter(lm, tmp_path / "adapter")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        gf.save_adapter(lm, folder)
    gf.save_adapter(lm, folder, overwrite=True)
    (folder / "adapter_model.safetensors").rename(folder / "adapter_model.bin")
    with pytest.raises(FileNotFoundError, match="pickled adapter_model.bin is not read"):
        gf.load_adapter(gf.from_hf(_llama()), folder)
