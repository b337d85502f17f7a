"""Which semantics a run computed, as its records say it (issue 30)."""

from __future__ import annotations

from ccpo_lab.runs.wandb_run import semantics_of


def test_a_record_says_its_semantics_and_an_old_one_reads_as_described() -> None:
    assert semantics_of({"estimator": {"name": "ccpo", "params": {"semantics": "as-run"}}}) \
        == {"semantics": "as-run"}
    # run.json written before the parameter existed: the method as described
    assert semantics_of({"estimator": {"name": "ccpo", "params": {"gamma": 0.95}}}) == {
        "semantics": "described"}
    assert semantics_of({"imported": True}) == {}
