"""The Triton backend of tracking: an instrumented interpreter (issue 4, RENDER IV-A-2).

``scope`` decides when the interpreter of the installed triton is instrumented (while a
``fp.track()`` or ``fp.watch_nonfinite()`` block is open), ``hooks`` holds the instrumentation
and reports to the subscribers of :mod:`..core.observe`, ``launch`` the state of the launch in
progress; ``rules`` holds the interval rules of builder operations by family, ``reduce`` those
of reductions and scans, ``memory_hooks`` those of loads, stores and atomics over ``memory``
(the bounds of the memory a launch reads and writes), ``handles`` what a value carries beside its
data, and ``errors_model`` the documented error of each approximate operation.
"""
