"""Training: ``engine/`` (one loop over any stage: config, data, towers, losses, teacher cache, checkpoints)
and ``recipes/`` (CARE's recipe, students, baselines, sweeps, presets, validation, the query budget), which
uses the engine and never the other way round (``tests/test_layers.py``); ``cli`` is ``care train``."""
