"""The report tests' hand-computed study (tests/report/conftest.py), for the folder tests."""

from tests.report.conftest import _study_template, study

__all__ = ["_study_template", "study"]
