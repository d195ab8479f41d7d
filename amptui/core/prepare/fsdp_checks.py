"""Refusals for FSDP2 setups that cannot work, made before a run folder exists (no torch here).

Under `dist.mode = "fsdp"` the precision keys mean a MixedPrecisionPolicy, not autocast:
amp.autocast + amp.dtype give its param_dtype (parameters all-gathered and computed in it, no
autocast context entered: the policy applies), amp.reduce_dtype the dtype gradients are reduced in,
and the sharded parameters and the optimizer stay float32.
"""

from __future__ import annotations

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError

# Built-in models with a `blocks` ModuleList that fully_shard wraps one by one (a factory's model is
# checked when the trainer builds it).
BLOCK_MODELS = ("gpt",)


def check_fsdp(cfg: cfgmod.Config) -> None:
    """One line saying why, for a combination that FSDP (or amp.reduce_dtype) cannot run."""
    amp, dist = cfg.amp, cfg.dist
    reduce = amp.reduce_dtype
    if dist.mode != "fsdp":
        if reduce != "float32":
            raise UserError(f"amp.reduce_dtype = \"{reduce}\" is an FSDP policy setting; dist.mode = "
                            f"\"{dist.mode}\" reduces gradients in their own dtype (float32). Add --set "
                            "dist.mode=fsdp, or drop amp.reduce_dtype")
        return
    if cfg.run.script:
        return  # a script shards its own model (the any-script hooks name its policy)
    if not cfg.model.factory and cfg.model.name not in BLOCK_MODELS:
        raise UserError(f"dist.mode = \"fsdp\" shards a model block by block (fully_shard per transformer block), "
                        f"and model.name = \"{cfg.model.name}\" has no blocks: use model.name = "
                        f"{' or '.join(BLOCK_MODELS)} (preset gpt-text), a model.factory whose model has a `blocks` "
                        "ModuleList, or dist.mode=ddp")
    compute = amp.dtype if amp.autocast else "float32"
    if reduce not in ("float32", compute):
        raise UserError(f"amp.reduce_dtype = \"{reduce}\" with a {compute} policy: gradients are reduced in "
                        f"float32 or in the policy's compute dtype ({compute}); set one of those")
    if cfg.run.compile:
        raise UserError("run.compile with dist.mode = \"fsdp\": amptui does not compile FSDP2 models (untested "
                        "here); drop run.compile, or use dist.mode=ddp")
