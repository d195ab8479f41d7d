"""`amptui plan --save NAME --verify`: the plan's A/B, all-bf16 then the saved plan (`plan:NAME`),
on the preset's data and seed, and the prediction next to what was measured, loss included."""

from __future__ import annotations

from typing import Any

from amptui.core.planning.plan import FAMILY


def verify(args, preset, plan, saved_name: str, root) -> dict[str, Any]:
    from amptui.cli.run_commands import attach
    from amptui.core.comparison import compare as cmp
    from amptui.core.comparison import runsummary
    from amptui.core.config import values as config
    from amptui.core.config.variants import expand
    from amptui.core.prepare import preflight
    from amptui.jobs import launch

    base = preset.config(config.parse_set(args.sets))
    device = preflight.device_type(base.run.device)
    dirs = []
    for name, overrides in expand(f"bf16,plan:{saved_name}", device):
        run_dir, _ = launch.create_run(preset, {**config.parse_set(args.sets), **overrides,
                                                "run.max_steps": args.steps, "log.checkpoint_every": 0}, root, notes=[])
        attach(run_dir, launch.start(run_dir), False, 0, label=f"verify {name}: ")
        dirs.append(run_dir)
    rows = cmp.compare_rows([runsummary.summarize(d) for d in dirs])
    bf16, planned = rows[0], rows[-1]
    return {"device": device, "predicted_for": plan.device.name, "predicted_speedup": plan.predicted_speedup,
            "measured_speedup": planned.speedup, "same_speed": planned.same_speed,
            "speed_unresolved": planned.speed_unresolved, "loss_step": planned.loss_step,
            "loss": {"bf16": bf16.loss_at_common, "plan": planned.loss_at_common},
            "runs": [d.name for d in dirs]}


def words(result: dict[str, Any]) -> str:
    predicted, measured = result["predicted_speedup"], result["measured_speedup"]
    text = f"verify: predicted {predicted:.2f}x on the {result['predicted_for']}" if predicted else "verify:"
    unresolved = result.get("speed_unresolved")
    if measured is not None and unresolved and result["device"] == "cuda":  # no figure its noise cannot tell
        text += f"; measured here ({result['device']}): {unresolved.partition(' (')[0]} ({measured:.2f}x inside its noise)"
    elif measured is not None:
        text += f"; measured here ({result['device']}) {measured:.2f}x"
        if result["device"] != "cuda":
            text += f" ({FAMILY} emulated on this machine: numerics real, speed not the GPU's)"
        elif result.get("same_speed"):
            text += " (same speed: inside the runs' noise)"
    loss = result["loss"]
    if loss["bf16"] is not None and loss["plan"] is not None:
        text += (f"; loss at step {result['loss_step']}: all-bf16 {loss['bf16']:.4f}, plan {loss['plan']:.4f} "
                 f"({100 * (loss['plan'] - loss['bf16']) / abs(loss['bf16'] or 1):+.2f}%)")
    return text + f". Runs: amptui compare {' '.join(result['runs'])}"
