"""What a script run's config.toml says: only what amptui knows about the script's run.

A script brings its own model, data, optimizer and schedule; writing amptui's defaults for them
(model.name = "smallcnn", data.name = "synthetic", ...) would name things the script never used.
Its config.toml keeps [run] (name, script, device; apply_amp when amptui applied AMP to it; variant, the
`ab --script --variant NAME` it ran as; max_steps, `plan --script`'s
length), the precision the loop was seen to train in
([amp]: autocast, and its dtype only when it was on; grad_scaler, and the scaler's settings only
when one was on; amp.reduce_dtype for an FSDP2 policy; amp.mode for a mode only its name picks), how it was launched ([dist]), how often it records
([log]) and, when on, its range sampling ([numerics]); reading it back fills the rest with
defaults, which nothing uses for a script.

Until the loop has shown its precision (the folder is made before the script runs; with its hooks
off nothing ever sees it) a script run's config.toml has no [amp] at all: `precision_seen` reads
that back as "not known yet", never as the defaults' autocast bfloat16.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from amptui.core.config.values import Config

# After the precision's words when amptui applied it (run.apply_amp): "autocast bfloat16, applied by amptui".
APPLIED_BY = ", applied by amptui"

SCRIPT_KEYS = {
    # apply_amp, variant, max_steps (`plan --script`: the hooks stop it after that many steps) only when set
    "run": ("name", "description", "device", "script", "apply_amp", "variant", "max_steps"),
    "amp": ("autocast", "dtype", "grad_scaler", "init_scale", "growth_factor", "backoff_factor", "growth_interval"),
    "dist": None,  # all of it
    "log": ("every", "tensorboard", "mlflow"),
    "numerics": ("every", "depth", "plan_every"),  # only when sampling is on (trace_nonfinite is the trainer's)
}


def script_sections(cfg: "Config", precision_seen: bool = True) -> dict[str, dict[str, Any]]:
    """The sections of `cfg` a script run's config.toml holds (see the module doc); without [amp]
    when the loop's precision is not `precision_seen` yet."""
    values = cfg.to_dict()
    out: dict[str, dict[str, Any]] = {}
    for section, keys in SCRIPT_KEYS.items():
        table = values.get(section, {})
        out[section] = dict(table) if keys is None else {k: table[k] for k in keys if k in table}
    _loop_amp(out["amp"])
    if not out["run"].get("apply_amp"):  # the script's own precision: nothing amptui applied to say
        out["run"].pop("apply_amp", None)
    if not out["run"].get("variant"):  # not an `ab --script --variant NAME=...` run
        out["run"].pop("variant", None)
    if not out["run"].get("max_steps"):
        out["run"].pop("max_steps", None)
    if not out["log"].get("mlflow"):  # said only when on, as apply_amp
        out["log"].pop("mlflow", None)
    if not out["numerics"].get("plan_every"):
        out["numerics"].pop("plan_every", None)
    if not out["numerics"].get("every") and not out["numerics"].get("plan_every"):
        del out["numerics"]
    if values.get("amp", {}).get("mode", "auto") != "auto":  # a mode only its name picks (a model cast to bfloat16)
        out["amp"]["mode"] = values["amp"]["mode"]
    if out["dist"].get("mode") == "fsdp" and "reduce_dtype" in values.get("amp", {}):
        out["amp"]["reduce_dtype"] = values["amp"]["reduce_dtype"]
    if not precision_seen:
        del out["amp"]
    if values.get("amp", {}).get("autopilot"):  # [amp.autopilot]: what the hooks advise (docs/autopilot.md)
        out.setdefault("amp", {})["autopilot"] = dict(values["amp"]["autopilot"])
    return out


def precision_seen(raw: Mapping[str, Any]) -> bool:
    """Does a run's config.toml (as parsed, before defaults fill it) say a precision? Not for a
    script run whose loop has not shown it yet (no [amp]: see the module doc)."""
    run, amp = raw.get("run"), raw.get("amp")
    return not (isinstance(run, Mapping) and run.get("script")) or \
        (isinstance(amp, Mapping) and any(key != "autopilot" for key in amp))  # [amp.autopilot] alone: said before


def keys_said(raw: Mapping[str, Any]) -> frozenset[str] | None:
    """The "section.key"s a script run's config.toml (as parsed) really holds: what its loop was
    seen to do, nothing the defaults filled in (compare counts no other key as a difference).
    None for a run of amptui's trainer: it ran the defaults wherever its config.toml is silent."""
    run = raw.get("run")
    if not (isinstance(run, Mapping) and run.get("script")):
        return None
    return frozenset(f"{section}.{key}" for section, table in raw.items() if isinstance(table, Mapping)
                     for key in table)


SCALER_KEYS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval")


def _loop_amp(amp: dict[str, Any]) -> None:
    """[amp] as the loop ran: a float32 loop names no autocast dtype, a loop without an enabled
    GradScaler no scaler settings (the config's defaults would name what the loop never used)."""
    if amp.get("autocast") is False:
        amp.pop("dtype", None)
    if amp.get("grad_scaler") is not True:
        for key in SCALER_KEYS:
            amp.pop(key, None)
