"""The Trainer's `run_fn` and the plain modules behind it: input pipeline, augmentation, models, recipe,
precision, strategy, memory, export, warm start."""
