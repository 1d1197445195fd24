"""The students' link of a class, as text, as an SVG QR code (for the teacher's screen or a
projector) and as a QR code in the terminal (for the command).

The link is the workshop's address with ``?lock=1&token=<the students' token>``: opening it
sets the students' token as the browser's cookie (`door/guard.py`) and opens the page in
teaching mode (``lock=1``: the walk revealed step by step, as the teacher shows it). The QR codes
are made by the ``qrcode`` library: its SVG is paths only (no text, no script), and the link
is in its modules, never in its markup.
"""

from __future__ import annotations

import io
from typing import TextIO
from urllib.parse import urlencode

import qrcode
import qrcode.image.svg


def students_link(address: str, token: str) -> str:
    """The students' link at ``address`` (a base URL ending in "/")."""
    return f"{address}?{urlencode({'lock': 1, 'token': token})}"


def qr_svg(link: str) -> str:
    """``link`` as an SVG QR code (paths, sized in millimetres; scaled by its viewBox)."""
    image = qrcode.make(link, image_factory=qrcode.image.svg.SvgPathImage, border=2)
    return image.to_string(encoding="unicode")


def print_qr(link: str, out: TextIO) -> None:
    """``link`` as a QR code of block characters, light on a dark terminal."""
    code = qrcode.QRCode(border=1)
    code.add_data(link)
    code.make(fit=True)
    text = io.StringIO()
    code.print_ascii(out=text, invert=True)
    out.write(text.getvalue())
    out.flush()
