"""``training.fit``: train, select on validation, test against the baselines, write bundles."""
