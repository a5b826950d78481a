"""The neural network: encoders, the heterogeneous GNN, task heads and ranking.

It reads :class:`models.nn.inputs.ModelInputs` and imports no storage or sampling: what the inputs
mean is fixed by :mod:`models.feature_definitions`.
"""
