"""The geometry of embeddings: similar tokens, analogies, sentences, hidden-state paths.

    cos(a, b) = a . b / (|a| |b|)

* `nearest_tokens`: the rows of the token embedding matrix E (v d) closest in cosine
  to a token or a vector.
* `analogy`: b - a + c on unit vectors (3CosAdd; Mikolov et al., 2013; Levy & Goldberg,
  2014), the inputs excluded: king - man + woman, with a=man, b=king, c=woman.
* `nearest_sentences`: candidates ranked by cosine to a query, with ``lm.embed``
  (sentence encoders such as all-MiniLM-L6-v2).
* `project`: PCA or t-SNE (scikit-learn) to 2 or 3 dimensions.
* `hidden_state_trajectory`: one text's residual stream after every layer, all
  projected with one projection so that the layers share axes.

>>> a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
>>> cosine_similarity(a, torch.tensor([1.0, 1.0]))
tensor([0.7071, 0.7071])
>>> line = torch.linspace(0, 1, 10)[:, None] * torch.tensor([[1.0, 2.0, 3.0]])
>>> round(float(project(line, "pca", dims=2).explained_variance_ratio[0]), 6)
1.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from glassformer.inputs import TokenInput, input_prefix
from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

METHODS = ("pca", "tsne")


@dataclass
class Neighbours:
    """Items ranked by cosine similarity to a query, most similar first."""

    query: str
    items: list[str]
    similarities: list[float]
    ids: list[int] | None = None  # token ids, for token neighbours

    def __str__(self) -> str:
        lines = [f"nearest to {self.query} (cosine):"]
        pairs = zip(self.items, self.similarities, strict=True)
        lines += [f"  {i + 1:>2}. {item!r:<30} {s:.4f}" for i, (item, s) in enumerate(pairs)]
        return "\n".join(lines)


@dataclass
class Projection:
    """Points n x dims; PCA's fraction of the variance each axis explains (None for t-SNE)."""

    points: np.ndarray
    method: str
    explained_variance_ratio: np.ndarray | None = None


@dataclass
class Trajectory:
    """One text's hidden states, layer by layer, in one shared projection."""

    points: np.ndarray  # layers x t x dims (layer 0 is embed.out)
    tokens: list[str]
    layers: list[str]  # the activation name of each layer
    method: str
    explained_variance_ratio: np.ndarray | None = None


# --- similarity -----------------------------------------------------------------------------


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """cos(a, b) along the last dimension. d and d -> scalar; n d and d -> n; n d and m d
    -> n m (every pair)."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"vectors of different sizes: {a.shape[-1]} and {b.shape[-1]}")
    a = torch.nn.functional.normalize(a.float(), dim=-1)
    b = torch.nn.functional.normalize(b.float(), dim=-1)
    if a.dim() == 2 and b.dim() == 2:
        return a @ b.T  # n m
    return (a * b).sum(-1)


def token_embeddings(lm: LanguageModel) -> torch.Tensor:
    """The input token embedding matrix E: v d (shared by encoder and decoder in seq2seq)."""
    return lm.net.token_embedding.weight.detach()


def _ranked(lm, vector: torch.Tensor, k: int, exclude: Sequence[int], query: str) -> Neighbours:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be a positive integer")
    table = token_embeddings(lm)
    if vector.shape != table.shape[1:]:
        raise ValueError(
            f"a query vector needs {table.shape[1]} values (d_model), got shape {tuple(vector.shape)}"
        )
    similarity = cosine_similarity(table, vector)  # v
    similarity[list(exclude)] = float("-inf")
    values, ids = similarity.topk(min(k, len(similarity) - len(set(exclude))))
    names = lm.inputs.labels(ids)
    return Neighbours(query, names, values.tolist(), ids.tolist())


def nearest_tokens(lm: LanguageModel, token_or_vector: str | int | torch.Tensor, k: int = 10) -> Neighbours:
    """The k tokens whose embeddings are closest in cosine to a token (string of one token,
    or id; the token itself excluded) or to a d-vector."""
    if isinstance(token_or_vector, torch.Tensor):
        return _ranked(lm, token_or_vector.detach().float(), k, (), "a vector")
    token = lm.inputs.token_id(token_or_vector)
    vector = token_embeddings(lm)[token].float()
    return _ranked(lm, vector, k, (token,), repr(lm.inputs.labels([token])[0]))


def analogy(lm: LanguageModel, a: str | int, b: str | int, c: str | int, k: int = 5) -> Neighbours:
    """The k tokens nearest b - a + c ("a is to b as c is to ?"), the three inputs excluded.
    Each vector is normalized first (3CosAdd), so no word dominates by its length."""
    inputs = lm.inputs
    ids = [inputs.token_id(t) for t in (a, b, c)]
    table = token_embeddings(lm).float()
    unit_a, unit_b, unit_c = torch.nn.functional.normalize(table[ids], dim=-1)
    names = inputs.labels(ids)
    query = f"{names[1]!r} - {names[0]!r} + {names[2]!r}"
    return _ranked(lm, unit_b - unit_a + unit_c, k, ids, query)


def nearest_sentences(
    lm: LanguageModel, query: str, candidates: Sequence[str], k: int | None = None
) -> Neighbours:
    """``candidates`` ranked by the cosine of their sentence embeddings (``lm.embed``) to
    the query's; the first k (all by default)."""
    if lm.config.causal:
        raise ValueError(
            f"nearest_sentences needs a sentence encoder (lm.embed), this model is {lm.config.family!r}"
        )
    if isinstance(candidates, str) or not candidates:
        raise ValueError("candidates must be a non-empty list of sentences")
    vectors = lm.embed([query, *candidates])  # n+1 d
    similarity = cosine_similarity(vectors[1:], vectors[0])  # n
    order = similarity.argsort(descending=True)[: k or len(candidates)].tolist()
    return Neighbours(repr(query), [candidates[i] for i in order], [float(similarity[i]) for i in order])


