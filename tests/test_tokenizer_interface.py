"""The shared interface: batch encoding, the facade's load_tokenizer, text in the LanguageModel."""

import pytest
import torch

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer


def test_encode_batch_pads_truncates_and_masks():
    tok = CharTokenizer.from_text("abcdef", pad_token="<pad>")
    batch = tok.encode_batch(["ab", "abcd"])
    pad = tok.pad_token_id
    assert batch.ids == [[0, 1, pad, pad], [0, 1, 2, 3]]
    assert batch.attention_mask == [[1, 1, 0, 0], [1, 1, 1, 1]]
    left = tok.encode_batch(["ab", "abcd"], pad_side="left")
    assert left.ids[0] == [pad, pad, 0, 1] and left.attention_mask[0] == [0, 0, 1, 1]
    fixed = tok.encode_batch(["abcdef"], padding="max_length", max_length=3, truncation=True)
    assert fixed.ids == [[0, 1, 2]]
    ids, mask = tok.encode_batch(["a", "abc"]).tensors()
    assert ids.shape == mask.shape == (2, 3) and ids.dtype == torch.long
    with pytest.raises(ValueError, match="pass truncation=True"):
        tok.encode_batch(["abcdef"], padding="max_length", max_length=3)
    with pytest.raises(TypeError, match="takes a list of texts"):
        tok.encode_batch("abc")
    with pytest.raises(ValueError, match="no pad token"):
        CharTokenizer.from_text("ab").encode_batch(["a", "ab"])


def test_facade_loads_tokenizers_and_models_accept_text():
    gpt2 = gf.load_tokenizer("gpt2")
    assert gpt2.encode("The cat sat on") == [464, 3797, 3332, 319]
    tok = CharTokenizer.from_text("abcdefgh ")
    lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=tok.vocab_size, d_model=16, n_heads=2)), tok)
    assert lm.logits("abc").shape == (1, 3, tok.vocab_size)
    text = lm.generate("abc", max_new_tokens=5, temperature=0)
    assert isinstance(text, str) and len(text) == 5
    assert "".join(lm.stream("abc", max_new_tokens=5, temperature=0)) == text
    assert lm.trace("abc", names="logits").tokens == ["a", "b", "c"]
