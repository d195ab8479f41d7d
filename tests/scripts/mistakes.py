"""AMP mistakes, one per mode, in an otherwise ordinary loop (never imports amptui).

    python mistakes.py no-update | half-params | scaler-bf16 | sched-after-skip | sched-after-skip-quiet
                       | fp16-no-scaler | never-trains | scaled-twice

scaled-twice: scaler.scale(scaler.scale(loss)).backward(): the gradients carry the loss scale squared.

sched-after-skip-quiet: sched-after-skip in a script that silences Python's warnings (amptui still says it).

never-trains: init_scale 1e30 under float16, so all 40 steps are skipped (the scale never gets low enough).
"""

import sys
import warnings

import torch
from torch import nn

mode = sys.argv[1]
if mode == "sched-after-skip-quiet":
    warnings.filterwarnings("ignore")
    mode = "sched-after-skip"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
if mode == "half-params":
    model = model.half()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=100)
dtype = torch.bfloat16 if mode == "scaler-bf16" else torch.float16
init = {"sched-after-skip": 2.0 ** 40, "never-trains": 1e30}.get(mode, 2.0 ** 10)
scaler = torch.amp.GradScaler("cpu", init_scale=init, enabled=mode != "fp16-no-scaler")
scale = 1e-4 if mode == "fp16-no-scaler" else 1.0  # tiny targets: tiny gradients that float16 flushes to zero
x = torch.randn(8, 16).to(model[0].weight.dtype)
y = torch.randn(8, 1).to(model[0].weight.dtype) * scale
for step in range(40 if mode == "never-trains" else 10):
    with torch.autocast("cpu", dtype=dtype):
        loss = nn.functional.mse_loss(model(x) * scale, y)
    scaled = scaler.scale(loss)
    if mode == "scaled-twice":
        scaled = scaler.scale(scaled)
    scaled.backward()
    scaler.step(opt)
    if mode != "no-update":
        scaler.update()
    opt.zero_grad()
    sched.step()
