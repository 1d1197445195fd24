"""`glassformer inspect MODEL "text" --view VIEW [--layer --head --target --method] [--out FILE]`.

One real forward pass of MODEL (a registry name, .gguf file, HF directory or run
directory) on the text, shown as one view:

=========== ====================================================== ==============
view        what it shows                                          --out
=========== ====================================================== ==============
head        one layer's attention, lines between tokens per head   .html
model       every layer x head pattern as a thumbnail              .html
neuron      q, k, q*k, scores and weights for one head and query   .html
tokens      tokens coloured by surprisal / entropy, or by          .html
            integrated-gradients attribution to ``--target``;
            with ``--method``, by an explanation of the
            prediction (several methods: one row each)
heatmap     one head's pattern (``--head``), or all heads of a     .png / .svg
            layer as a grid
lens        the logit lens: each layer's top next-token guess      .png / .svg
embeddings  the hidden states moving layer by layer (PCA, 2D)      .html
=========== ====================================================== ==============

Without ``--out`` the view goes to a temporary file whose path is printed.

``--method lime|shap|ig|gxi|occlusion`` (or several, comma-separated: ``lime,ig``) explains
one prediction: the probability of the next token ``--target`` (default: the model's top
prediction), or for a sentence encoder (minilm-l6) the cosine similarity of the text to
the sentence ``--target``. ``--keep-first`` holds the first token fixed (a decoder's
attention sink). Each method's notes (completeness, additivity, fit) go to stderr.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from glassformer.commands.arguments import HUB_ID_HELP

VIEWS = {
    "head": (".html",),
    "model": (".html",),
    "neuron": (".html",),
    "tokens": (".html",),
    "heatmap": (".png", ".svg"),
    "lens": (".png", ".svg"),
    "embeddings": (".html",),
}


def register(commands: argparse._SubParsersAction) -> None:
    from glassformer.formats.registry import DTYPE_HELP, DTYPES

    inspect = commands.add_parser(
        "inspect",
        help="look inside a model: attention, logit lens, attributions, hidden states",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument(
        "model", help=f"a registry name, .gguf file, HF directory, run directory, {HUB_ID_HELP}"
    )
    inspect.add_argument("text", help="the text to run through the model")
    inspect.add_argument("--view", choices=list(VIEWS), default="head", help="what to show (default: head)")
    inspect.add_argument("--layer", type=int, default=0, help="layer for head/neuron/heatmap (default: 0)")
    inspect.add_argument("--head", type=int, default=None, help="head for neuron/heatmap (neuron default: 0)")
    inspect.add_argument(
        "--target",
        default=None,
        help="a token (e.g. ' Paris'): lens rank / tokens attribution target; with --method on a "
        "sentence encoder, the sentence to compare with",
    )
    inspect.add_argument(
        "--method",
        type=_methods,
        default=None,
        help="tokens view: explain the prediction with lime, shap, ig, gxi or occlusion; several, "
        "comma-separated, show one row each (default: surprisal / entropy, or ig of the logit with --target)",
    )
    inspect.add_argument(
        "--keep-first",
        action="store_true",
        help="--method: hold the first token fixed (a decoder's attention sink)",
    )
    inspect.add_argument(
        "--samples", type=int, default=None, help="--method lime / shap: samples / evaluations (default: 500)"
    )
    inspect.add_argument("--out", default=None, help="output file; its suffix must suit the view")
    inspect.add_argument("--dtype", choices=list(DTYPES), default="float32", help=DTYPE_HELP)
    inspect.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Build the view, save it and print where it went."""
    from glassformer.loading import load

    out = _output_path(args.view, args.out)  # a bad --out fails before the model loads
    if args.method is not None and args.view != "tokens":
        raise ValueError(
            f"--method explains a prediction in the tokens view; add --view tokens (not {args.view})"
        )
    lm = load(args.model, args.dtype)
    if args.method is not None:
        view = explanation_view(lm, args.text, args.method, args.target, args.keep_first, args.samples)
    else:
        view = build_view(lm, args.text, args.view, layer=args.layer, head=args.head, target=args.target)
    if out.suffix == ".html" and args.view == "embeddings":
        from glassformer.viz.projection import save_html

        save_html(view, out)
    elif out.suffix == ".html":
        view.save(out)
    else:
        from glassformer.viz.figures import save

        save(view, out)
    print(out)
    return 0


