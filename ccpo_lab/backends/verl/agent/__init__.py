"""The trainer side of the verl backend: what runs inside verl-agent's trainer process.

- :mod:`.trainer`: the entry point (``python -m ccpo_lab.backends.verl.agent.trainer``)
  that runs verl-agent's ``verl.trainer.main_ppo`` with the hooks installed;
- :mod:`.hooks` installs the import hook, :mod:`.patches` (and :mod:`.cpu`, the CPU
  adapter) hold the patches it applies; :mod:`.env`, :mod:`.io`, :mod:`.phi`,
  :mod:`.seeds` and :mod:`.weights` are their parts;
- :mod:`.advantage`: upstream verl (a ``DataProto`` adapter, and the ``gigpo`` / ``ccpo``
  entries of verl's advantage-estimator registry).

Torch-free at import, and so are the packages above it (the trainer imports these modules
with only what :mod:`ccpo_lab.backends.verl.trainer_env` lists): import the submodule you
need.
"""