# --- projections ----------------------------------------------------------------------------


def project(vectors, method: str = "pca", dims: int = 2, seed: int = 0) -> Projection:
    """n x d vectors -> n x dims points by PCA (linear; with the variance each axis keeps)
    or t-SNE (non-linear, keeps neighbourhoods; perplexity min(30, (n - 1) / 3), since it
    must stay below n)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}; allowed values: {', '.join(METHODS)}")
    if dims not in (2, 3):
        raise ValueError(f"dims={dims!r}; allowed values: 2, 3")
    data = (
        vectors.detach().float().cpu().numpy() if isinstance(vectors, torch.Tensor) else np.asarray(vectors)
    )
    if data.ndim != 2 or len(data) <= dims:
        raise ValueError(f"project needs n x d vectors with n > dims={dims}, got shape {data.shape}")
    if method == "pca":
        from sklearn.decomposition import PCA

        pca = PCA(n_components=min(dims, data.shape[1]), random_state=seed)
        return Projection(pca.fit_transform(data), method, pca.explained_variance_ratio_)
    from sklearn.manifold import TSNE

    perplexity = min(30.0, max(1.0, (len(data) - 1) / 3))
    # scikit-learn's Barnes-Hut t-SNE is slow in 3-D (an octree: 30 points take ~40 s, the
    # exact O(n^2) method ~1 s), so 3-D uses the exact method up to a few thousand points.
    exact = dims == 3 and len(data) <= 3000
    tsne = TSNE(
        n_components=dims,
        perplexity=perplexity,
        random_state=seed,
        init="pca",
        method="exact" if exact else "barnes_hut",
    )
    from threadpoolctl import threadpool_limits  # installed with scikit-learn

    # A text's few hundred points take ~0.2 s on one thread; OpenMP threads save nothing at
    # this size and, on a busy machine, spin-wait for seconds.
    with threadpool_limits(1 if len(data) < 5000 else None):
        return Projection(tsne.fit_transform(data), method)


def hidden_state_trajectory(
    lm: LanguageModel,
    text: TokenInput,
    method: str = "pca",
    dims: int = 3,
    seed: int = 0,
    normalize: bool = False,
) -> Trajectory:
    """``embed.out`` and each ``blocks.{i}.resid_post`` of one text (layers x t x d), all
    (layers * t points) projected with ONE projection fitted on them together, so that
    position on the axes means the same at every layer: the frames of a layer-by-layer
    animation. For an encoder-decoder, the encoder's stack.

    ``normalize`` divides each vector by its RMS first, as the norm before any read-out
    does. Without it a few positions with massive activations (the first token of most
    pretrained decoders is an attention sink whose norm is ~100x the others') take all
    the variance, and every other token sits in one dot."""
    inputs = lm.inputs
    ids = inputs.single(text)
    prefix = input_prefix(lm.net)
    names = [hook_name("embed.out", stack=prefix)]
    names += [hook_name("resid_post", i, prefix) for i in range(lm.config.n_layers)]
    store: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, name: str) -> None:
        store[name] = x.detach()[0]  # t d

    # An encoder-decoder's decoder reads its start token alone: only the encoder matters here.
    with torch.no_grad(), evaluating(lm.net), lm.net.hooks(dict.fromkeys(names, keep)):
        inputs.forward(ids)
    states = torch.stack([store[n] for n in names]).float()  # layers t d
    if normalize:
        states = states * torch.rsqrt(states.pow(2).mean(-1, keepdim=True) + 1e-12)
    layers, t, d = states.shape
    projection = project(states.reshape(layers * t, d), method, dims, seed)
    points = projection.points.reshape(layers, t, -1)  # layers t dims
    return Trajectory(points, inputs.labels(ids), names, method, projection.explained_variance_ratio)
