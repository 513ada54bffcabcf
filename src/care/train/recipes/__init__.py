"""Recipes: sequences of engine stages that train CARE, its students and the paper's baselines, with their
data (alignment rows, mined negatives), presets, validation, sweeps and the query budget."""
