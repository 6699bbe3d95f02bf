"""Diagnostics that sit beside the bounds chain: accumulation orders (FPRev), and, later, non-finite
values (GPU-FPX), cause isolation (CIEL) and matrix-multiply probes (FTTN).

Each diagnostic lives in its own module (``order`` for FPRev) and is reached through the package
root (``fp.reveal_order``, ``fp.order``); nothing here is imported eagerly.
"""
