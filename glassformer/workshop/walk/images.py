"""A vision model's input in the workshop: an image the page or a script sends, or a held-out digit.

A pass request names its image with one of two fields (`request_types.PassRequest`)::

    pixels   the image, every value in [0, 1] (the scale the library reads, `glassformer.inputs`):
             rows of numbers, H x W for a model of one channel or C x H x W (the library's
             layout); or, for a large image, a packed array, the typed array the answers carry
             (`arrays.py`): {"dtype": "float32" | "uint8", "shape": [C, H, W], "data": base64},
             a uint8 byte q meaning q / 255 (what `arrays.pack_unit` writes)
    sample   the index of a held-out image of scikit-learn's 8 x 8 digits, split as the
             ``vit-digits`` preset splits them (`glassformer.train.images.digits_split`, its
             defaults: a quarter held out, split_seed 0): what a model trained there never saw

A 224 x 224 x 3 image is 150,528 numbers: as rows of JSON numbers it passes the 1 MiB body
limit (`http.MAX_BODY_BYTES`), packed as uint8 it is 200 KB of base64, as float32 800 KB.
`read_pixels` checks the form, the numbers and their range (a request type's validator);
`image_tensor` checks the shape against the model's (C, H, W) and gives the 1 C H W tensor
`lm.trace` reads.

>>> read_pixels([[0, 0.5], [1, 0.25]]).tolist()
[[0.0, 0.5], [1.0, 0.25]]
>>> read_pixels([[0, float("nan")]])
Traceback (most recent call last):
    ...
ValueError: [0][1] is nan: every pixel must be a finite number in [0, 1]
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
from typing import Any

import numpy as np
import torch

from glassformer.inputs import patch_labels
from glassformer.train.images import DIGITS, DIGITS_IMAGE, digits_split
from glassformer.workshop.walk.arrays import pack

MAX_SIDE = 1024  # the most rows, columns or channels an image sent may have
PACKED_DTYPES = {"float32": "<f4", "uint8": "u1"}
PACKED_KEYS = {"dtype", "shape", "data", "compression", "scale"}  # what `arrays.pack` / `pack_unit` write
FORMS = (
    "an image: rows of numbers in [0, 1] (H x W, or C x H x W), or a packed array "
    '{"dtype": "float32" | "uint8", "shape": [C, H, W], "data": base64}'
)
DIGITS_SOURCE = "scikit-learn's 8 x 8 digits, held out as the vit-digits preset splits them"


def read_pixels(value: Any) -> np.ndarray:
    """``value`` (rows of numbers, or a packed array) as a float32 array of 2 or 3 axes, every
    value finite and in [0, 1]; a ValueError that names the first problem otherwise."""
    if isinstance(value, dict):
        return _unpacked(value)
    if not isinstance(value, list):
        raise ValueError(f"must be {FORMS}; got {type(value).__name__}")
    shape = _list_shape(value)
    flat = np.empty(math.prod(shape), dtype=np.float32)
    for i, (where, number) in enumerate(_numbers(value)):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise ValueError(f"{where} is {number!r:.40}, not a number: {FORMS}")
        _check_pixel(where, number)
        flat[i] = number
    return flat.reshape(shape)


def _list_shape(value: list) -> tuple[int, ...]:
    """The sides of rows of numbers (H W, or C H W), each list as long as its neighbours."""
    shape: list[int] = []
    level: Any = value
    while isinstance(level, list):
        if not level:
            raise ValueError(f"{'[0]' * len(shape) or 'the image'} is empty: {FORMS}")
        shape.append(len(level))
        level = level[0]
    if len(shape) not in (2, 3):
        raise ValueError(f"has {len(shape)} axes; {FORMS}")
    if max(shape) > MAX_SIDE:
        raise ValueError(f"has a side of {max(shape):,}; the workshop reads images of at most {MAX_SIDE:,}")

    def check(items: Any, depth: int, where: str) -> None:
        if not isinstance(items, list) or len(items) != shape[depth]:
            got = (
                f"{len(items)} item{'s' * (len(items) != 1)}" if isinstance(items, list) else repr(items)[:40]
            )
            raise ValueError(
                f"{where or 'the image'} holds {got} where its neighbours hold {shape[depth]}: {FORMS}"
            )
        if depth + 1 < len(shape):
            for i, item in enumerate(items):
                check(item, depth + 1, f"{where}[{i}]")

    check(value, 0, "")
    return tuple(shape)


def _numbers(value: list, where: str = ""):
    """(where, number) for every number of nested lists, in order."""
    for i, item in enumerate(value):
        if isinstance(item, list):
            yield from _numbers(item, f"{where}[{i}]")
        else:
            yield f"{where}[{i}]", item


def _check_pixel(where: str, number: float) -> None:
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"{where} is {number}: every pixel must be a finite number in [0, 1]")
    if not 0 <= number <= 1:  # an int compares exactly, even one past float's range
        shown = f"{number:g}" if isinstance(number, float) or number.bit_length() < 64 else "a huge integer"
        raise ValueError(
            f"{where} is {shown}, outside [0, 1]: every pixel is a number from 0 to 1; divide 0..255 by 255"
        )


def _unpacked(packed: dict[str, Any]) -> np.ndarray:
    """A packed array (`arrays.pack`, `arrays.pack_unit`) as float32 C H W."""
    unknown = sorted(set(packed) - PACKED_KEYS)
    if unknown or not {"dtype", "shape", "data"} <= set(packed):
        raise ValueError(
            f"a packed image has the keys dtype, shape and data; got {', '.join(sorted(packed))}"
        )
    dtype, shape, data = packed["dtype"], packed["shape"], packed["data"]
    if dtype not in PACKED_DTYPES:
        raise ValueError(f"dtype {dtype!r:.40}: a packed image is float32 or uint8 (q / 255)")
    if packed.get("compression") is not None:
        raise ValueError("a packed image is sent uncompressed (compression null)")
    if dtype == "uint8" and packed.get("scale", 1 / 255) != 1 / 255:
        raise ValueError("a uint8 image means q / 255: its scale, if given, is 1/255")
    if (
        not isinstance(shape, list)
        or len(shape) != 3
        or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_SIDE for n in shape)
    ):
        raise ValueError(
            f"shape {shape!r:.60}: a packed image's shape is [C, H, W], each from 1 to {MAX_SIDE}"
        )
    if not isinstance(data, str):
        raise ValueError("data is base64 text")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("data is not base64") from None
    itemsize = np.dtype(PACKED_DTYPES[dtype]).itemsize
    needed = math.prod(shape) * itemsize
    if len(raw) != needed:
        raise ValueError(f"data holds {len(raw):,} bytes; shape {shape} of {dtype} needs {needed:,}")
    values = np.frombuffer(raw, dtype=PACKED_DTYPES[dtype]).astype(np.float32).reshape(shape)
    if dtype == "uint8":
        return values / 255
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 1))
    if bad.size:
        index = np.unravel_index(bad[0], values.shape)
        _check_pixel("".join(f"[{int(i)}]" for i in index), float(values[index]))
    return values


# held-out digits -------------------------------------------------------------------------
@functools.cache
def held_out_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out digits (n 1 8 8 in [0, 1]) and their labels (n), read once."""
    split = digits_split()
    return split.test_images, split.test_labels


