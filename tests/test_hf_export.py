"""Export to Hugging Face checkpoints (`glassformer.formats.hf_export`), checked by HF itself.

HF model -> save_pretrained -> gf.load -> lm.save_hf -> HF from_pretrained must give HF's
own model back: every tensor equal, the same logits, nothing missing or unexpected. Models
built by Glassformer must load in HF with our logits; configs no HF family holds are refused.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import glassformer as gf
from glassformer import cli
from glassformer.formats.hf_export import save_hf
from tests.test_hf_parity import VOCAB, _bert, _gpt2, _llama, _qwen3, _t5

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()


ROUND_TRIPS = {  # name -> (HF model builder, the Auto class that loads the export)
    "gpt2": (_gpt2, transformers.AutoModelForCausalLM),
    "bert-mlm": (_bert, transformers.AutoModelForMaskedLM),
    "bert-pooler": (lambda: transformers.BertModel(_bert().config), transformers.AutoModel),
    "llama-untied": (lambda: _llama(tied=False), transformers.AutoModelForCausalLM),
    "llama-tied": (lambda: _llama(tied=True), transformers.AutoModelForCausalLM),
    "qwen3": (_qwen3, transformers.AutoModelForCausalLM),
    "t5-relu": (_t5, transformers.AutoModelForSeq2SeqLM),
    "t5-gated-gelu": (lambda: _t5(gated=True), transformers.AutoModelForSeq2SeqLM),
}


def _outputs(hf, ids: torch.Tensor) -> torch.Tensor:
    """Everything the model computes for ``ids``: logits, or hidden states and pooler output."""
    with torch.no_grad():
        if hf.config.is_encoder_decoder:
            return hf(input_ids=ids, decoder_input_ids=ids[:, :5], use_cache=False).logits
        out = hf(input_ids=ids)
        if hasattr(out, "logits"):
            return out.logits
        return torch.cat([out.last_hidden_state.flatten(), out.pooler_output.flatten()])


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_hf_to_ours_to_hf_is_the_same_model(name, tmp_path):
    builder, auto = ROUND_TRIPS[name]
    torch.manual_seed(0)
    hf = builder().eval()
    with torch.no_grad():  # HF starts norms and biases at 1 and 0: make every tensor matter
        for param in hf.parameters():
            param.add_(0.1 * torch.randn_like(param))
    hf.save_pretrained(tmp_path / "hf")
    lm = gf.load(tmp_path / "hf")
    done = lm.save_hf(tmp_path / "export")
    assert done.architecture == hf.config.architectures[0]
    back, info = auto.from_pretrained(tmp_path / "export", output_loading_info=True)
    back.eval()
    assert type(back) is type(hf)
    assert not any(info.values()), info  # no missing, unexpected or mismatched tensors

    ours, theirs = hf.state_dict(), back.state_dict()
    assert sorted(ours) == sorted(theirs)
    unequal = [key for key in ours if not torch.equal(ours[key], theirs[key])]
    assert not unequal
    ids = torch.randint(3, VOCAB - 1, (2, 11))
    diff = (_outputs(hf, ids) - _outputs(back, ids)).abs().max().item()
    print(f"{name}: max abs difference {diff:.1e}")
    assert diff == 0.0
    assert gf.load(tmp_path / "export").config == lm.config


def perturbed(config: gf.ModelConfig) -> gf.LanguageModel:
    torch.manual_seed(0)
    net = gf.build(config).eval()
    with torch.no_grad():  # norms start at 1 and biases at 0: make every tensor matter
        for param in net.parameters():
            param.add_(0.05 * torch.randn_like(param))
    return gf.LanguageModel(net)


BUILT = {
    "llama-like": gf.ModelConfig(
        vocab_size=61,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_ff=48,
        max_seq_len=64,
        positions="rope",
        rope_base=1000.0,
        norm="rmsnorm",
        activation="swiglu",
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings=False,
        eos_token_id=0,
        resid_dropout=0.1,  # training only: does not stop the export
    ),
    "llama-like-tied-linear-rope": gf.ModelConfig(
        vocab_size=61,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_head=16,  # d_head * n_heads != d_model
        d_ff=40,
        max_seq_len=64,
        positions="rope",
        rope_scaling="linear",
        rope_scaling_factor=2.0,
        norm="rmsnorm",
        norm_eps=1e-6,
        activation="geglu_tanh",
        qkv_bias=True,
        out_bias=True,
        ffn_bias=True,
    ),
    "gpt2-like": gf.ModelConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=40, max_seq_len=64),
}


@pytest.mark.parametrize("name", list(BUILT))
def test_models_built_here_load_in_hf_with_our_logits(name, tmp_path):
    lm = perturbed(BUILT[name])
    lm.save_hf(tmp_path)  # an existing empty directory is fine
    hf, info = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not any(info.values()), info
    ids = torch.randint(0, 61, (2, 17))
    with torch.no_grad():
        theirs = hf.eval()(input_ids=ids).logits
    diff = (theirs - lm.logits(ids)).abs().max().item()
    print(f"{name}: max abs logit difference {diff:.1e}")
    assert diff <= 1e-5
    assert gf.load(tmp_path).config == lm.config.replace(resid_dropout=0.0)


REFUSED = {
    "alibi": (dict(positions="alibi"), r"closest, gpt2 \(GPT2LMHeadModel\), would differ in positions "),
    "parallel gpt2 with rmsnorm": (  # without biases, GPT-2 is OPT's (tests/test_hf_writers.py)
        dict(norm="rmsnorm", parallel_residual=True),
        r"norm \('rmsnorm' here, 'layernorm' as gpt2\); parallel_residual \(True here, False as gpt2\)",
    ),
    "original transformer": (
        dict(family="encoder_decoder", positions="sinusoidal", norm_placement="post"),
        r"closest, marian \(MarianMTModel\), would differ in sinusoidal_style .*"
        r"encoder_decoder -> t5, marian, bart$",  # every family read is written
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_configs_no_hf_family_holds_are_refused_naming_the_fields(name, tmp_path):
    changes, message = REFUSED[name]
    config = gf.ModelConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, **changes)
    with pytest.raises(ValueError, match=message):
        save_hf(gf.build(config), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []  # refused before anything is written


def test_a_directory_with_files_is_replaced_only_when_asked(tmp_path):
    lm = perturbed(BUILT["gpt2-like"])
    target = tmp_path / "out"
    lm.save_hf(target)  # a new directory
    (target / "generation_config.json").write_text("{}")  # what an HF checkpoint may also hold
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        lm.save_hf(target)
    lm.save_hf(target, overwrite=True)  # nothing but a checkpoint's files: replaced whole
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging directory left behind


def test_overwrite_refuses_a_directory_with_other_files_and_loses_nothing(tmp_path):
    """``export MODEL ~ --overwrite`` must not delete a home directory: only a directory that
    holds nothing but a checkpoint's files is replaced; otherwise the others are named."""
    lm = perturbed(BUILT["gpt2-like"])
    target = tmp_path / "home"
    lm.save_hf(target)
    (target / "notes.txt").write_text("mine")
    (target / "photos").mkdir()
    (target / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    before = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"holds notes.txt, photos/, which .*refusing to replace it"):
        lm.save_hf(target, overwrite=True)
    after = {p.relative_to(target): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in tmp_path.iterdir()] == ["home"]  # no staging directory left behind


