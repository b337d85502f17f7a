"""``ccpo-lab report``: what a sweep shows, and what it does not.

* (a sweep's runs and manifest: :class:`ccpo_lab.runs.layout.SweepDir`, read through
  :func:`ccpo_lab.runs.sweep_runs.load_sweep_runs`)
* :mod:`.collect` -- reading runs quickly (config sections, selected metric lines).
* :mod:`.settings` -- options over the sweep's ``analysis`` over defaults.
* :mod:`.numbers` -- helpers every part uses (JSON-safe numbers, rates, RNG streams).
* :mod:`.model` -- the typed report: frozen rows for runs, arms, comparisons; notes.
* :mod:`.analysis` -- per run, per arm (:mod:`ccpo_lab.stats`); :func:`build_report`.
* :mod:`.comparisons` -- every arm against the reference: one test per row.
* :mod:`.baselines` -- published numbers and when they are comparable.
* :mod:`.tables` (cells and Markdown), :mod:`.latex`, :mod:`.export` (JSON, CSV),
  :mod:`.plots` (figures), :mod:`.output` (stdout and ``--out``).

Imports go one way (numbers/model <- analysis, comparisons <- tables/latex/plots <- output);
main's ``tests/test_architecture.py`` checks there is no cycle.
"""
