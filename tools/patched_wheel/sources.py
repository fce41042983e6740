"""Python sources as bytes: decoded in every encoding the language allows, and encoded back.

A module may start with a UTF-8 byte order mark or declare its encoding in a coding cookie
(PEP 263). :func:`decode_source` reads either as Python does, through
:func:`tokenize.detect_encoding`, and :func:`encode_source` writes the text back in the same
encoding, byte order mark included, so that the lines the splice keeps keep their bytes.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

from patched_wheel import PatchError

__all__ = ["DecodedSource", "decode_source", "encode_source"]


@dataclass(frozen=True)
class DecodedSource:
    """A module's text, and the encoding (``utf-8-sig`` for a byte order mark) it came in."""

    text: str
    encoding: str


def decode_source(data: bytes, what: str) -> DecodedSource:
    """Decode a module's bytes as Python would.

    Raises:
        PatchError: For an unknown encoding, or bytes that its encoding cannot decode.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return DecodedSource(data.decode(encoding), encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        raise PatchError(
            f"{what} cannot be decoded as Python source ({error}); use the official file"
        ) from None


def encode_source(text: str, encoding: str, what: str) -> bytes:
    """Encode ``text`` in ``encoding`` (as :func:`decode_source` found it).

    Raises:
        PatchError: If the overlay brought characters the module's encoding cannot hold.
    """
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as error:
        raise PatchError(
            f"{what}: the overlay's text cannot be written in the module's encoding "
            f"{encoding} ({error.reason} at {error.start}); keep the overlay ASCII"
        ) from None
