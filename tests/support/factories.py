"""Model factories a preset names (`module:function`): broken ones (BROKEN) written where the test's working
folder imports them."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


# --- broken factories ----------------------------------------------------------------------------

BROKEN = {
    "missing module": ("nosuchmodule:build", None, "no module named 'nosuchmodule'"),
    "missing function": ("okmod:nosuch", "def build():\n    pass\n", "has no function 'nosuch'"),
    "import raising": ("badimport:build", "raise RuntimeError('cannot load weights')\n",
                       "importing badimport raised RuntimeError: cannot load weights (badimport.py, line 1)"),
    "call raising": ("raiser:build", "def build(num_classes):\n    raise ValueError('width must be even')\n",
                     "raised ValueError: width must be even (raiser.py, line 2)"),
    "not a Module": ("notmod:build", "def build():\n    return [1, 2]\n", "returned list, not a torch.nn.Module"),
    "bad keyword": ("kwmod:build", "def build(num_classes):\n    pass\n", "unexpected keyword argument 'hidden'"),
}


def _broken(isolated, case):
    ref, source, message = BROKEN[case]
    if source is not None:
        write(isolated / (ref.split(":")[0] + ".py"), source)
    return ref, message