def reads_digits(config) -> bool:
    """Whether a model reads images of the digits' shape (one channel, 8 x 8)."""
    return (
        config.vision
        and config.n_channels == DIGITS_IMAGE["n_channels"]
        and config.image_size == DIGITS_IMAGE["image_size"]
    )


def samples(config) -> dict[str, Any]:
    """The held-out digits a model of ``config`` can read, for the page's picker:
    {"count", "images": packed n C H W, "labels": ["7", ...], "source"}; none (count 0, with
    the reason) for a model whose images are not 1 x 8 x 8."""
    if not reads_digits(config):
        return {"count": 0, "images": None, "labels": [], "source": _no_samples(config)}
    images, labels = held_out_digits()
    return {
        "count": len(images),
        "images": pack(images),
        "labels": [DIGITS[int(k)] for k in labels],
        "source": DIGITS_SOURCE,
    }


def _no_samples(config) -> str:
    if not config.vision:
        return "this model reads text, not images"
    side = config.image_size
    return (
        f"the held-out samples are 1 x 8 x 8 digits; this model reads "
        f"{config.n_channels} x {side} x {side} images: send pixels"
    )


# one image for one model --------------------------------------------------------------
def image_tensor(config, pixels: np.ndarray | None = None, sample: int | None = None) -> torch.Tensor:
    """The image a request names, as the 1 C H W tensor the model reads; a ValueError that says
    what the model takes when it is no image of its shape."""
    c, side = config.n_channels, config.image_size
    wanted = f"{c} x {side} x {side} (C x H x W{f', or {side} x {side}' if c == 1 else ''})"
    if pixels is not None and sample is not None:
        raise ValueError("send pixels or sample, not both: one image per pass")
    if sample is not None:
        if not reads_digits(config):
            raise ValueError(f"sample: {_no_samples(config)}")
        images, _ = held_out_digits()
        if not 0 <= sample < len(images):
            raise ValueError(
                f"sample {sample} is out of range: the held-out digits are {len(images)} images "
                f"(0..{len(images) - 1})"
            )
        return images[sample][None].clone()
    if pixels is None:
        raise ValueError(
            f"this is a vision model: send pixels (an image of {wanted}, numbers in [0, 1]) or sample "
            "(a held-out digit)"
        )
    got = " x ".join(str(n) for n in pixels.shape)
    if pixels.ndim == 2 and c == 1:
        pixels = pixels[None]
    if pixels.shape != (c, side, side):
        raise ValueError(f"pixels: this model reads images of {wanted}; got {got}")
    return torch.from_numpy(np.ascontiguousarray(pixels))[None]


def image_payload(config, image: torch.Tensor, sample: int | None = None) -> dict[str, Any]:
    """The image of a walk, for the page to draw: its pixels (C H W), its patch size and grid,
    its patches' labels, and the held-out sample it is (with its true label) if one."""
    _, labels = held_out_digits() if sample is not None else (None, None)
    side = config.image_size // config.patch_size
    return {
        "pixels": pack(image[0]),  # C H W
        "patch_size": config.patch_size,
        "grid": [side, side],  # patches down, across: row by row, as embed.patches
        "patches": patch_labels(config)[1:],
        "sample": sample,
        "label": None if sample is None else DIGITS[int(labels[sample])],
    }
