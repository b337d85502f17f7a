"""Stand-in modules for what a CPU trainer environment cannot have (``torchvision``).

Not imported as part of ccpo-lab: the CPU adapter (:mod:`ccpo_lab.backends.verl.agent.cpu`)
appends this folder to ``sys.path`` where the real module is missing.
"""
