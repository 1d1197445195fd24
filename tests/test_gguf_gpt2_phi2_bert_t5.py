"""llama.cpp's ``gpt2``, ``phi2``, ``bert`` and ``t5`` files at parity with Hugging Face.

Each tiny random Hugging Face model is written to GGUF as llama.cpp's converter writes it
(``convert_hf_to_gguf.py``: ``GPT2Model``, ``Phi2Model``, ``BertModel``, ``T5Model``): the
metadata each class's ``set_gguf_parameters`` and ``set_vocab`` write, through the
`gguf.GGUFWriter` methods it calls; the tensors it keeps, renamed by the `gguf` package's own
`TensorNameMap`, changed as it changes them (GPT-2's Conv1D weights transposed; BERT's pooler
and MLM head dropped; one of T5's three token embeddings kept). Tensors are F32, so our logits
(BERT: hidden states) must equal transformers' within 1e-4 of their largest magnitude, and our
config must be the one ``gf.from_hf`` reads from the same model.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import gguf
import pytest
import torch

import glassformer as gf
from glassformer.formats.gguf import load_gguf
from tests.test_gguf import finish
from tests.test_gguf_architectures import TOKENS
from tests.test_hf_parity import VOCAB, _gpt2, _t5
from tests.test_hf_parity import _bert as parity_bert
from tests.test_hf_parity import _phi2 as parity_phi2

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")


def _phi2():
    """Phi-2 as the converter can write it: feed_forward_length is 4 d (it writes no other)."""
    return parity_phi2(intermediate_size=128)


def _bert():
    """A sentence encoder (the converter keeps BERT for embeddings: no MLM head, no pooler)."""
    return transformers.BertModel(parity_bert().config, add_pooling_layer=False)


MODELS = {  # name: (builder, GGUF architecture)
    "gpt2": (_gpt2, "gpt2"),
    "phi2": (_phi2, "phi2"),
    "bert": (_bert, "bert"),
    "t5": (_t5, "t5"),  # ReLU, tied head (d^-0.5), a decoder deeper than the encoder
    "t5-gated": (lambda: _t5(True), "t5"),  # gated GELU, untied head
}
SEQ2SEQ = ("t5", "t5-gated")
T5_EMBEDDINGS = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")


def converted(model, arch: str, head_copy: bool = False):
    """(Hugging Face name, tensor) as each converter's ``modify_tensors`` hands them on."""
    config, shared = model.config, False
    # transformers 5 ties every T5 head and keeps "tie_word_embeddings": false of config.json as
    # scale_decoder_outputs=False: such a checkpoint (T5 v1.1, Flan-T5) stores its lm_head
    tied = arch == "gpt2" or (arch == "t5" and getattr(config, "scale_decoder_outputs", True))
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().float().clone()
        if name == "lm_head.weight" and tied:  # a tied head is not in the checkpoint's safetensors
            continue
        if arch == "gpt2":
            if name.endswith((".attn.bias", ".attn.masked_bias")):
                continue
            if name.endswith((".c_attn.weight", ".c_proj.weight", ".c_fc.weight")):
                tensor = tensor.t().contiguous()  # Conv1D (in, out) -> (out, in)
            if head_copy and name.endswith("wte.weight"):  # older converters: output = a copy of wte
                yield "lm_head.weight", tensor
        if arch == "bert" and name.startswith(("pooler.", "cls.", "embeddings.position_ids")):
            continue
        if arch == "t5" and name in (
            "shared.weight",
            "encoder.embed_tokens.weight",
            "decoder.embed_tokens.weight",
        ):
            if shared:  # the first of the three is the token embedding; the others are skipped
                continue
            name, shared = "shared.weight", True
        yield name, tensor


