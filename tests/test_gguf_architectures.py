"""Every GGUF decoder of the Llama lineage (and GPT-NeoX) we read, at parity with our Hugging Face
import of the same weights (GPT-2, Phi-2, BERT and T5: ``tests/test_gguf_gpt2_phi2_bert_t5.py``).

Each tiny random Hugging Face model (most are the builders of the HF parity tests) is written
to GGUF the way llama.cpp's converter (``convert_hf_to_gguf.py``, its ``conversion/*.py``)
writes it: the metadata through the `gguf.GGUFWriter` methods the converter calls, so the
keys are the `gguf` package's own; each tensor renamed by the package's own `TensorNameMap`;
and the converter's changes: Llama's Q and K rows (and biases) permuted, Gemma's norms stored
as 1 + w, a mixture's experts stacked (n, f, d), GPT-NeoX's fused rows reordered to
[Q; K; V]. Tensors are F32, so nothing is lost: `load_gguf` must give back the model
``gf.from_hf`` reads from the same weights, the same config, logits within 1e-5 (in fact
equal), and the same greedy tokens.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

import glassformer as gf
from glassformer.formats.gguf import load_gguf
from glassformer.formats.gguf_architectures import SUPPORTED_ARCHITECTURES, config_from_gguf
from glassformer.generate import GenerationSettings, generate_ids
from glassformer.tokenizers.byte_unicode import bytes_to_unicode
from glassformer.tokenizers.gguf_header import GGUFHeader, read_gguf_header
from tests.test_gguf import finish
from tests.test_hf_parity import VOCAB, _gemma, _llama, _mistral, _neox, _phi3, _qwen2, _qwen3
from tests.test_hf_parity_gemma2_olmo2 import _loud, _olmo2
from tests.test_moe import SMALL as MOE_SMALL
from tests.test_moe import _mixtral, _qwen2_moe

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

Q = gguf.GGMLQuantizationType
TOKENS = [bytes_to_unicode(bytes([b])) for b in range(32, 32 + VOCAB)]  # printable ASCII, VOCAB tokens
GEMMA = ("gemma", "gemma2", "gemma3")
EXPERT = re.compile(r"model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(\w+)\.weight")
FUSED_EXPERTS = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)")
WINDOW, ATTN_CAP, LOGIT_CAP = 4, 5.0, 3.0


# -- the Hugging Face models -------------------------------------------------------------------


def _llama_biased():
    """A Llama with ``attention_bias``: its Q and K biases are permuted like the rows."""
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
    )
    return transformers.LlamaForCausalLM(config)


def _gemma2():
    """Gemma 2 as llama.cpp runs it: a window on layers 0 and 2, soft-caps the weights reach,
    and the score scale 1/sqrt(head_dim) (query_pre_attn_scalar is not stored in GGUF)."""
    config = transformers.Gemma2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=WINDOW,
        attn_logit_softcapping=ATTN_CAP,
        final_logit_softcapping=LOGIT_CAP,
    )
    return _loud(transformers.Gemma2ForCausalLM(config), 0.0)


def _gemma3():
    """Gemma 3 (text): windowed layers 0-4 with their own RoPE base, layer 5 global with linear
    scaling, q/k-norm, soft-capped logits, an untied head."""
    config = transformers.Gemma3TextConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        query_pre_attn_scalar=8,
        sliding_window=WINDOW,
        final_logit_softcapping=LOGIT_CAP,
        rope_theta=1000.0,
        rope_local_base_freq=30.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0},
        tie_word_embeddings=False,
    )
    return _loud(transformers.Gemma3ForCausalLM(config), 0.0)


def _spread_router(model):
    """A router at init scores every expert alike: spread it out (as tests/test_moe.py does)."""
    with torch.no_grad():
        for key, param in model.named_parameters():
            if key.endswith("gate.weight") and param.dim() == 2:
                param.normal_(0.0, 0.5)
    return model


# name: (builder, GGUF architecture, extra metadata the converter does not write)
MODELS = {
    "llama": (_llama, "llama", {}),
    "llama-biased": (_llama_biased, "llama", {}),
    "mistral": (_mistral, "llama", {"sliding_window": WINDOW}),
    "qwen2": (_qwen2, "qwen2", {}),
    "qwen3": (_qwen3, "qwen3", {}),
    "mixtral": (lambda: _spread_router(_mixtral()), "llama", {}),
    "qwen2moe": (lambda: _spread_router(_qwen2_moe()), "qwen2moe", {}),
    "gemma": (_gemma, "gemma", {}),
    "gemma2": (_gemma2, "gemma2", {}),
    "gemma3": (_gemma3, "gemma3", {}),
    "olmo2": (lambda: _loud(_olmo2(), 1.0), "olmo2", {}),
    "phi3": (_phi3, "phi3", {}),
    "gptneox": (_neox, "gptneox", {}),
}


# -- written as llama.cpp's converter writes it ------------------------------------------------


def llama_cpp_permute(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """LlamaModel.permute: per head, rotate-half rows -> pairs (2i, 2i+1); weights and biases."""
    rows, rest = weight.shape[0], weight.shape[1:]
    return weight.reshape(heads, 2, rows // heads // 2, *rest).swapaxes(1, 2).reshape(weight.shape)


def converted(model, arch: str):
    """(Hugging Face name, tensor) as the converter's ``modify_tensors`` hands them on to the
    TensorNameMap: permuted, shifted, reordered, experts stacked."""
    config, experts = model.config, {}
    h = config.num_attention_heads
    g = getattr(config, "num_key_value_heads", None) or h
    tied = config.tie_word_embeddings or arch in ("gemma", "gemma2")  # Gemma's converter skips lm_head
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().float().clone()
        if name == "lm_head.weight" and tied:
            continue
        if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
            tensor = llama_cpp_permute(tensor, h)
        if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
            tensor = llama_cpp_permute(tensor, g)
        if arch in GEMMA and name.endswith("norm.weight"):  # x / rms(x) * (1 + w), stored as 1 + w
            tensor = tensor + 1
        if arch == "gptneox" and ".query_key_value." in name:  # rows by head (h, 3, e) -> (3, h, e)
            tensor = tensor.reshape(h, 3, -1, *tensor.shape[1:]).transpose(0, 1).reshape(tensor.shape)
        fused = FUSED_EXPERTS.fullmatch(name)  # transformers 5 keeps each layer's experts stacked
        if fused:
            layer, matrix = fused.groups()
            stem = f"model.layers.{layer}.mlp.experts"
            if matrix == "down_proj":
                yield f"{stem}.down_proj.weight", tensor
            else:  # [W_gate; W_up] per expert (n, 2f, d)
                gate, up = tensor.chunk(2, dim=1)
                yield f"{stem}.gate_proj.weight", gate.contiguous()
                yield f"{stem}.up_proj.weight", up.contiguous()
            continue
        expert = EXPERT.fullmatch(name)
        if expert:
            layer, j, matrix = expert.groups()
            experts.setdefault((int(layer), matrix), {})[int(j)] = tensor
            continue
        yield name, tensor
    for (layer, matrix), by_expert in experts.items():  # one (n, f, d) tensor per matrix and layer
        stacked = torch.stack([by_expert[j] for j in sorted(by_expert)])
        if arch == "llama":  # Mixtral's w1 / w3 / w2
            yield f"layers.{layer}.feed_forward.experts.{matrix}.weight", stacked
        else:
            yield f"model.layers.{layer}.mlp.experts.{matrix}.weight", stacked


def rope_settings(hparams: dict) -> tuple[float, dict, float | None, float]:
    """(rope_theta, rope_scaling, rope_local_base_freq, partial_rotary_factor) as config.json holds
    them for the converter: transformers 5 moved them into rope_parameters (one set per layer
    kind for Gemma 3)."""
    params = hparams.get("rope_parameters") or {}
    full, local = (
        (params["full_attention"], params["sliding_attention"])
        if "full_attention" in params
        else (params, {})
    )
    theta = hparams.get("rope_theta") or full.get("rope_theta", 10000.0)
    scaling = hparams.get("rope_scaling") or (full if full.get("rope_type", "default") != "default" else {})
    local_base = hparams.get("rope_local_base_freq") or local.get("rope_theta")
    return theta, scaling, local_base, hparams.get("rotary_pct") or full.get("partial_rotary_factor", 1.0)


def write_metadata(writer: gguf.GGUFWriter, arch: str, config, extra: dict) -> None:
    """What each converter class's ``set_gguf_parameters`` writes (from config.json's keys)."""
    c, hparams = config, config.to_dict()
    theta, scaling, local_base, rotary_fraction = rope_settings(hparams)
    if arch == "gptneox":  # GPTNeoXModel
        writer.add_context_length(c.max_position_embeddings)
        writer.add_embedding_length(c.hidden_size)
        writer.add_block_count(c.num_hidden_layers)
        writer.add_feed_forward_length(c.intermediate_size)
        writer.add_rope_dimension_count(int(rotary_fraction * (c.hidden_size // c.num_attention_heads)))
        writer.add_head_count(c.num_attention_heads)
        writer.add_parallel_residual(c.use_parallel_residual)
        writer.add_layer_norm_eps(c.layer_norm_eps)
        return
    writer.add_block_count(c.num_hidden_layers)
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    head_dim = hparams.get("head_dim")
    if head_dim:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    if arch in ("gemma", "gemma2"):  # GemmaModel / Gemma2Model write their own few keys, no RoPE base
        if arch == "gemma2":
            writer.add_attn_logit_softcapping(c.attn_logit_softcapping)
            writer.add_final_logit_softcapping(c.final_logit_softcapping)
            writer.add_sliding_window(c.sliding_window)
        return
    writer.add_rope_freq_base(theta)  # TextModel.set_gguf_parameters
    if scaling.get("rope_type") == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(scaling["factor"])
    if local_base:
        writer.add_rope_freq_base_swa(local_base)
    n_experts = hparams.get("num_local_experts") or hparams.get("num_experts")
    if n_experts:
        writer.add_expert_count(n_experts)
        writer.add_expert_used_count(c.num_experts_per_tok)
    if arch == "llama":  # LlamaModel
        writer.add_vocab_size(c.vocab_size)
        writer.add_rope_dimension_count(head_dim or c.hidden_size // c.num_attention_heads)
    if arch == "qwen2moe":  # Qwen2MoeModel
        writer.add_expert_feed_forward_length(c.moe_intermediate_size)
        writer.add_expert_shared_feed_forward_length(c.shared_expert_intermediate_size)
    if arch == "gemma3":  # Gemma3Model
        if c.final_logit_softcapping:
            writer.add_final_logit_softcapping(c.final_logit_softcapping)
        writer.add_sliding_window(c.sliding_window)
    if arch == "phi3":  # Phi3MiniModel
        writer.add_rope_scaling_orig_ctx_len(c.original_max_position_embeddings)
        writer.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
        writer.add_sliding_window(hparams.get("sliding_window") or 0)
    if "sliding_window" in extra:  # no converter writes it for a Llama (Mistral): read where present
        writer.add_sliding_window(extra["sliding_window"])


def write_gguf(model, path: Path, arch: str, extra=None, storage: Q = Q.F32, squeeze=()) -> Path:
    """``model`` as llama.cpp's converter writes it, matrices stored as ``storage``; the tensors
    named in ``squeeze`` lose their leading 1 (as older converters stored them)."""
    config = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    write_metadata(writer, arch, config, extra or {})
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(TOKENS)
    writer.add_token_types([1] * len(TOKENS))
    for kind in ("bos", "eos", "pad"):
        token_id = getattr(config, f"{kind}_token_id", None)
        if isinstance(token_id, int) and token_id < len(TOKENS):  # OLMo 2's config names ids past VOCAB
            getattr(writer, f"add_{kind}_token_id")(token_id)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], config.num_hidden_layers)
    for name, tensor in converted(model, arch):
        theirs = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert theirs is not None, f"the gguf package maps no name to {name}"
        array = tensor.numpy()
        if theirs in squeeze:
            array = array.reshape(array.shape[1:])
        kept = theirs.endswith(("_norm.weight", "ffn_gate_inp.weight"))  # the converter keeps them F32
        if array.ndim > 1 and not kept and storage != Q.F32:
            writer.add_tensor(theirs, gguf.quants.quantize(array, storage), raw_dtype=storage)
        else:
            writer.add_tensor(theirs, array)
    finish(writer)
    return path


# -- parity ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """name -> (Hugging Face model, our model read from its GGUF, ours from gf.from_hf)."""
    folder, out = tmp_path_factory.mktemp("architectures"), {}
    for name, (builder, arch, extra) in MODELS.items():
        torch.manual_seed(0)
        hf = builder().eval()
        with torch.no_grad():  # biases and norm gains away from their start, so that they count
            for key, param in hf.named_parameters():
                if key.endswith("bias"):
                    param.normal_(0.0, 0.3)
                elif key.endswith("norm.weight") and arch not in GEMMA + ("olmo2",):
                    param.normal_(1.0, 0.3)
        hf.config._attn_implementation = "eager"  # HF's reference path for windows and soft-caps
        net, _, _ = load_gguf(write_gguf(hf, folder / f"{name}.gguf", arch, extra))
        out[name] = (hf, net, gf.from_hf(hf).net)
    return out


def test_every_architecture_is_tested():
    from tests.test_gguf_gpt2_phi2_bert_t5 import MODELS as MORE

    tested = {arch for _, arch, _ in MODELS.values()} | {arch for _, arch in MORE.values()}
    assert tested == set(SUPPORTED_ARCHITECTURES)


@pytest.mark.parametrize("name", list(MODELS))
def test_config_is_the_one_read_from_hugging_face(pairs, name):
    _, ours, reference = pairs[name]
    mine, theirs = ours.config.to_dict(), reference.config.to_dict()
    differ = {key: (value, theirs[key]) for key, value in mine.items() if value != theirs[key]}
    assert not differ, differ


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_equal_our_hugging_face_import(pairs, name):
    hf, ours, reference = pairs[name]
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB - 1, (2, 13))  # longer than the windows
    with torch.no_grad():
        logits = ours(ids)
        diff = (logits - reference(ids)).abs().max().item()
        to_hf = (logits - hf(input_ids=ids).logits).abs().max().item()
    print(f"{name}: max abs logit difference {diff:.2e} to gf.from_hf, {to_hf:.2e} to transformers")
    assert diff <= 1e-5
    assert to_hf <= 1e-4
    assert logits.std() > 0.05  # the weights are not all (nearly) zero: the comparison means something


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_tokens_equal_our_hugging_face_import(pairs, name):
    _, ours, reference = pairs[name]
    torch.manual_seed(2)
    ids = torch.randint(3, VOCAB - 1, (1, 9))
    settings = GenerationSettings(max_new_tokens=24, greedy=True, stop_token_ids=())
    assert generate_ids(ours, ids, settings) == generate_ids(reference, ids, settings)


@pytest.mark.parametrize("name", ["qwen2moe", "gemma3", "gptneox"])
def test_gf_load_reads_the_file_too(pairs, name, tmp_path):
    """`gf.load("x.gguf")`: the same model, with its tokenizer, ready to generate."""
    hf, ours, _ = pairs[name]
    lm = gf.load(write_gguf(hf, tmp_path / f"{name}.gguf", MODELS[name][1], MODELS[name][2]))
    ids = torch.tensor([lm.tokenizer.encode("the cat")])
    with torch.no_grad():
        assert (lm.net(ids) - ours(ids)).abs().max().item() <= 1e-5
    assert len(lm.generate("the cat", max_new_tokens=4, temperature=0)) == 4


# -- stacked experts, quantized ----------------------------------------------------------------


def test_each_expert_is_its_slice_of_the_stacked_quantized_tensor(tmp_path):
    """Q8_0 experts (n, f, d): each of our experts is the gguf package's dequantization of its
    slice, read without the others; the model is Mixtral's up to the quantization."""
    torch.manual_seed(0)
    config = transformers.MixtralConfig(**MOE_SMALL, intermediate_size=64, num_local_experts=4)
    hf = _spread_router(transformers.MixtralForCausalLM(config)).eval()
    path = write_gguf(hf, tmp_path / "mixtral-q8.gguf", "llama", storage=Q.Q8_0)
    net, _, _ = load_gguf(path)
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    for matrix, ours in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
        tensor = stored[f"blk.1.ffn_{matrix}_exps.weight"]
        assert tensor.tensor_type == Q.Q8_0
        values = torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy())
        for j, expert in enumerate(net.stack.blocks[1].ffn.experts):
            assert torch.equal(getattr(expert, ours).weight, values[j]), (matrix, j)
    ids = torch.randint(3, VOCAB - 1, (1, 11))
    with torch.no_grad():
        diff = (net(ids) - gf.from_hf(hf).net(ids)).abs().max().item()
    assert diff < 0.05


