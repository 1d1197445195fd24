"""The logit lens (nostalgebraist 2020): read the residual stream after every layer as
if it were the last, through the model's own final norm and LM head.

    lens_l = softmax(LM_head(scale * final_norm(x_l)))    x_0 = embed.out, x_l = blocks.{l-1}.resid_post

`unembed` applies what the model's own forward applies after its last block, through
the model's own modules: the final norm, T5's ``lm_head_input_scale``, the LM head (or
BERT's masked-LM head). At the last layer the lens therefore equals the model's logits
(a test holds it to 1e-5 for every family).

Post-norm models (BERT, the original Transformer) have no final norm (``final_norm`` is
the identity): each block ends in its own LayerNorm, so every ``resid_post``, and BERT's
``embed.out`` (normed by the embedding LayerNorm), is already normalized, and the lens
adds no norm of its own. "The final norm" is then the last block's LayerNorm: only its
gain and bias were trained to feed the head, one reason early layers of a post-norm
model read less cleanly. BERT's masked-LM head adds its own transform (dense,
activation, LayerNorm) before the unembedding. Encoder-decoder models: the lens reads
the decoder's layers.

>>> import glassformer as gf
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4)))
>>> lens = logit_lens(lm, [1, 2, 3], k=3, target=7)
>>> lens.layers
['embed.out', 'blocks.0.resid_post', 'blocks.1.resid_post']
>>> lens.top_ids.shape, lens.target_ranks.shape   # layers t k, layers t
(torch.Size([3, 3, 3]), torch.Size([3, 3]))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import capture


@dataclass
class LogitLens:
    """What each layer's residual stream predicts, at every position.

    ``layers[l]`` names the stream read at layer l (0: the embeddings). Tensors are
    layers t k (top-k) and layers t (target); ranks count from 1 (rank 1 = top-1).
    """

    tokens: list[str]  # the input tokens (decoder tokens for an encoder-decoder)
    layers: list[str]
    top_ids: torch.Tensor  # layers t k
    top_probs: torch.Tensor  # layers t k
    top_tokens: list[list[list[str]]]  # layers t k
    target_id: int | None = None
    target_token: str | None = None
    target_ranks: torch.Tensor | None = None  # layers t (long)
    target_probs: torch.Tensor | None = None  # layers t
    entropy: torch.Tensor | None = None  # layers t: H(lens_l) = -sum_v p ln p, in nats

    def top(self, layer: int, position: int = -1) -> list[tuple[str, float]]:
        """The top-k (token, probability) of one layer at one position (default: the last)."""
        n = len(self.layers)
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
            raise ValueError(
                f"layer={layer!r} is out of range: the lens has {n} layers (0 = the embeddings, "
                f"1..{n - 1} = after each block)"
            )
        t = len(self.tokens)
        if isinstance(position, bool) or not isinstance(position, int) or not -t <= position < t:
            raise ValueError(f"position={position!r} is out of range for {t} tokens")
        probs = self.top_probs[layer, position].tolist()
        return list(zip(self.top_tokens[layer][position], probs, strict=True))

    def __str__(self) -> str:
        """The last position's view at each layer."""
        lines = [f"logit lens at the last token {self.tokens[-1]!r}:"]
        width = max(len(name) for name in self.layers)
        for layer, name in enumerate(self.layers):
            tops = "  ".join(f"{tok!r} {p:.2f}" for tok, p in self.top(layer))
            target = ""
            if self.target_ranks is not None:
                rank, prob = int(self.target_ranks[layer, -1]), float(self.target_probs[layer, -1])
                target = f"  | {self.target_token!r} rank {rank} p={prob:.3f}"
            lines.append(f"  {name:<{width}}  {tops}{target}")
        return "\n".join(lines)


def logit_lens(
    lm, text, k: int = 5, target: str | int | None = None, decoder_input=None, positions=None
) -> LogitLens:
    """Top-k next-token predictions of every layer's residual stream, and the rank and
    probability of ``target`` (a token id, or a string that is exactly one token).

    ``positions``: the positions to read (a list of indices, -1 the last; default all).
    The tensors' t axis then holds those positions, in that order: reading only the last
    of a long input saves unembedding every position (t x vocabulary per layer).

    Decoders and encoders with a masked-LM head; for an encoder-decoder, ``text`` is the
    source and ``decoder_input`` the decoder's input (default: the start token; text: the
    start token followed by its tokens), whose stack the lens reads.
    """
    net, config, inputs = lm.net, lm.config, lm.inputs
    if config.sentence_encoder:
        raise ValueError(
            "the logit lens needs an LM head, and this encoder has none (a sentence encoder, "
            "config.mlm_head=False): there is no vocabulary to read its layers in"
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= config.vocab_size:
        raise ValueError(f"k must be an int in 1..{config.vocab_size}, got {k!r}")
    ids = inputs.single(text)
    dec = inputs.decoder_ids(decoder_input)  # None but for an encoder-decoder
    target_id = None if target is None else inputs.token_id(target, "target")
    prefix = "decoder." if dec is not None else ""
    n_blocks = len(net.output_stack.blocks)
    names = [hook_name("embed.out", stack=prefix)] + [
        hook_name("resid_post", i, prefix) for i in range(n_blocks)
    ]
    streams = capture(net, names, lambda: inputs.forward(ids, dec))  # one pass: every layer's stream
    top_ids, top_probs, ranks, probs, entropy = [], [], [], [], []
    with torch.no_grad():
        for name in names:
            stream = streams[name] if positions is None else streams[name][:, list(positions)]
            logits = unembed(net, stream).float()[0]  # t v
            p = logits.softmax(-1)
            entropy.append(-(p * logits.log_softmax(-1)).sum(-1))  # t, nats
            values, indices = p.topk(k, dim=-1)  # t k
            top_ids.append(indices)
            top_probs.append(values)
            if target_id is not None:
                ranks.append(1 + (logits > logits[:, target_id : target_id + 1]).sum(-1))  # t
                probs.append(p[:, target_id])
    top_ids_t = torch.stack(top_ids).cpu()  # layers t k
    return LogitLens(
        tokens=inputs.labels(ids if dec is None else dec),
        layers=names,
        top_ids=top_ids_t,
        top_probs=torch.stack(top_probs).cpu(),
        top_tokens=[[inputs.labels(row) for row in layer] for layer in top_ids_t],
        target_id=target_id,
        target_token=None if target_id is None else inputs.labels([target_id])[0],
        target_ranks=torch.stack(ranks).cpu() if target_id is not None else None,
        target_probs=torch.stack(probs).cpu() if target_id is not None else None,
        entropy=torch.stack(entropy).cpu(),
    )


def unembed(net, x: torch.Tensor) -> torch.Tensor:
    """Logits of a residual stream x (b t d -> b t v), as the model computes them after its
    last block: its final norm (the identity in post-norm models such as BERT, whose blocks
    end normed), then the model's own head (`TransformerModel.unembed`)."""
    return net.unembed(net.output_stack.final_norm(x))
