"""Real models end to end under strict tracking (issue 19): the forward pass, ``loss.backward()``
and one optimizer step, with bounds on the loss, every gradient and every updated parameter, and
no ``UnsupportedOperation`` anywhere. Small configurations, random weights, no downloads
(:mod:`tests.models.zoo`).

The CI slice runs every model in float32 with AdamW (the foreach default) and two in bfloat16
and float16 (SGD and fused AdamW in float16); the rest (each dtype, SGD, Adam, fused Adam/AdamW)
are marked slow.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import pytest_fpcheck as fp

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from .zoo import MODELS, build, loss_of  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "adam_fused": lambda p: torch.optim.Adam(p, lr=1e-3, fused=True),
    "adamw_fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
    # CUDA's default; on the CPU the default is the single-tensor loop
    "adamw_foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
}

#: models whose float32 loss enclosure is still the whole line, and why
LOOSE = {
    "resnet": "each training batch norm multiplies its input's width by its first-order worst "
    "case, about (2 + |y|^2) / sigma, compounded over eight blocks until the classifier's "
    "enclosure overflows (docs/roundoff.md, covered operations)"
}

FAST = {("float32", "adamw"), ("bfloat16", "adamw"), ("float16", "sgd"), ("float16", "adamw_fused")}
FAST |= {("bfloat16", "adamw_foreach")}
FAST_LOW_PRECISION = {"nanogpt", "gpt2"}


def cases() -> list[object]:
    found = []
    for name in MODELS:
        for dtype in DTYPES:
            for optimizer in OPTIMIZERS:
                marks = []
                fast = (dtype, optimizer) in FAST and (
                    dtype == "float32" or name in FAST_LOW_PRECISION
                )
                if not fast:
                    marks.append(pytest.mark.slow)
                found.append(
                    pytest.param(
                        name, dtype, optimizer, marks=marks, id=f"{name}-{dtype}-{optimizer}"
                    )
                )
    return found


def assert_enclosed(tensor: torch.Tensor, what: str) -> fp.Bounds:
    bounds = fp.bounds_of(tensor)
    assert bounds is not None, f"{what} has no bounds"
    inside = bounds.contains(tensor.detach())
    assert inside.all(), f"{what}: {int((~inside).sum())} values outside their bounds"
    return bounds


@pytest.mark.parametrize(("name", "dtype", "optimizer"), cases())
def test_training_step_is_bounded(name: str, dtype: str, optimizer: str) -> None:
    model, batch = build(name, DTYPES[dtype])
    model.train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    step = OPTIMIZERS[optimizer](parameters)
    with fp.track(strict=True) as tracker:
        loss = loss_of(name, model, batch)
        loss.backward()
        step.step()
    assert tracker.gaps == {}
    bounds = assert_enclosed(loss, "the loss")
    if dtype == "float32" and name not in LOOSE:
        # finite in float32; in bfloat16 and float16 the enclosures of deep models still widen
        # to the whole line (layer norm and attention: issue 20's business)
        assert np.isfinite(bounds.radius).all()
    for index, p in enumerate(parameters):
        if p.grad is None:
            continue
        assert_enclosed(p.grad, f"the gradient of parameter {index}")
        assert_enclosed(p, f"updated parameter {index}")


def test_eval_forward_of_the_resnet_uses_running_statistics() -> None:
    """Batch norm in eval mode (its own rule), the forward pass only."""
    model, batch = build("resnet", torch.float32)
    model.eval()
    with torch.no_grad(), fp.track(strict=True):
        logits = model(batch["pixel_values"])
    bounds = assert_enclosed(logits, "the logits")
    assert np.isfinite(bounds.radius).all()


def mixed_precision_cases() -> list[object]:
    return [
        pytest.param(
            name,
            marks=[] if name in FAST_LOW_PRECISION else [pytest.mark.slow],
            id=f"{name}-float16-autocast-gradscaler",
        )
        for name in MODELS
    ]


@pytest.mark.parametrize("name", mixed_precision_cases())
def test_mixed_precision_training_step_is_bounded(name: str) -> None:
    """Mixed precision as PyTorch recommends it on the CPU: float32 parameters, the forward
    pass under float16 autocast, the loss scaled by a ``GradScaler``, the step on unscaled
    gradients (AdamW), the scale updated; the same values as the untracked step."""

    def step(model: torch.nn.Module, batch: object) -> tuple[torch.Tensor, float]:
        parameters = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(parameters, lr=1e-3)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = loss_of(name, model, batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss, scaler.get_scale()

    plain_model, plain_batch = build(name, torch.float32)
    plain_model.train()
    plain_loss, plain_scale = step(plain_model, plain_batch)
    model, batch = build(name, torch.float32)
    model.train()
    with fp.track(strict=True) as tracker:
        loss, scale = step(model, batch)
    assert tracker.gaps == {}
    assert scale == plain_scale
    assert torch.equal(loss, plain_loss)
    assert_enclosed(loss, "the loss")
    for index, (p, q) in enumerate(zip(model.parameters(), plain_model.parameters(), strict=True)):
        assert torch.equal(p, q), f"parameter {index} differs from the untracked step's"
        if p.grad is not None:
            assert_enclosed(p.grad, f"the gradient of parameter {index}")
            assert_enclosed(p, f"updated parameter {index}")