def test_a_shared_expert_gate_stored_as_a_vector_reads_the_same(pairs, tmp_path):
    """Older converters squeezed Qwen2-MoE's (1, d) shared-expert gate to (d,)."""
    hf, ours, _ = pairs["qwen2moe"]
    squeeze = {f"blk.{i}.ffn_gate_inp_shexp.weight" for i in range(2)}
    net, _, _ = load_gguf(write_gguf(hf, tmp_path / "squeezed.gguf", "qwen2moe", squeeze=squeeze))
    gate, expected = (model.stack.blocks[0].ffn.shared_expert_gate.weight for model in (net, ours))
    assert gate.shape == (1, 32) and torch.equal(gate, expected)


# -- what llama.cpp's runtime knows, and what is refused ---------------------------------------


def metadata_only(path: Path, arch: str, **keys) -> GGUFHeader:
    """A GGUF file holding only ``{arch}.{key}`` metadata (the writer method per key)."""
    writer = gguf.GGUFWriter(str(path), arch)
    for method, value in keys.items():
        getattr(writer, f"add_{method}")(value)
    finish(writer)
    return read_gguf_header(path)


GEMMA2_27B = dict(  # google/gemma-2-27b's sizes: head_dim 128, query_pre_attn_scalar 4608 / 32 = 144
    block_count=46,
    embedding_length=4608,
    feed_forward_length=36864,
    head_count=32,
    head_count_kv=16,
    key_length=128,
    value_length=128,
    layer_norm_rms_eps=1e-6,
)


