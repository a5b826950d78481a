"""Storage: the snapshot's tables and time-sorted CSR adjacency, memory-mapped from disk.

The bottom layer of :mod:`models`: it knows files and arrays, nothing of features or the network.
"""
