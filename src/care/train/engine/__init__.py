"""The training engine: one loop (accelerate) over any stage — its config, data loaders, towers, losses,
teacher cache, checkpoints and cross-device negatives. It knows nothing of recipes."""
