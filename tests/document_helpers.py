"""Office and PDF documents made in the test, for the converter and upload tests."""

from __future__ import annotations

import io


def pdf_bytes(lines: list[str]) -> bytes:
    """A minimal valid one-page PDF whose content stream shows ``lines`` (ASCII) in Helvetica."""
    shown = " ".join(f"({line}) Tj T*" for line in lines)
    stream = f"BT /F1 12 Tf 14 TL 72 720 Td {shown} ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> "
        "/Contents 5 0 R >>",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("ascii")
    xref = len(out)
    table = "".join(f"{offset:010d} 00000 n \n" for offset in offsets)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n{table}".encode("ascii")
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode("ascii")
    return out


def docx_bytes(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    """A DOCX (python-docx) with ``paragraphs`` and then, if given, a table of ``table``'s rows."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table):
            for cell, value in zip(row.cells, values):
                cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
