"""Runtime: compilation and its cache, the training step, bundles on disk, inference and quality gates.

The top layer of :mod:`models`: it ties the store, the graph inputs and the network together.
"""
