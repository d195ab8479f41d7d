"""Presets that name user code: `model.factory` / `data.factory` imported from the working
directory, trained by the real `amptui run` (also under DDP on the CPU), and every way a factory
can be broken giving one line that names the factory string."""

from __future__ import annotations

import pytest
from support.factories import BROKEN, _broken, write

from amptui.core.config import values as cfgmod
from amptui.core.errors import UserError
from amptui.core.prepare import usercode


def test_choose_criterion_follows_the_targets(isolated):
    import torch
    from torch.utils.data import TensorDataset

    from amptui.trainer.data import choose_criterion

    cfg = cfgmod.build_config({"data": {"factory": "x:y"}})
    ints = TensorDataset(torch.zeros(4, 3), torch.zeros(4, dtype=torch.long))
    floats = TensorDataset(torch.zeros(4, 3), torch.zeros(4, 2))
    assert isinstance(choose_criterion(cfg, ints), torch.nn.CrossEntropyLoss)
    assert isinstance(choose_criterion(cfg, floats), torch.nn.MSELoss)
    assert isinstance(choose_criterion(cfg, [(torch.zeros(3), 1)]), torch.nn.CrossEntropyLoss)
    with pytest.raises(UserError, match='data.factory = "x:y": samples must be'):
        choose_criterion(cfg, [torch.zeros(3)])


@pytest.mark.parametrize("case", ["missing module", "missing function", "import raising", "bad keyword"])
def test_check_factory_refuses_before_anything_runs(isolated, case):
    ref, message = _broken(isolated, case)
    args = {"hidden": 3} if case == "bad keyword" else {}
    with pytest.raises(UserError) as info:
        usercode.check_factory(ref, "model.factory", args, 10)
    text = str(info.value)
    assert text.startswith(f'model.factory = "{ref}"') and message in text and "\n" not in text, text


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_trainer_path_gives_the_same_one_line(isolated, case):
    from amptui.trainer.models import build_model

    ref, message = _broken(isolated, case)
    doc = {"model": {"factory": ref, **({"hidden": 3} if case == "bad keyword" else {})}}
    cfg = cfgmod.build_config(doc)
    with pytest.raises(UserError) as info:
        build_model(cfg.model)
    text = str(info.value)
    assert text.startswith(f'model.factory = "{ref}"') and message in text and "\n" not in text, text


def test_data_factory_returning_the_wrong_thing(isolated):
    from amptui.trainer.data import build_datasets

    write(isolated / "baddata.py", "def one():\n    return [1, 2, 3]\n\ndef iters():\n    return iter([]), None\n")
    with pytest.raises(UserError, match=r'data.factory = "baddata:one" returned a list of 3; it must return '
                                        r"\(train, validation\)"):
        build_datasets(cfgmod.build_config({"data": {"factory": "baddata:one"}}))
    with pytest.raises(UserError, match='data.factory = "baddata:iters" returned a train set of type'):
        build_datasets(cfgmod.build_config({"data": {"factory": "baddata:iters"}}))
    with pytest.raises(UserError, match="no function 'nope'"):
        usercode.check_factories(cfgmod.build_config({"data": {"factory": "baddata:nope"}}))
