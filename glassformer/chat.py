"""Chatting with an instruct model: its chat template, a conversation, streamed replies.

An instruct model was trained on conversations laid out by a template (stored in the
checkpoint, e.g. GGUF's ``tokenizer.chat_template``): SmolLM2 wraps each turn as
``<|im_start|>role\\ncontent<|im_end|>\\n`` and the reply starts after
``<|im_start|>assistant\\n``. The template is Jinja2, rendered in a sandbox (a template
from a downloaded file must not run arbitrary code).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from glassformer.lm import LanguageModel


def render_chat(template: str, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """The text the model sees for ``messages`` ([{"role": ..., "content": ...}, ...])."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return environment.from_string(template).render(
        messages=messages, add_generation_prompt=add_generation_prompt
    )


def reply(
    lm: LanguageModel, messages: list[dict[str, str]], write: Callable[[str], object], **options
) -> str:
    """Stream the assistant's next turn to ``write``; return it.

    ``options`` go to `LanguageModel.stream` as they are (max_new_tokens, temperature,
    top_p, seed, ...): pass only what the user chose, and the facade's defaults apply to
    the rest. The stream reads the template's special tokens in the text as their ids and
    ends at the model's stop token, which it does not show.
    """
    if not lm.chat_template:
        raise ValueError("this model has no chat template: use generate() for plain continuation")
    pieces = []
    for piece in lm.stream(render_chat(lm.chat_template, messages), **options):
        pieces.append(piece)
        write(piece)
    return "".join(pieces)


def chat_loop(
    lm: LanguageModel,
    read: Callable[[str], str] = input,
    out: TextIO = sys.stdout,
    system: str | None = None,
    **options,
) -> list[dict[str, str]]:
    """A terminal conversation: read a line, stream the reply; an empty line, 'exit' or
    end of input ends it. Returns the conversation."""
    messages = [{"role": "system", "content": system}] if system else []
    while True:
        try:
            text = read("you> ").strip()
        except EOFError:
            break
        if text in ("", "exit", "quit"):
            break
        messages.append({"role": "user", "content": text})
        out.write("model> ")
        answer = reply(lm, messages, lambda piece: (out.write(piece), out.flush()), **options)
        out.write("\n")
        messages.append({"role": "assistant", "content": answer.strip()})
    return messages
