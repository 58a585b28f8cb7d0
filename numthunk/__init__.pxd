# Marks numthunk as a Cython package: Cython 3.0.x resolves
# `from numthunk cimport capi` only in a directory with an __init__.pxd
# (later releases also take __init__.py). Declarations are in capi.pxd and
# dlpack.pxd.
