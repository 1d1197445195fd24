"""Training: corpora and synthetic tasks, batching, the trainer, schedules, metrics."""
