"""Training CARE: losses, cross-device negatives, training-data format, Stage I alignment data, stages.

Modules are imported on demand (``from care.train.losses import InfoNCELoss``); this package file
imports nothing heavy so that ``care --help`` and data-only tools stay fast.
"""
