"""Publishing a study's arm: the upload-ready folder beside its model card and the push.

- :mod:`.sources`: the weights each backend keeps in a run directory, by training step;
- :mod:`.choose`: which run and checkpoint the folder publishes (the rule is stated in the
  card and the manifest), and its per-step revisions;
- :mod:`.export`: one checkpoint's weights written in a publishable form;
- :mod:`.folder`: the folder (card, weights, ``revisions/step_N``, ``manifest.json``),
  assembled beside its destination and renamed into place;
- :mod:`.push`: the upload with ``huggingface_hub`` (imported only there, on use).
"""
