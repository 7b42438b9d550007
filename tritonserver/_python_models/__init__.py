"""Python models in-process: python-backend models (model.py with
``TritonPythonModel``) run in this interpreter on the core's model-instance
threads, without the python backend's stub process.

- ``pb_utils``: the ``triton_python_backend_utils`` module such models import
  (registered under that name in ``sys.modules`` when one loads);
- ``_runtime``: loading model.py, and one instance's initialize / execute /
  finalize, called by the extension's backend (cpp/python_backend/python_backend.cc).
"""
