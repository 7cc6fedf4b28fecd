"""Turn a binary or markup document (PDF, DOCX, PPTX, XLSX, HTML) into plain text, offline.

``to_text`` returns the text of one file or raises ConversionError with a message that
says why it has none (damaged, encrypted, no text layer) and what to do.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import Any

CONVERTED_SUFFIXES = (".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm")
_CHARSET = re.compile(rb"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


class ConversionError(ValueError):
    """A document whose text cannot be extracted; the message says why and what to do."""


def _pdf(data: bytes) -> Iterator[str]:
    from pypdf import PasswordType, PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
        raise ConversionError("encrypted PDF: it needs a password; save a copy without one and index that")
    for page in reader.pages:
        yield page.extract_text() or ""


def _docx(data: bytes) -> Iterator[str]:
    import docx
    from docx.table import Table

    for block in docx.Document(io.BytesIO(data)).iter_inner_content():
        if isinstance(block, Table):
            yield from ("\t".join(cell.text for cell in row.cells) for row in block.rows)
        else:
            yield block.text


def _shape_text(shapes: Any) -> Iterator[str]:
    """Text of slide shapes: text frames, tables and the shapes inside groups."""
    for shape in shapes:
        if shape.has_text_frame:
            yield shape.text_frame.text
        elif shape.has_table:
            yield from ("\t".join(cell.text for cell in row.cells) for row in shape.table.rows)
        elif hasattr(shape, "shapes"):  # a group
            yield from _shape_text(shape.shapes)


def _pptx(data: bytes) -> Iterator[str]:
    from pptx import Presentation

    for slide in Presentation(io.BytesIO(data)).slides:
        yield from _shape_text(slide.shapes)


def _xlsx(data: bytes) -> Iterator[str]:
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        for sheet in workbook.worksheets:
            yield f"# {sheet.title}"
            for row in sheet.iter_rows(values_only=True):
                yield "\t".join("" if value is None else str(value) for value in row).rstrip("\t")
    finally:
        workbook.close()


class _HTMLText(HTMLParser):
    """Collects the visible text of an HTML page, one line per block element."""

    SKIP = {"script", "style", "noscript", "template"}
    BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
              "blockquote", "pre", "table", "ul", "ol", "dt", "dd", "title", "header", "footer"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def _decode_html(data: bytes) -> str:
    """HTML bytes -> str: UTF-8, else the charset the page declares."""
    if b"\x00" in data[:8192]:
        raise ConversionError("binary file (NUL bytes found), not an HTML page")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        declared = _CHARSET.search(data[:4096])
        if declared is None:
            raise ConversionError("HTML page is not UTF-8 and declares no charset: re-encode it as UTF-8") from None
        return data.decode(declared.group(1).decode("ascii"), errors="replace")


def _html(data: bytes) -> Iterator[str]:
    parser = _HTMLText()
    parser.feed(_decode_html(data))
    parser.close()
    yield "".join(parser.parts)


_CONVERTERS: dict[str, tuple[str, Callable[[bytes], Iterator[str]]]] = {
    ".pdf": ("PDF", _pdf), ".docx": ("DOCX", _docx), ".pptx": ("PPTX", _pptx), ".xlsx": ("XLSX", _xlsx),
    ".html": ("HTML", _html), ".htm": ("HTML", _html),
}


def _tidy(pieces: Iterator[str]) -> str:
    """Lines without trailing blanks, at most one empty line in a row."""
    lines = [line.rstrip() for piece in pieces for line in piece.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def to_text(suffix: str, data: bytes) -> str:
    """The plain text of a document of type ``suffix`` (one of CONVERTED_SUFFIXES).

    Raises ConversionError for a damaged, encrypted or text-less document.
    """
    kind, convert = _CONVERTERS[suffix.lower()]
    try:
        text = _tidy(convert(data))
    except (ConversionError, ImportError):  # a clear reason already, or a broken install
        raise
    except Exception as exc:  # each parser has its own errors for a damaged file
        reason = str(exc).strip() or type(exc).__name__
        raise ConversionError(
            f"cannot read the file as {kind} ({reason}): it is damaged or not a valid {kind} file"
        ) from None
    if not text:
        hint = " (a scanned PDF? run OCR on it first)" if kind == "PDF" else ""
        raise ConversionError(f"no text found in the {kind} document{hint}")
    return text
