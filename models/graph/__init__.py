"""Graph inputs: temporal sampling, seed-time features and purchase history, read from the store and
gathered into the :class:`models.nn.inputs.ModelInputs` the network consumes; padding to buckets."""
