"""Stochastic arithmetic: round-off estimates for whole models from randomly rounded runs
(CESTAC, Monte Carlo arithmetic). Beside the chain: imports the formats, the errors and the
``Bounds`` type, never tracking, assertions or the plugin. Importing this package imports no
backend; :func:`stochastic_bounds` loads torch when called."""

from __future__ import annotations

from .run import stochastic_bounds

__all__ = ["stochastic_bounds"]
