"""Export and import of a deployment's nodes (JSONL, one record per line), and the import of
mem0 memories. See docs/export-import.md."""

from ctxpipe.portability.exporter import ExportReport, export_records, last_uri, write_export
from ctxpipe.portability.importer import (
    Importer,
    ImportFileError,
    ImportReport,
    parse_numbered,
    read_lines,
)
from ctxpipe.portability.mem0 import mem0_parser
from ctxpipe.portability.records import FORMAT_VERSION, NodeRecord, RecordError, SessionRecord
from ctxpipe.portability.selection import Selection

__all__ = [
    "FORMAT_VERSION",
    "ExportReport",
    "ImportFileError",
    "ImportReport",
    "Importer",
    "NodeRecord",
    "RecordError",
    "Selection",
    "SessionRecord",
    "export_records",
    "last_uri",
    "mem0_parser",
    "parse_numbered",
    "read_lines",
    "write_export",
]