def write_metadata(writer: gguf.GGUFWriter, arch: str, c) -> None:
    """What each converter class's ``set_gguf_parameters`` writes."""
    if arch == "gpt2":  # GPT2Model
        writer.add_block_count(c.n_layer)
        writer.add_context_length(c.n_positions)
        writer.add_embedding_length(c.n_embd)
        writer.add_feed_forward_length(4 * c.n_embd)
        writer.add_head_count(c.n_head)
        writer.add_layer_norm_eps(c.layer_norm_epsilon)
    elif arch == "phi2":  # Phi2Model
        writer.add_context_length(c.max_position_embeddings)
        writer.add_embedding_length(c.hidden_size)
        writer.add_feed_forward_length(4 * c.hidden_size)
        writer.add_block_count(c.num_hidden_layers)
        writer.add_head_count(c.num_attention_heads)
        writer.add_head_count_kv(c.num_attention_heads)
        writer.add_layer_norm_eps(c.layer_norm_eps)
        hparams = c.to_dict()  # config.json's partial_rotary_factor (transformers 5: in rope_parameters)
        fraction = hparams.get("partial_rotary_factor") or hparams["rope_parameters"]["partial_rotary_factor"]
        writer.add_rope_dimension_count(int(fraction * c.hidden_size) // c.num_attention_heads)
        writer.add_add_bos_token(False)
    elif arch == "bert":  # TextModel.set_gguf_parameters, then BertModel's
        writer.add_block_count(c.num_hidden_layers)
        writer.add_context_length(c.max_position_embeddings)
        writer.add_embedding_length(c.hidden_size)
        writer.add_feed_forward_length(c.intermediate_size)
        writer.add_head_count(c.num_attention_heads)
        writer.add_layer_norm_eps(c.layer_norm_eps)
        writer.add_causal_attention(False)
        writer.add_pooling_type(gguf.PoolingType.MEAN)  # from sentence-transformers' 1_Pooling
    else:  # T5Model
        writer.add_context_length(c.n_positions if hasattr(c, "n_positions") else 512)
        writer.add_embedding_length(c.d_model)
        writer.add_feed_forward_length(c.d_ff)
        writer.add_block_count(c.num_layers)
        writer.add_decoder_block_count(c.num_decoder_layers)
        writer.add_head_count(c.num_heads)
        writer.add_key_length(c.d_kv)
        writer.add_value_length(c.d_kv)
        writer.add_layer_norm_eps(c.layer_norm_epsilon)
        writer.add_relative_attn_buckets_count(c.relative_attention_num_buckets)
        writer.add_layer_norm_rms_eps(c.layer_norm_epsilon)
        writer.add_decoder_start_token_id(c.decoder_start_token_id)


def write_vocab(writer: gguf.GGUFWriter, arch: str, config) -> None:
    """Each converter's ``set_vocab``: byte-level BPE for GPT-2 and Phi-2, BERT's WordPiece
    (``bert``: "phantom space" tokens ▁word), T5's SentencePiece Unigram (``t5``, with scores)."""
    if arch == "bert":
        writer.add_token_type_count(config.type_vocab_size)
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(["[PAD]", "[UNK]", "[CLS]"] + ["\u2581" + t for t in TOKENS[3:]])
        writer.add_token_types([3, 2, 3] + [1] * (len(TOKENS) - 3))
    elif arch == "t5":
        writer.add_tokenizer_model("t5")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(["<pad>", "</s>", "<unk>"] + ["\u2581" + t for t in TOKENS[3:]])
        writer.add_token_scores([0.0] * 3 + [-float(i) for i in range(len(TOKENS) - 3)])
        writer.add_token_types([3, 3, 2] + [1] * (len(TOKENS) - 3))
        writer.add_add_space_prefix(True)
        writer.add_add_bos_token(False)
        writer.add_add_eos_token(True)
    else:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_list(TOKENS)
        writer.add_token_types([1] * len(TOKENS))
    for kind in ("bos", "eos", "pad"):  # gguf.SpecialVocab: the ids the config names
        token_id = getattr(config, f"{kind}_token_id", None)
        if isinstance(token_id, int) and token_id < len(TOKENS):
            getattr(writer, f"add_{kind}_token_id")(token_id)


def write_gguf(model, path: Path, arch: str, head_copy: bool = False) -> Path:
    writer = gguf.GGUFWriter(str(path), arch)
    write_metadata(writer, arch, model.config)
    write_vocab(writer, arch, model.config)
    layers = max(getattr(model.config, "num_decoder_layers", None) or 0, model.config.num_hidden_layers)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], layers)
    for name, tensor in converted(model, arch, head_copy):
        theirs = names.get_name(name, try_suffixes=(".weight", ".bias"))
        assert theirs is not None, f"the gguf package maps no name to {name}"
        writer.add_tensor(theirs, tensor.numpy())
    finish(writer)
    return path


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """name -> (Hugging Face model, our model read from its GGUF, ours from gf.from_hf)."""
    folder, out = tmp_path_factory.mktemp("gguf-more"), {}
    for name, (builder, arch) in MODELS.items():
        torch.manual_seed(0)
        hf = builder().eval()
        with torch.no_grad():  # biases and norm gains away from their start, so that they count
            for key, param in hf.named_parameters():
                if key.endswith("bias") and param.dim() == 1 and "relative_attention" not in key:
                    param.normal_(0.0, 0.3)
                elif key.endswith(("norm.weight", "LayerNorm.weight", "ln_1.weight", "ln_2.weight")):
                    param.normal_(1.0, 0.3)
        net, tokenizer, _ = load_gguf(write_gguf(hf, folder / f"{name}.gguf", arch))
        assert (tokenizer is None) == (arch == "bert")  # BERT's respelled WordPiece is not read yet
        out[name] = (hf, net, gf.from_hf(hf).net)
    return out


