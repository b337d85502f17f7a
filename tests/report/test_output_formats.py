"""The report's formats are one table (``report.output.REPORT_FORMATS``): ``--format``'s
choices, its help and what ``--out`` writes all follow it."""

from __future__ import annotations

from ccpo_lab.cli.report import FORMAT_HELP, FORMAT_NAMES
from ccpo_lab.report.output import FORMATS, REPORT_FORMATS


def test_the_cli_lists_the_tables_formats_in_its_order() -> None:
    assert FORMAT_NAMES == FORMATS == tuple(f.name for f in REPORT_FORMATS)
    assert FORMAT_HELP.startswith("md | csv | latex | json (")


def test_every_format_writes_files_of_its_own() -> None:
    names = [f.name for f in REPORT_FORMATS]
    assert len(set(names)) == len(names)
