"""The examples run Triton kernels on the CPU through Triton's interpreter, and their Hypothesis
tests without a time limit: on a loaded or slow machine (a shared CI runner, a laptop on
battery) one example, or drawing its inputs, takes longer than Hypothesis's default 200 ms
deadline and its input-generation health check allow, which is not what these examples test."""

import os

from hypothesis import HealthCheck, settings

os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile("examples", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("examples")
