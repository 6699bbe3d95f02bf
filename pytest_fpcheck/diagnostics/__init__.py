"""Diagnostics that sit beside the bounds chain: accumulation orders (FPRev, ``order``), where
non-finite values appear (GPU-FPX, ``nonfinite``), how a matmul rounds (FTTN, ``probe``) and
which operations cause an inconsistency (CIEL, ``isolate``).

Each diagnostic lives in its own module and is reached through the package root
(``fp.reveal_order``, ``fp.order``, ``fp.watch_nonfinite``, ``fp.probe_matmul``,
``fp.isolate``); nothing here is imported eagerly.
"""
