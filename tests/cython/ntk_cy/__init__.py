"""Test kernels for numthunk.cython, compiled by tests/test_cython.py."""
