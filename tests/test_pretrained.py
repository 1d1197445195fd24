"""Real pretrained models from PyPI packages: SmolLM2-135M (GGUF) and all-MiniLM-L6-v2."""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.formats.registry import resolve

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

# max |ours - HF| / max |logit| for SmolLM2's GGUF (README, Faithfulness): measured 1.1e-6 to 4.7e-6
RELATIVE_BOUND = 2e-5
PROMPTS = ["The capital of France is", "def fibonacci(n):\n    ", "Once upon a time, 3 bears"]
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Café naïve résumé — 東京 🚀",
    "x",
]


@pytest.fixture(scope="module")
def smollm():
    """(ours, HF transformers reading the same GGUF file)."""
    path = resolve("smollm2-135m-instruct")
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    return gf.load("smollm2-135m-instruct"), hf.eval()


def test_smollm2_logits_match_hf(smollm):
    ours, hf = smollm
    assert (ours.config.n_layers, ours.config.n_heads, ours.config.n_kv_heads, ours.config.d_model) == (
        30,
        9,
        3,
        576,
    )
    for prompt in [*PROMPTS, "Hello"]:  # one token: the decode product's path
        ids = torch.tensor([ours.tokenizer.encode(prompt)])
        with torch.no_grad():
            theirs = hf(ids).logits
            diff, scale = (ours.net(ids) - theirs).abs().max().item(), theirs.abs().max().item()
        print(f"{prompt!r}: max abs logit difference {diff:.2e}, max |logit| {scale:.1f}: {diff / scale:.1e}")
        assert diff <= RELATIVE_BOUND * scale  # float32 sums in another order: the README's bound


def test_smollm2_64_greedy_tokens_match_hf(smollm):
    ours, hf = smollm
    ids = torch.tensor([ours.tokenizer.encode(PROMPTS[0])])
    with torch.no_grad():
        theirs = hf.generate(ids, max_new_tokens=64, min_new_tokens=64, do_sample=False)[0, ids.shape[1] :]
    new = ours.generate(ids[0], max_new_tokens=64, min_new_tokens=64, temperature=0)  # 1-D: one prompt
    assert new == theirs.tolist()
    assert "Paris" in ours.tokenizer.decode(new)


@pytest.fixture(scope="module")
def minilm():
    path = resolve("minilm-l6")
    hf = transformers.BertModel.from_pretrained(str(path), attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
    return gf.load("minilm-l6"), hf, tokenizer


def test_minilm_sentence_embeddings_match_the_reference_recipe(minilm):
    """sentence-transformers' recipe for this model (modules.json): BERT, mean pooling over
    real tokens, L2 normalization — computed here with HF's BertModel."""
    ours, hf, tokenizer = minilm
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = hf(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    embeddings = ours.embed(SENTENCES)
    cosine = (embeddings * reference).sum(-1)
    print("cosine with the reference:", cosine.tolist())
    assert cosine.min().item() >= 0.99999


def test_minilm_embeddings_match_sentence_transformers(minilm):
    """The sentence-transformers package itself, reading the same directory (modules.json:
    BERT, mean pooling, normalization; max_seq_length 256 — the long text is truncated)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    ours = minilm[0]
    model = sentence_transformers.SentenceTransformer(str(resolve("minilm-l6")), device="cpu")
    texts = [*SENTENCES, "a long text " * 150]
    reference = torch.from_numpy(model.encode(texts))
    cosine = (ours.embed(texts) * reference).sum(-1)
    print("cosine with sentence-transformers:", cosine.tolist())
    assert cosine.min().item() >= 0.99999


def test_minilm_attention_weights_match_hf(minilm):
    ours, hf, tokenizer = minilm
    text = "The quick brown fox jumps over the lazy dog."
    ids = torch.tensor([ours.tokenizer.encode(text)])
    with torch.no_grad():
        theirs = hf(ids, output_attentions=True).attentions
    trace = ours.trace(ids, names="blocks.*.attn.pattern")
    for layer, reference in enumerate(theirs):
        assert (trace[f"blocks.{layer}.attn.pattern"] - reference).abs().max() <= 1e-5


def test_bad_model_inputs_are_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a registry name"):
        gf.load("no-such-model")
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"NOTGGUF" + bytes(100))
    with pytest.raises(ValueError, match="not a GGUF file"):
        gf.load(fake)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(resolve("smollm2-135m-instruct").read_bytes()[:100_000])
    with pytest.raises(ValueError, match="damaged or truncated"):
        gf.load(truncated)
    with pytest.raises(ValueError, match="cannot tell what"):
        gf.load(tmp_path)


def test_chat_with_smollm2_uses_its_template_and_streams(smollm):
    import io

    from glassformer.chat import chat_loop, render_chat

    ours, _ = smollm
    text = render_chat(ours.chat_template, [{"role": "user", "content": "Hi"}])
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    lines = iter(["What is the capital of France?", "exit"])
    out = io.StringIO()
    messages = chat_loop(ours, read=lambda _: next(lines), out=out, temperature=0, max_new_tokens=20)
    assert "Paris" in messages[-1]["content"] and "<|im_end|>" not in out.getvalue()
    assert out.getvalue().startswith("model> ")


def test_streamed_text_keeps_split_characters_whole(smollm):
    ours, _ = smollm
    from glassformer.lm import decode_stream

    ids = ours.tokenizer.encode("I love 🤖 robots")
    pieces = list(decode_stream(ours.tokenizer, iter(ids)))
    assert "".join(pieces) == "I love 🤖 robots" and all("\ufffd" not in p for p in pieces)
