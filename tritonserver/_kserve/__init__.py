"""The KServe v2 inference protocol over HTTP, served from an embedded
Server: request/response bodies (``codec``) and the routes (``routes``).
Used by ``tritonserver.ray``; it needs nothing but NumPy."""
