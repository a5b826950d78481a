"""The graph owner: one process per machine applies the ingestion log and publishes the live graph
that every inference worker maps (:mod:`serve.graph.owner`, supervised by :mod:`serve.graph.supervisor`)."""
