"""Implementation of the public ``tritonserver`` API (re-exported from the package)."""
