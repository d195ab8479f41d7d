"""User code named by a preset: `model.factory` / `data.factory` = "package.module:function".

Factories are imported from the working directory (where amptui was started) and PYTHONPATH.
Every way a factory can go wrong -- module missing, function missing, import raising, call
raising, wrong return type -- becomes one `UserError` line that names the factory string, so the
user never sees a traceback of amptui's own.

No torch at module level: `check_factories` runs before a run folder exists (preflight), and
the trainer uses `load_factory` / `call_factory` when it builds the model and the data.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from typing import TYPE_CHECKING, Any, Callable, Mapping

from amptui.core.errors import UserError

if TYPE_CHECKING:
    from amptui.core.config.values import Config

# What a data factory may ask for by naming the parameter (it gets only those it names).
DATA_FACTORY_ARGS = ("root", "img_size", "augment", "train_samples", "val_samples", "seed", "num_classes")


def _where(exc: BaseException) -> str:
    """' (file.py, line N)' of the innermost frame of the user's code, or ''."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # amptui/
    user = [f for f in frames if not os.path.abspath(f.filename).startswith(here)
            and "importlib" not in f.filename]
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({os.path.basename(exc.filename)}, line {exc.lineno})"
    if not user:
        return ""
    frame = user[-1]
    return f" ({os.path.basename(frame.filename)}, line {frame.lineno})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    if isinstance(exc, SyntaxError):
        msg = exc.msg or msg
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def split_ref(ref: str, key: str) -> tuple[str, str]:
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise UserError(f'{key} = "{ref}" must look like "package.module:function"')
    return module, attr


def _ensure_cwd_on_path() -> None:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def load_factory(ref: str, key: str = "model.factory") -> Callable[..., Any]:
    """Import "package.module:function" and return the callable; every failure is a UserError."""
    module_name, attr = split_ref(ref, key)
    _ensure_cwd_on_path()
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise UserError(f'{key} = "{ref}": no module named {missing!r} (looked in the working directory '
                            f'{os.getcwd()} and PYTHONPATH; run amptui where {module_name.split(".")[0]} lives '
                            'or add its folder to PYTHONPATH)') from None
        raise UserError(f'{key} = "{ref}": importing {module_name} failed: {_first_line(exc)}{_where(exc)}') from None
    except (Exception, SystemExit) as exc:
        raise UserError(f'{key} = "{ref}": importing {module_name} raised {_first_line(exc)}{_where(exc)}') from None
    if not hasattr(module, attr):
        where = getattr(module, "__file__", None)
        where = f" ({where})" if where else ""
        raise UserError(f'{key} = "{ref}": module {module_name}{where} has no function {attr!r}')
    fn = getattr(module, attr)
    if not callable(fn):
        raise UserError(f'{key} = "{ref}": {module_name}.{attr} is a {type(fn).__name__}, not a function')
    return fn


def _parameters(fn: Callable) -> tuple[set[str], bool] | None:
    """(named keyword-capable parameters, takes **kwargs) or None when it cannot be told."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names = {p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    return names, var_kw


def model_kwargs(fn: Callable, args: Mapping[str, Any], num_classes: int | None) -> dict[str, Any]:
    """`model.args`, plus num_classes when the function names it or takes **kwargs."""
    kwargs = dict(args)
    params = _parameters(fn)
    if num_classes is not None and "num_classes" not in kwargs and params is not None:
        names, var_kw = params
        if "num_classes" in names or var_kw:
            kwargs["num_classes"] = num_classes
    return kwargs


def data_kwargs(fn: Callable, values: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of DATA_FACTORY_ARGS the data factory names as parameters. `values` maps those
    names to this run's settings (data.*, run.seed, model.num_classes)."""
    params = _parameters(fn)
    if params is None:
        return {}
    names, _ = params
    return {k: values[k] for k in DATA_FACTORY_ARGS if k in names and k in values}


def check_call(fn: Callable, ref: str, key: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse keyword arguments the function cannot take, before anything runs."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        given = f" (given: {', '.join(sorted(kwargs))})" if kwargs else ""
        raise UserError(f'{key} = "{ref}": cannot be called with the [model] keys: {exc}{given}') from None


def call_factory(fn: Callable, ref: str, key: str, kwargs: Mapping[str, Any]) -> Any:
    try:
        return fn(**kwargs)
    except (Exception, SystemExit) as exc:
        raise UserError(f'{key} = "{ref}" raised {_first_line(exc)}{_where(exc)}') from None


def check_factory(ref: str, key: str = "model.factory", args: Mapping[str, Any] | None = None,
                  num_classes: int | None = None) -> Callable[..., Any]:
    """Import the factory and check it is callable (and, for model.factory, that `args` fit its
    signature). Does not call it. Returns the callable."""
    fn = load_factory(ref, key)
    if key == "model.factory":
        check_call(fn, ref, key, model_kwargs(fn, args or {}, num_classes))
    return fn


def check_factories(cfg: Config) -> None:
    """Preflight: both factories of a config, when set."""
    model, data = cfg.model, cfg.data
    if model.factory:
        check_factory(model.factory, "model.factory", model.args, model.num_classes)
    if data.factory:
        check_factory(data.factory, "data.factory")
