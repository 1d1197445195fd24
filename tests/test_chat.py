"""Chat and generate go through `LanguageModel.stream`, passing only the options a user chose."""

from __future__ import annotations

import io

import pytest

import glassformer as gf
import glassformer.chat
import glassformer.loading
from glassformer import cli, fast
from glassformer.chat import chat_loop, render_chat, reply
from glassformer.tokenizers.bpe_train import train_bpe

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def chat_lm():
    """A tiny random decoder with a byte-level BPE whose <|im_end|> is the eos token."""
    specials = ["<|im_start|>", "<|im_end|>"]
    tokenizer = train_bpe(
        "hello there, how are you? fine, thanks. " * 20, 280, special_tokens=specials, progress=False
    )
    config = gf.ModelConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        n_layers=1,
        n_heads=4,
        max_seq_len=128,
        eos_token_id=tokenizer.special_tokens["<|im_end|>"],
    )
    lm = gf.LanguageModel(gf.build(config), tokenizer)
    lm.chat_template = TEMPLATE
    return lm


class RecordedStream:
    """Stands in for ``lm.stream``: records each call and yields fixed pieces."""

    def __init__(self, pieces=("Hi", " there")):
        self.pieces, self.calls = pieces, []

    def __call__(self, prompt, **options):
        self.calls.append((prompt, options))
        yield from self.pieces


def test_reply_is_lm_stream_of_the_rendered_conversation(chat_lm, monkeypatch):
    stream = RecordedStream()
    monkeypatch.setattr(chat_lm, "stream", stream)
    written = []
    assert reply(chat_lm, HELLO, written.append, temperature=0) == "Hi there"
    assert written == ["Hi", " there"]
    assert stream.calls == [(render_chat(TEMPLATE, HELLO), {"temperature": 0})]
    reply(chat_lm, HELLO, written.append)
    assert stream.calls[-1][1] == {}  # nothing chosen: the facade's defaults apply


def test_chat_loop_streams_greedy_replies(chat_lm):
    lines = iter(["hello", "exit"])
    out = io.StringIO()
    messages = chat_loop(chat_lm, read=lambda _: next(lines), out=out, temperature=0, max_new_tokens=6)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    expected = "".join(chat_lm.stream(render_chat(TEMPLATE, HELLO), temperature=0, max_new_tokens=6))
    assert out.getvalue() == f"model> {expected}\n" and messages[1]["content"] == expected.strip()
    assert "<|im_end|>" not in out.getvalue()


def test_the_chat_command_passes_only_the_flags_given(chat_lm, monkeypatch):
    calls = []
    monkeypatch.setattr(glassformer.loading, "load", lambda model, dtype: chat_lm)
    monkeypatch.setattr(glassformer.chat, "chat_loop", lambda lm, **options: calls.append(options))
    assert cli.main(["chat", "tiny"]) == 0
    assert cli.main(["chat", "tiny", "--temperature", "0.5", "--seed", "3", "--system", "Be brief."]) == 0
    reply = {"max_new_tokens": 256}  # the command's default: a reply, not a continuation
    assert calls == [
        {"system": None, **reply},
        {"system": "Be brief.", **reply, "temperature": 0.5, "seed": 3},
    ]


def test_the_generate_command_passes_only_the_flags_given(chat_lm, monkeypatch, capsys):
    stream = RecordedStream()
    monkeypatch.setattr(chat_lm, "stream", stream)
    monkeypatch.setattr(glassformer.loading, "load", lambda model, dtype: chat_lm)
    assert cli.main(["generate", "tiny", "hello", "--top-k", "5"]) == 0
    assert capsys.readouterr().out == "hello" + "Hi there" + "\n"
    assert stream.calls == [("hello", {"max_new_tokens": 300, "top_k": 5})]  # 300: the command's default


@pytest.mark.parametrize("command", ["generate", "chat"])
def test_int8_decode_weights_are_asked_for_and_the_choice_told(chat_lm, monkeypatch, capsys, command):
    from glassformer import fast_decode

    monkeypatch.setattr(fast_decode, "faster_than_float32", lambda *_: (True, "int8 1 us vs float32 3 us"))
    monkeypatch.setattr(glassformer.loading, "load", lambda model, dtype: chat_lm)
    monkeypatch.setattr(glassformer.chat, "chat_loop", lambda lm, **options: None)
    fast.enable(chat_lm.net.eval())
    assert cli.main([command, "tiny", "--decode-weights", "int8", "--max-new-tokens", "3"]) == 0
    told = capsys.readouterr()
    assert "decode weights: int8 (faster: int8 1 us vs float32 3 us)" in told.out + told.err
    assert fast_decode.step_for(chat_lm.net).weights == "int8"
    fast_decode.use_weights(chat_lm.net, "float32")  # the module's model as the other tests have it
    fast.disable(chat_lm.net).train()


@pytest.mark.parametrize("command", ["generate", "chat"])
def test_quantize_replaces_the_matrices_by_their_blocks_and_says_so(chat_lm, monkeypatch, capsys, command):
    import copy

    import torch

    from glassformer.block_quant import quantize

    own = copy.deepcopy(chat_lm)  # quantized in place: the module's model stays as the other tests have it
    monkeypatch.setattr(glassformer.loading, "load", lambda model, dtype: own)
    monkeypatch.setattr(glassformer.chat, "chat_loop", lambda lm, **options: None)
    prompt = ["hi"] if command == "generate" else []  # chat reads its turns from the terminal
    assert cli.main([command, "tiny", *prompt, "--quantize", "q4_0", "--max-new-tokens", "2"]) == 0
    told = capsys.readouterr()
    said = told.out + told.err  # generate says it beside the stream (stderr), chat on its own screen
    assert "quantized to Q4_0: 5 matrices" in said and "bits a weight" in said
    up = own.net.output_stack.blocks[0].ffn.up_proj.weight.detach()
    assert torch.equal(quantize(up, "q4_0").dequantized(), up)  # on Q4_0's grid now
    head = own.net.lm_head.weight.detach()
    assert torch.equal(quantize(head, "q8_0").dequantized(), head)  # the head at Q8_0 beside Q4_0