def outputs(hf, ours, name: str, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(transformers', ours): logits, or BERT's last hidden states."""
    with torch.no_grad():
        if name in SEQ2SEQ:
            decoder_ids = torch.randint(3, VOCAB - 1, (ids.shape[0], 6))
            theirs = hf(input_ids=ids, decoder_input_ids=decoder_ids).logits
            return theirs, ours(ids, decoder_ids)
        if name == "bert":
            return hf(input_ids=ids).last_hidden_state, ours.encode(ids)
        return hf(input_ids=ids).logits, ours(ids)


@pytest.mark.parametrize("name", list(MODELS))
def test_logits_equal_transformers(pairs, name):
    hf, ours, _ = pairs[name]
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB - 1, (2, 13))
    theirs, mine = outputs(hf, ours, name, ids)
    diff, scale = (mine - theirs).abs().max().item(), theirs.abs().max().item()
    print(f"{name}: max abs difference {diff:.2e}, max |logit| {scale:.2f}")
    assert diff <= 1e-4 * scale
    assert theirs.std() > 0.05  # the weights are not all (nearly) zero: the comparison means something


@pytest.mark.parametrize("name", list(MODELS))
def test_config_is_the_one_read_from_hugging_face(pairs, name):
    _, ours, reference = pairs[name]
    mine, theirs = ours.config.to_dict(), reference.config.to_dict()
    differ = {key: (value, theirs[key]) for key, value in mine.items() if value != theirs[key]}
    if name == "t5-gated":  # transformers 5 ties this head (unscaled); the file stores it: untied
        assert differ.pop("tie_embeddings") == (False, True)
    assert not differ, differ


def test_a_gpt2_head_stored_as_a_copy_of_the_embedding_is_read_as_a_head(pairs, tmp_path):
    """Older converters wrote GPT-2's tied head as ``output.weight``, a copy of ``token_embd``."""
    hf, ours, _ = pairs["gpt2"]
    net, _, _ = load_gguf(write_gguf(hf, tmp_path / "copy.gguf", "gpt2", head_copy=True))
    assert not net.config.tie_embeddings and torch.equal(net.lm_head.weight, ours.lm_head.weight)
    ids = torch.randint(3, VOCAB - 1, (1, 9))
    with torch.no_grad():
        assert torch.equal(net(ids), ours(ids))


def test_bert_loads_without_its_tokenizer_and_says_so(pairs, tmp_path):
    hf, _, _ = pairs["bert"]
    path = write_gguf(hf, tmp_path / "bert.gguf", "bert")
    with pytest.warns(UserWarning, match=r"bert.gguf: loaded without its tokenizer: .*'bert' .*WordPiece"):
        lm = gf.load(path)
    assert lm.tokenizer is None and lm.config.sentence_pooling == "mean"


def test_gpt2_generates_from_gf_load(pairs, tmp_path):
    """The byte-level BPE inside a gpt2 file is read: gf.load gives a model that writes text."""
    hf, ours, _ = pairs["gpt2"]
    lm = gf.load(write_gguf(hf, tmp_path / "gpt2.gguf", "gpt2"))
    ids = torch.tensor([lm.tokenizer.encode("the cat")])
    with torch.no_grad():
        assert (lm.net(ids) - ours(ids)).abs().max().item() <= 1e-5
    assert len(lm.generate("the cat", max_new_tokens=4, temperature=0)) == 4


def test_t5_loads_with_its_unigram_vocabulary(pairs, tmp_path):
    """The ``t5`` vocabulary (pieces and their scores) is read as a Unigram tokenizer: each word of
    the vocabulary, spelled with its leading space, is its own piece, and </s> ends the text."""
    hf, _, _ = pairs["t5"]
    lm = gf.load(write_gguf(hf, tmp_path / "t5.gguf", "t5"))
    assert lm.tokenizer.kind == "unigram"
    words = TOKENS[3:6]
    ids = lm.tokenizer.encode(" ".join(words))
    assert ids[: len(words)] == [3, 4, 5] and lm.tokenizer.decode(ids[: len(words)]) == " ".join(words)


def test_t5_blocks_are_counted_per_stack(pairs, tmp_path):
    """A decoder block missing from the file is named with its stack, before anything is built."""
    hf, _, _ = pairs["t5"]
    path = write_gguf(hf, tmp_path / "t5.gguf", "t5")
    reader = gguf.GGUFReader(path)
    writer = gguf.GGUFWriter(str(tmp_path / "short.gguf"), "t5")
    for key, value in reader.fields.items():
        if (
            key.startswith("t5.")
            and key != "t5.decoder_block_count"
            and value.types[0] != gguf.GGUFValueType.ARRAY
        ):
            writer.add_key_value(key, value.contents(), value.types[0])
    writer.add_decoder_block_count(4)
    write_vocab(writer, "t5", hf.config)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data.copy())
    finish(writer)
    with pytest.raises(ValueError, match=r"short.gguf: the metadata says 4 blocks, .* for 3 \(decoder\)"):
        load_gguf(tmp_path / "short.gguf")
