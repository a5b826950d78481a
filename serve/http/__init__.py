"""The HTTP server: the LitServe app and its task APIs, admission, batching, request and answer
bodies, errors, metrics, draining on shutdown, and the bundles it serves."""
