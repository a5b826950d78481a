"""The synthetic H&M generator: catalog, customers, shopping behaviour with planted signal, CSV writing."""
