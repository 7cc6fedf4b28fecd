"""PDF, DOCX, PPTX, XLSX and HTML -> text, on documents made here; damaged ones give clear errors."""

from __future__ import annotations

import io

import pytest

from lightrag_ray.core.ids import doc_id
from lightrag_ray.index.converters import CONVERTED_SUFFIXES, ConversionError, to_text
from lightrag_ray.index.documents import list_input_files, parse_file
from tests.document_helpers import docx_bytes, pdf_bytes


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Harbour Survey"
    slide.placeholders[1].text = "Nora Vik counts ferries in Oslo."
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for (row, col), value in {(0, 0): "port", (0, 1): "ferries", (1, 0): "Oslo", (1, 1): "12"}.items():
        table.cell(row, col).text = value
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes() -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Staff"
    sheet.append(["name", "city", "joined"])
    sheet.append(["Pia Lund", "Malmo", 2019])
    book.create_sheet("Empty")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_pdf_text():
    data = pdf_bytes(["Greta Holm builds violins in Bergen.", "Her workshop faces the harbour."])
    assert to_text(".pdf", data) == "Greta Holm builds violins in Bergen.\nHer workshop faces the harbour."


def test_docx_paragraphs_and_tables_in_order():
    data = docx_bytes(["Ivo Marek paints lighthouses.", "", "He lives in Split."], [["year", "works"], ["2020", "7"]])
    assert to_text(".docx", data) == "Ivo Marek paints lighthouses.\nHe lives in Split.\nyear\tworks\n2020\t7"


def test_pptx_titles_bodies_and_tables():
    assert to_text(".pptx", pptx_bytes()) == "Harbour Survey\nNora Vik counts ferries in Oslo.\nport\tferries\nOslo\t12"


def test_xlsx_one_line_per_row_under_each_sheet_name():
    assert to_text(".XLSX", xlsx_bytes()) == "# Staff\nname\tcity\tjoined\nPia Lund\tMalmo\t2019\n# Empty"


def test_html_visible_text_only():
    page = ("<!doctype html><html><head><title>Paris</title><style>p {color: red}</style>"
            "<script>var hidden = 1;</script></head><body><h1>Paris</h1><p>Capital of France &amp; "
            "<b>largest</b> city.</p><ul><li>Louvre</li><li>Orsay</li></ul></body></html>")
    expected = "Paris\n\nParis\n\nCapital of France & largest city.\n\nLouvre\n\nOrsay"
    assert to_text(".html", page.encode("utf-8")) == expected


def test_html_in_a_declared_charset():
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>Café in Zürich</p></body></html>'
    assert to_text(".htm", page.encode("latin-1")) == "Café in Zürich"


@pytest.mark.parametrize("suffix, kind", [(".pdf", "PDF"), (".docx", "DOCX"), (".pptx", "PPTX"), (".xlsx", "XLSX")])
def test_damaged_document_is_a_clear_error(suffix, kind):
    damaged = pdf_bytes(["cut short"])[:40] if suffix == ".pdf" else docx_bytes(["x"])[:300]
    with pytest.raises(ConversionError, match=f"cannot read the file as {kind} .*damaged or not a valid {kind} file"):
        to_text(suffix, damaged)


def test_pdf_without_text_says_to_run_ocr():
    with pytest.raises(ConversionError, match=r"no text found in the PDF document \(a scanned PDF\? run OCR"):
        to_text(".pdf", pdf_bytes([]))


def test_encrypted_pdf_is_a_clear_error():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(["Secret plans of Erik Sand."]))))
    writer.encrypt(user_password="s3cret", algorithm="RC4-128")
    locked = io.BytesIO()
    writer.write(locked)
    with pytest.raises(ConversionError, match="encrypted PDF: it needs a password"):
        to_text(".pdf", locked.getvalue())


def test_binary_html_is_an_error_not_text():
    with pytest.raises(ConversionError, match="binary file"):
        to_text(".html", b"<html>\x00\x01\x02</html>")


def test_parse_file_turns_documents_into_rows_and_failures_into_error_rows():
    [pdf] = parse_file("in/a.pdf", pdf_bytes(["Greta Holm builds violins in Bergen."]), "https://example.org/a.pdf")
    assert pdf == {"doc_id": doc_id("Greta Holm builds violins in Bergen."), "file_path": "https://example.org/a.pdf",
                   "text": "Greta Holm builds violins in Bergen.", "error": None}
    [broken] = parse_file("in/broken.pdf", b"%PDF-1.4 not really")
    assert broken["file_path"] == "in/broken.pdf" and broken["text"] == ""
    assert broken["error"].startswith("cannot read the file as PDF")
    [image] = parse_file("photo.png", b"\x89PNG\r\n\x1a\n")
    assert image["error"].startswith("unsupported file type .png: convert it to text (")


def test_folder_listing_accepts_the_converted_types(tmp_path):
    for name in ["a.pdf", "b.DOCX", "c.pptx", "d.xlsx", "e.html", "f.htm", "g.doc", "h.ppt"]:
        (tmp_path / name).write_bytes(b"")
    found = list_input_files([str(tmp_path)])
    assert [p.rsplit("/", 1)[-1] for p in found.files] == ["a.pdf", "b.DOCX", "c.pptx", "d.xlsx", "e.html", "f.htm"]
    assert [e["error"].split(":")[0] for e in found.errors] == [f"unsupported file type {s}" for s in (".doc", ".ppt")]
    assert set(CONVERTED_SUFFIXES) == {".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm"}
