"""Diagnostics that sit beside the bounds chain: accumulation orders (FPRev, ``order``) and
where non-finite values appear (GPU-FPX, ``nonfinite``); cause isolation (CIEL) and
matrix-multiply probes (FTTN) are to come.

Each diagnostic lives in its own module and is reached through the package root
(``fp.reveal_order``, ``fp.order``, ``fp.watch_nonfinite``); nothing here is imported eagerly.
"""
