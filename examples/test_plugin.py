"""The fixture and the per-test marker: settings and a reproducible per-test seed."""

import numpy as np
import pytest


@pytest.mark.fpcheck(alpha=0.05)
def test_settings_follow_the_marker(fpcheck):
    assert fpcheck.settings.alpha == 0.05


def test_a_reproducible_random_stream(fpcheck):
    rng = np.random.default_rng(fpcheck.seed)
    x = rng.standard_normal(1000).astype(np.float32)
    half = fpcheck.formats.round_to(x, "float16")
    assert np.abs(half - x).max() <= fpcheck.format_of("float16").unit_roundoff * np.abs(x).max()