def test_overwrite_of_an_empty_or_missing_directory_just_writes(tmp_path):
    lm = perturbed(BUILT["gpt2-like"])
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "new" / "deeper"):
        done = lm.save_hf(target, overwrite=True)
        assert sorted(p.name for p in target.iterdir()) == list(done.files)
    with pytest.raises(FileExistsError, match="is not a directory"):
        lm.save_hf(tmp_path / "new" / "deeper" / "config.json", overwrite=True)


def test_tokenizer_is_written_when_it_can_be(tmp_path):
    from glassformer.tokenizers.bpe_train import train_bpe
    from glassformer.tokenizers.char import CharTokenizer

    text = "the cat sat on the mat. a dog sat on a log. " * 20
    bpe = train_bpe(text, 270, special_tokens=["<|endoftext|>"], progress=False)
    config = BUILT["gpt2-like"].replace(vocab_size=bpe.vocab_size, eos_token_id=bpe.vocab_size - 1)
    net = gf.build(config)
    done = gf.LanguageModel(net, bpe).save_hf(tmp_path / "bpe")
    assert "tokenizer.json" in done.files and not done.notes
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "bpe")
    sample = "the dog sat on the cat.<|endoftext|>"
    assert hf_tokenizer(sample)["input_ids"] == bpe.encode(sample, allowed_special="all")
    assert hf_tokenizer.eos_token == "<|endoftext|>"
    assert gf.load(tmp_path / "bpe").tokenizer.encode("a cat") == bpe.encode("a cat")

    chars = CharTokenizer.from_text(text)
    done = gf.LanguageModel(net, chars).save_hf(tmp_path / "chars")  # the facade's own: a note
    assert "tokenizer.json" not in done.files
    assert done.notes and "byte-level BPE, WordPiece, SentencePiece BPE and Unigram" in done.notes[0]
    with pytest.raises(ValueError, match="cannot write the tokenizer"):  # asked for: an error
        save_hf(net, tmp_path / "chars-explicit", chars)


