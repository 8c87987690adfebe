"""Text that holds bytes no codec could decode (a folder name that is not UTF-8, read by Python as lone
surrogates U+DC80-U+DCFF): written out as those very bytes, so a printed path or a pasted command names the
folder that exists; any other lone surrogate (a damaged file's \\ud800 escape) as its escape.

    stream.reconfigure(errors=RAW_OR_ESCAPE)                  # stdout/stderr of every command
    text.encode("utf-8", errors=RAW_OR_ESCAPE)                # a text file of ours
"""
from __future__ import annotations

import codecs

RAW_OR_ESCAPE = "sweeper.raw_or_escape"


def _raw_or_escape(error: UnicodeError) -> tuple[bytes | str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = b""
    for c in error.object[error.start:error.end]:
        code = ord(c)
        out += bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else c.encode("ascii", "backslashreplace")
    return out, error.end


codecs.register_error(RAW_OR_ESCAPE, _raw_or_escape)
