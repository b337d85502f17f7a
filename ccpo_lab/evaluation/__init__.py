"""``ccpo-lab evaluate``: re-score a sweep's checkpoints on one common draw of games.

Modules, one job each:

* :mod:`.spec` -- what one evaluation is (checkpoint step, split, games, repeats,
  temperature, draw) and its key; the request's selectors, checked;
* :mod:`.backend` -- the contract a backend's ``evaluate`` module fulfils, and finding it;
* :mod:`.plan` -- from a request and a sweep directory to the evaluations each run needs
  (refusing bad input before anything is written) and what a launch does with each;
* :mod:`.job` -- executing one evaluation job (called by
  :func:`ccpo_lab.runs.execute.execute_run` for a job directory): resumable by repeat;
* :mod:`.launch` -- submitting the jobs through the sweep's own launcher, waiting;
* :mod:`.track` -- the jobs' status and cancelling them (``status``, ``cancel``).

The files are :mod:`ccpo_lab.runs.evals`'s; the report's tables are
:mod:`ccpo_lab.report.evaluation`'s, the variance decomposition :mod:`ccpo_lab.stats.variance`'s.
"""
