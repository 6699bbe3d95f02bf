"""The examples run Triton kernels on the CPU through Triton's interpreter."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
