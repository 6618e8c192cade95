"""Small PDFs written by hand for the tests: one text line (or a few) per page, in
Helvetica, with a correct cross-reference table, so pypdf reads them as any PDF."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "encrypted_pdf_of",
    "nested_pdf",
    "operator_flood_pdf",
    "pdf_bomb",
    "pdf_of",
    "shared_stream_pdf",
]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_of(pages: Sequence[str]) -> bytes:
    """A PDF whose page ``n`` shows the lines of ``pages[n]``."""
    objects: list[bytes] = []
    count = len(pages)
    # 1: catalog, 2: pages, 3: font, then (page, content) pairs.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, text in enumerate(pages):
        content_id = 5 + 2 * index
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        lines = [f"({_escape(line)}) Tj T*" for line in text.splitlines()]
        stream = ("BT /F1 11 Tf 14 TL 50 740 Td " + " ".join(lines) + " ET").encode("latin-1")
        objects.append(
            b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream"
        )
    return pdf_file(objects)


def encrypted_pdf_of(pages: Sequence[str], password: str = "secret") -> bytes:
    """:func:`pdf_of`'s PDF, encrypted by pypdf's writer (AES-256) with ``password``."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_of(pages))))
    writer.encrypt(password, algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_bomb(decoded_bytes: int = 100 * 1024 * 1024) -> bytes:
    """A one-page PDF whose content stream is a FlateDecode stream of a few hundred KB
    that inflates to ``decoded_bytes`` (spaces, then a line of text)."""
    import zlib

    compressor = zlib.compressobj(9)
    block = b" " * (1024 * 1024)
    compressed = bytearray()
    for _ in range(decoded_bytes // len(block)):
        compressed += compressor.compress(block)
    compressed += compressor.compress(b"BT /F1 11 Tf 50 740 Td (Boom) Tj ET")
    compressed += compressor.flush()
    stream = bytes(compressed)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Length "
        + str(len(stream)).encode()
        + b" /Filter /FlateDecode >>\nstream\n"
        + stream
        + b"\nendstream",
    ]
    return pdf_file(objects)


_HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_PAGE = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
    b"/Resources << /Font << /F1 3 0 R >> >> >>"
)


def _stream(data: bytes) -> bytes:
    return b"<< /Length " + str(len(data)).encode() + b" >>\nstream\n" + data + b"\nendstream"


def shared_stream_pdf(pages: int = 500, stream_bytes: int = 60_000) -> bytes:
    """Issue 46's slow PDF: ``pages`` pages that all draw one content stream of about
    ``stream_bytes`` of short text shows (each page's text is some 11,000 characters and
    6,000 operators): some 60 KB on the wire, minutes of CPU to read whole."""
    shows = bytearray()
    number = 0
    while len(shows) < stream_bytes:
        shows += f"BT /F1 11 Tf {number % 500} {number % 700} Td (word{number}) Tj ET\n".encode()
        number += 1
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        _HELVETICA,
        _stream(bytes(shows)),
        *([_PAGE % 4] * pages),
    ]
    return pdf_file(objects)


def operator_flood_pdf(stream_bytes: int = 600_000) -> bytes:
    """One page whose content stream is a line of text, then ``stream_bytes`` of
    operators that draw nothing (``cm``, 15 bytes each)."""
    flood = b"BT /F1 11 Tf 50 740 Td (Flood) Tj ET\n" + b"1 0 0 1 0 0 cm\n" * (stream_bytes // 15)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _HELVETICA,
        _PAGE % 5,
        _stream(flood),
    ]
    return pdf_file(objects)


def nested_pdf(depth: int = 200_000) -> bytes:
    """One page whose content stream shows text in ``depth`` nested arrays: 400 KB that
    recurse past any reader's stack."""
    nested = b"BT /F1 11 Tf " + b"[" * depth + b"]" * depth + b" TJ ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _HELVETICA,
        _PAGE % 5,
        _stream(nested),
    ]
    return pdf_file(objects)


def pdf_file(objects: Sequence[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, the first the catalog), its
    cross-reference table and trailer written by hand."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return bytes(out)
