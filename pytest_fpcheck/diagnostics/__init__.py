"""Diagnostics that sit beside the bounds chain: accumulation orders (FPRev, ``order``), where
non-finite values appear (GPU-FPX, ``nonfinite``), how a matmul rounds (FTTN, ``probe``) and
which operations cause an inconsistency (CIEL, ``isolate``).

Each diagnostic is a subpackage whose ``__init__`` holds its public names and lists its modules;
they are reached through the package root (``fp.reveal_order``, ``fp.order``,
``fp.watch_nonfinite``, ``fp.probe_matmul``, ``fp.isolate``); nothing here is imported eagerly.
``probe`` builds on ``order`` (it reveals the matmul's order with FPRev); no other diagnostic
imports another.
"""
