"""Round-off bounds for Triton kernels: an instrumented interpreter (issue 4, RENDER IV-A-2).

``scope`` decides when the interpreter of the installed triton is instrumented (while a
``fp.track()`` or ``fp.watch_nonfinite()`` block is open), ``hooks`` holds the instrumentation;
``rules`` holds the interval rule of each builder operation, ``reduce`` those of reductions and
scans, ``memory`` the bounds of the memory a launch reads and writes, ``handles`` what a value
carries beside its data, and ``errors_model`` the documented error of each approximate operation.
"""
