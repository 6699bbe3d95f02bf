"""Tracking: the instrumentation that feeds the interval engine, one backend beside the other
over a shared core.

* :mod:`.core`: the side store, the precision policy, the interposition layer shared with the
  non-finite watch and isolation, and the subscription interface (:mod:`.core.observe`);
* :mod:`.torch`: the PyTorch dispatch mode, its substitutes and its rules by family;
* :mod:`.triton`: the instrumented Triton interpreter;
* :mod:`.track`: the public entry points (``track``, ``bounds_of``, ``roundoff_bounds``,
  ``hull``).

Importing a backend imports torch; this package itself imports nothing.
"""