def _output_path(view: str, out: str | None) -> Path:
    suffixes = VIEWS[view]
    if out is None:
        handle, name = tempfile.mkstemp(prefix=f"glassformer-{view}-", suffix=suffixes[0])
        os.close(handle)  # only the name is wanted: the view replaces the file atomically
        return Path(name)
    path = Path(out)
    if path.suffix.lower() not in suffixes:
        raise ValueError(f"--view {view} writes {' or '.join(suffixes)} files, not {path.name!r}")
    return path


def _methods(value: str) -> list[str]:
    from glassformer.inspect.explain_methods import METHODS

    methods = [m.strip() for m in value.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise argparse.ArgumentTypeError(f"{value!r}: choose from {', '.join(METHODS)} (comma-separated)")
    if len(set(methods)) != len(methods):
        raise argparse.ArgumentTypeError(f"{value!r} names a method twice")
    return methods


def explanation_view(
    lm,
    text: str,
    methods: list[str],
    target: str | None,
    keep_first: bool = False,
    samples: int | None = None,
):
    """A TokenView of one prediction explained by each of ``methods`` (one row each); each
    method's notes, but what it assumes, printed to stderr."""
    import sys

    from glassformer.inspect.explain_methods import ASSUMPTIONS, explain_tokens
    from glassformer.viz import TokenView

    results = [explain_tokens(lm, text, m, target, keep_first=keep_first, samples=samples) for m in methods]
    for method, result in zip(methods, results, strict=True):
        for note in result.extra.get("notes", []):
            if note != ASSUMPTIONS[method]:
                print(f"{result.method}: {note}", file=sys.stderr)
    return TokenView.from_attributions(results)


def build_view(lm, text: str, view: str, layer: int = 0, head: int | None = None, target: str | None = None):
    """The view object (HTML view, matplotlib Figure or Plotly figure) for ``view``."""
    from glassformer import viz

    if view == "head":
        return viz.HeadView.from_lm(lm, text, layer=layer)
    if view == "model":
        return viz.ModelView.from_lm(lm, text)
    if view == "neuron":
        return viz.NeuronView.from_lm(lm, text, layer, 0 if head is None else head)
    if view == "tokens":
        if target is None:
            return viz.TokenView.from_lm(lm, text)
        from glassformer.inspect import integrated_gradients

        attribution = integrated_gradients(lm, text, target)
        return viz.TokenView(
            attribution.tokens, attribution.scores, label=attribution.method, title=str(attribution.target)
        )
    if view == "heatmap":
        return _heatmap(lm, text, layer, head)
    if view == "lens":
        return viz.logit_lens_figure(lm, text, target)
    return viz.hidden_state_animation(lm, text)


def _heatmap(lm, text: str, layer: int, head: int | None):
    from glassformer.inspect import attention_patterns, head_pattern
    from glassformer.nn.hooks import hook_name
    from glassformer.viz import attention_grid, attention_heatmap

    if lm.config.seq2seq:
        raise ValueError("--view heatmap shows self-attention of decoder or encoder models; use --view head")
    trace = lm.trace(text, hook_name("attn.pattern", "*"))
    if head is None:
        patterns = attention_patterns(trace)  # layers h t s
        if not 0 <= layer < patterns.shape[0]:
            raise ValueError(f"--layer {layer} is out of range: the model has {patterns.shape[0]} layers")
        return attention_grid(patterns[layer], trace.tokens, layer=layer)
    pattern = head_pattern(trace, layer, head)
    return attention_heatmap(pattern, trace.tokens, title=f"layer {layer}, head {head}")
