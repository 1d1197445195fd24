"""Self-contained HTML views: a versioned payload, our own JS and CSS inlined, no network.

Every view (`HeadView`, `ModelView`, `NeuronView`, `TokenView`) turns plain data into a
payload dict, then into HTML: the same fragment shows inline in Jupyter (``_repr_html_``)
and, wrapped in a document, makes a standalone file (``save``). Nothing is loaded from a
CDN or any other address; the JS and CSS come from ``glassformer/viz/assets/``.

Payload (``format: "glassformer-view"``, ``version: 1``): JSON with the tokens and view
settings; arrays travel as base64 blocks ``{dtype, shape, compression, data}``, never as
JSON lists of floats:

* attention weights: ``uint8`` on the absolute scale, ``q = round(255 * w)`` so that
  ``w ≈ q / 255`` with an error of at most 1/510. That is the resolution of a canvas alpha
  or an 8-bit colour channel: the views lose nothing they could draw. Then DEFLATE (zlib),
  undone in the browser by ``DecompressionStream``; long inputs shrink a lot because most
  of their weights round to 0.
* values a view prints (q, k, scores, per-token scores): ``float32``, little-endian.

>>> import torch
>>> block = encode_weights(torch.tensor([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]]))
>>> block["dtype"], block["shape"], block["compression"]
('uint8', [2, 3], 'deflate')
>>> decode_weights(block)[0].tolist()
[128, 64, 64]

Scoping: each rendering gets a fresh element id ``gfv-<12 hex>``; the script that starts
it finds its root and its payload by that id only, and every CSS rule is under the
``.gfv`` class with ``gfv-`` class names, so several views in one notebook never collide.
The scripts are ES modules (``assets/``: ``<kind>_view.js`` on ``core.js``, the views'
library, ``payload.js``, the one payload reader, and the modules the workshop imports too:
``blocks.js``, this decoder, ``colours.js``, ``paint.js``, ``lines.js``, ...). A view inlines its
module and everything that imports, as classic scripts (`glassformer.viz.modules.inlined`)
that register on ``window.glassformerViews.modules``; every view file carries its own copy,
and a second copy on one page (another view, another version) sees the first and does nothing.
"""

from __future__ import annotations

import base64
import html
import json
import math
import uuid
import zlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import numpy as np
import torch

from glassformer.atomic import write_text_atomic
from glassformer.viz.modules import asset, inlined

PAYLOAD_FORMAT = "glassformer-view"
PAYLOAD_VERSION = 1


# arrays ----------------------------------------------------------------------------
def as_float_tensor(values: Any, name: str) -> torch.Tensor:
    """A float32 CPU tensor from a tensor, a numpy array or nested lists; TypeError otherwise."""
    if isinstance(values, torch.Tensor):
        tensor = values.detach()
    else:
        try:
            tensor = torch.as_tensor(np.asarray(values, dtype=np.float32))
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be a tensor or an array of numbers, got {values!r:.80}") from error
    return tensor.to("cpu", torch.float32)


def check_weights(weights: torch.Tensor, name: str = "attention") -> None:
    """Attention weights must be softmax outputs: finite, in [0, 1]."""
    low, high = (float(x) for x in torch.aminmax(weights))  # NaN if any value is NaN
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(
            f"{name} holds NaN or infinite values; attention weights are softmax outputs in [0, 1]"
        )
    if low < -1e-4 or high > 1 + 1e-4:
        raise ValueError(
            f"{name} values span [{low:.3g}, {high:.3g}], but attention weights lie in [0, 1]; "
            "did you pass the scores (before softmax) instead of the pattern?"
        )


def encode_weights(weights: torch.Tensor, compress: bool = True) -> dict[str, Any]:
    """Attention weights (any shape) -> a uint8 block, ``q = round(255 w)``, deflated unless
    ``compress=False`` (for a page that reads the bytes at once, like the workshop's)."""
    q = (weights.detach().cpu().float().clamp(0, 1) * 255 + 0.5).to(torch.uint8)  # round half up (>= 0)
    raw = np.ascontiguousarray(q.numpy()).tobytes()
    if not compress:
        return _block("uint8", list(q.shape), raw, None)
    return _block("uint8", list(q.shape), zlib.compress(raw, 6), "deflate")


def decode_weights(block: dict[str, Any]) -> np.ndarray:
    """The uint8 array of an `encode_weights` block (the JS does the same in blocks.js)."""
    raw = base64.b64decode(block["data"])
    if block.get("compression") == "deflate":
        raw = zlib.decompress(raw)
    return np.frombuffer(raw, dtype=np.uint8).reshape(block["shape"])


def encode_float32(values: torch.Tensor) -> dict[str, Any]:
    """Values printed on hover -> a little-endian float32 block (no compression)."""
    array = np.ascontiguousarray(values.detach().to("cpu", torch.float32).numpy(), dtype="<f4")
    return _block("float32", list(array.shape), array.tobytes(), None)


def _block(dtype: str, shape: list[int], data: bytes, compression: str | None) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "shape": shape,
        "compression": compression,
        "data": base64.b64encode(data).decode("ascii"),
    }


def _json_for_script(payload: dict[str, Any]) -> str:
    # "<" escaped inside JSON strings, so no token text can close the script tag.
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


# views -----------------------------------------------------------------------------
class View(ABC):
    """An interactive HTML view: subclasses set ``kind`` and build ``_content()``."""

    kind = ""  # "head", "model", "neuron", "token": also the name of assets/<kind>_view.js

    title: str = ""

    def payload(self) -> dict[str, Any]:
        """The versioned data the page draws from (what a web app would send as JSON)."""
        return {"format": PAYLOAD_FORMAT, "version": PAYLOAD_VERSION, "view": self.kind, **self._content()}

    @abstractmethod
    def _content(self) -> dict[str, Any]:
        """The view's own data: tokens and base64-encoded arrays."""

    def html(self) -> str:
        """An HTML fragment with a fresh element id: the view, its payload, our CSS and JS."""
        root = f"gfv-{uuid.uuid4().hex[:12]}"
        data = _json_for_script(self.payload())
        module = f"{self.kind}_view.js"
        scripts = [script for _, script in inlined(module)]
        # the registry's core.js draws the view with the registry's <kind>_view.js (the first copies)
        start = f'm["core.js"].start(document.getElementById("{root}"), m["{module}"]);'
        return "\n".join(
            [
                f'<div class="gfv-host"><style>{asset("views.css")}</style>',
                f'<div id="{root}" class="gfv gfv-{self.kind}"></div>',
                f'<script type="application/json" id="{root}-data">{data}</script>',
                *(f"<script>{script}</script>" for script in scripts),
                f"<script>(function (m) {{ {start} }})(window.glassformerViews.modules);</script>",
                "</div>",
            ]
        )

    def document(self) -> str:
        """A whole, self-contained HTML page holding this view."""
        title = html.escape(self.title or f"Glassformer {self.kind} view")
        return (
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{title}</title></head>\n<body>\n{self.html()}\n</body></html>\n"
        )

    def _repr_html_(self) -> str:
        return self.html()

    def save(self, path: str | Path) -> Path:
        """Write the standalone HTML file (atomically: temp file, fsync, rename); its path."""
        path = Path(path)
        write_text_atomic(path, self.document())
        return path
