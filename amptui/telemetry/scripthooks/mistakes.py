"""AMP mistakes the script hooks can see, each said once, live, as a warning record with the fix."""

from __future__ import annotations

import torch

from amptui.core.config.modefacts import SCALER_UNNEEDED, SLOW_ON_CPU, RunFacts
from amptui.core.config.precision import Precision

CLIP_SCALED = ("clip_grad_norm_ ran on gradients that are still multiplied by the loss scale ({scale}): "
               "no scaler.unscale_(optimizer) came before it, so max_norm is compared with scaled norms and "
               "the clip is meaningless. Call scaler.unscale_(optimizer) right before clip_grad_norm_")
STEP_WITHOUT_UPDATE = ("scaler.step(optimizer) was called again without scaler.update() in between: call "
                       "scaler.update() once per iteration, after the scaler.step() calls (torch raises "
                       "'step() has already been called since the last update()')")
FP16_PARAMS = ("the optimizer holds float16 parameters and a GradScaler unscales their gradients: torch raises "
               "'Attempting to unscale FP16 gradients'. Keep the model's parameters float32 (no model.half()); "
               "torch.autocast computes in float16 for you")
SCALER_BF16 = ("a GradScaler with autocast bfloat16: it works, but bfloat16 has float32's range, so loss scaling "
               "buys nothing and costs a little time each step; drop the GradScaler (or use float16 with it)")
FP16_UNDERFLOW = ("autocast float16 without a GradScaler: at step {step} the float16 backward flushed to zero "
                  "{share:.1%} of the gradient values float32 keeps ({flushed} of {kept} non-zero in the same "
                  "step's backward with the loss scaled by 2**{bits}, as a GradScaler would). Add "
                  "torch.amp.GradScaler (scaler.scale(loss).backward(), scaler.step, scaler.update) or use bfloat16")
SCHED_SKIPPED = ("lr_scheduler.step() ran before its optimizer's first step (torch warns 'Detected call of "
                 "lr_scheduler.step() before optimizer.step()' unless warnings are off): the GradScaler skipped the "
                 "first optimizer step(s) (inf/NaN gradients while the loss scale calibrated from its initial "
                 "value), so optimizer.step() had not run yet. The schedule's first value was skipped: harmless "
                 "once the scale settles and steps train (if none does, amptui says so); a lower init_scale avoids it")

THREADED_STEPS = ("several optimizers stepped from several threads: amptui ends a training step when every "
                  "optimizer in use has stepped once, an order optimizers stepping on their own threads' clocks do "
                  "not keep, so this run's step count, loss per step, samples/s and any speed-up compared from them "
                  "are unreliable. Step the optimizers from one thread (or one optimizer from any) to have them counted")
NO_OPTIMIZER = ("no torch.optim optimizer stepped{seen}: amptui counts a training step at each torch.optim "
                "optimizer's step(), so a loop that updates its parameters by hand (p -= lr * p.grad) records no "
                "steps, loss, learning rate or GradScaler. Use a torch.optim optimizer (torch.optim.SGD("
                "model.parameters(), lr=...) does that same update), or record the loop yourself with amptui.Monitor "
                "(mon.step(loss) once per step; docs/your-own-code.md)")
NO_OPTIMIZER_END = ("0 training steps recorded: no torch.optim optimizer stepped, so nothing could be counted. "
                    "Use a torch.optim optimizer, or amptui.Monitor in the loop (docs/your-own-code.md)")


def has_fp16_params(optimizer: torch.optim.Optimizer) -> bool:
    """Parameters' dtypes only (metadata): no device read."""
    return any(p.dtype == torch.float16 for g in optimizer.param_groups for p in g["params"])


def precision_mistakes(precision: Precision, scaler: bool, device_type: str | None) -> list[tuple[str, str]]:
    """(code, message) for what the loop's precision mode says its loop could do better, in a script's
    words (the mode's rules, the hooks' words): a GradScaler its dtype does not need; a narrow autocast
    dtype this CPU computes slowly (with this CPU's measured rates where doctor cached them)."""
    said = []
    if scaler and any(note.code == SCALER_UNNEEDED for note in precision.mode.warnings(precision, RunFacts(script=True))):
        said.append(("scaler_bfloat16", SCALER_BF16))
    if device_type == "cpu" and precision.autocast:
        from amptui.machine.dtype_speed import slow_dtypes

        facts = RunFacts(device="cpu", script=True, slow=slow_dtypes("cpu"))
        said += [("slow_on_cpu", note.text.replace("(amp.autocast=false)", "(the loop without autocast)"))
                 for note in precision.mode.warnings(precision, facts) if note.code == SLOW_ON_CPU]
    return said
