"""The package's version: include/cgjit.h's CGJ_VERSION_* (tests/python/test_cgjit.py checks it)."""

__version__ = "0.1.0"