def test_minilm_exports_whole_and_sentence_transformers_reads_it(tmp_path):
    """all-MiniLM-L6-v2 -> our export (weights + WordPiece tokenizer.json) -> HF's tokenizer
    and BertModel give our ids and our embeddings."""
    tokenizers = pytest.importorskip("tokenizers")
    lm = gf.load("minilm-l6")
    done = lm.save_hf(tmp_path / "minilm")
    assert "tokenizer.json" in done.files and not done.notes
    texts = ["A man is eating food.", "Café naïve résumé — 東京 🚀", "UNAFFABLE words, [MASK] and [SEP]!", ""]
    hf_tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "minilm" / "tokenizer.json"))
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path / "minilm")
    again = gf.load(tmp_path / "minilm").tokenizer  # and our own reader takes it back
    for text in texts:
        ours = lm.tokenizer.encode(text, allowed_special="all")  # HF turns "[MASK]" into its id
        assert hf_tokenizer.encode(text).ids == ours == auto(text)["input_ids"]
        assert again.encode(text, allowed_special="all") == ours
    batch = auto(texts[:3], padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = transformers.BertModel.from_pretrained(tmp_path / "minilm")(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    theirs = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    assert (theirs * lm.embed(texts[:3])).sum(-1).min() >= 0.99999


def test_export_command(tmp_path, capsys):
    torch.manual_seed(0)
    _llama(tied=True).save_pretrained(tmp_path / "hf")
    out = tmp_path / "export"
    assert cli.main(["export", str(tmp_path / "hf"), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "LlamaForCausalLM" in printed and "model.safetensors" in printed
    assert json.loads((out / "config.json").read_text())["num_key_value_heads"] == 2

    assert cli.main(["export", str(tmp_path / "hf"), str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert cli.main(["export", str(tmp_path / "hf"), str(out), "--overwrite"]) == 0
    (out / "thesis.tex").write_text("years of work")
    assert cli.main(["export", str(tmp_path / "hf"), str(out), "--overwrite"]) == 2
    assert "thesis.tex" in capsys.readouterr().err
    assert (out / "thesis.tex").read_text() == "years of work"

    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    help_text = capsys.readouterr().out
    assert "Hugging Face checkpoint directory" in help_text and "--overwrite" in help_text
    assert "registry name, a .gguf file" in help_text
