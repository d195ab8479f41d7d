"""A script that prints as it trains (CHATTY), written into a folder (`script`), for the tests of a live script
run."""

from __future__ import annotations

import textwrap

CHATTY = textwrap.dedent('''\
    import sys
    import torch
    from torch import nn

    print("hello from the script", flush=True)
    print("a note on stderr", file=sys.stderr, flush=True)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"script step {step}", flush=True)

    def fail():
        raise ValueError("boom at the end")

    fail()
''')


def _script(folder, text=CHATTY, name="chatty.py"):
    path = folder / name
    path.write_text(text)
    return path
