"""Launcher kinds as configuration sees them: each built-in kind's settings dataclass
(:mod:`.inline`, :mod:`.local`, :mod:`.slurm`) and the table of kinds (:mod:`.kinds`), which
names every launcher by a ``"module:Class"`` string resolved only when launching."""