def test_gemma2_without_its_keys_runs_as_llama_cpp_runs_it(tmp_path):
    """No soft-cap or window keys: llama.cpp's defaults (50, 30, a window of 4096 on every other
    layer); the 27B model's scale comes from d_model / heads, not its key length."""
    config = config_from_gguf(metadata_only(tmp_path / "g.gguf", "gemma2", **GEMMA2_27B), 256, set(), {})
    assert (config.attn_softcap, config.logit_softcap) == (50.0, 30.0)
    assert (config.attn_window, config.global_every) == (4096, 2)
    assert [config.layer_window(i) for i in range(3)] == [4096, None, 4096]
    assert config.attn_scale == pytest.approx(144**-0.5) and config.d_head == 128
    assert config.tie_embeddings and config.embed_scale and config.norm_placement == "sandwich"
    smaller = config_from_gguf(
        metadata_only(tmp_path / "g9.gguf", "gemma2", **{**GEMMA2_27B, "block_count": 42}), 256, set(), {}
    )
    assert smaller.attn_scale is None  # 1/sqrt(key_length)


def test_a_window_pattern_per_layer_is_read_when_it_is_periodic(tmp_path):
    sizes = {**GEMMA2_27B, "block_count": 6, "sliding_window": 512}
    periodic = [True, True, False] * 2  # layers 2 and 5 global
    reader = metadata_only(tmp_path / "p.gguf", "gemma3", **sizes, sliding_window_pattern=periodic)
    config = config_from_gguf(reader, 256, set(), {})
    assert (config.attn_window, config.global_every, config.rope_local_base) == (512, 3, 10000.0)
    irregular = [True, False, True, True, True, True]  # layer 1 global, then none
    reader = metadata_only(tmp_path / "q.gguf", "gemma3", **sizes, sliding_window_pattern=irregular)
    with pytest.raises(ValueError, match="global attention in layers \\[1\\]: .*every k-th layer only"):
        config_from_gguf(reader, 256, set(), {})


@pytest.mark.parametrize(
    "arch, keys, tensors, message",
    [
        (
            "falcon",
            {},
            set(),
            "architecture 'falcon' is not supported; supported: llama, qwen2, .*gptneox, gpt2",
        ),
        (
            "llama",
            {"rope_scaling_type": gguf.RopeScalingType.YARN, "rope_scaling_factor": 4.0},
            set(),
            "llama.rope.scaling.type='yarn' is not supported \\(only linear\\)",
        ),
        ("phi3", {}, {"rope_factors_long.weight"}, "Phi-3's LongRoPE .* is not supported"),
        ("qwen2moe", {}, set(), "qwen2moe.expert_count is missing or 0"),
    ],
)
def test_what_llama_cpp_stores_but_we_cannot_compute_is_refused(tmp_path, arch, keys, tensors, message):
    sizes = {"block_count": 2, "embedding_length": 32, "feed_forward_length": 48, "head_count": 4}
    reader = metadata_only(tmp_path / "refused.gguf", arch, **sizes, layer_norm_rms_eps=1e-6, **keys)
    with pytest.raises(ValueError, match=message):
        config_from_gguf(reader, VOCAB, tensors, {})


def test_stacked_experts_of_the_wrong_count_fail_before_allocating(pairs, tmp_path):
    """The metadata says 8 experts, the tensors stack 4: named by shape, nothing built."""
    hf, _, _ = pairs["mixtral"]
    path = write_gguf(hf, tmp_path / "lying.gguf", "llama")
    data = bytearray(path.read_bytes())
    reader = gguf.GGUFReader(path)
    field = reader.fields["llama.expert_count"]
    at = field.offset + sum(part.nbytes for part in field.parts[:-1])
    assert int(np.frombuffer(data, np.uint32, 1, at)[0]) == 4
    data[at : at + 4] = np.uint32(8).tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"blk.0.ffn_gate_inp.weight has shape \(4, 32\), .*needs \(8, 32\)"):
        load_gguf(path)
