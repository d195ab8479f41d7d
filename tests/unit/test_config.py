"""The preset schema: defaults, validation, `--set` parsing and the built-in presets."""

import dataclasses

import pytest

from amptui.core.config import values as config
from amptui.core.config.keychecks import check_value
from amptui.core.config.precision import Precision
from amptui.core.config.presets import find_preset, list_presets
from amptui.core.errors import ConfigError


def test_every_key_has_a_default_and_a_description():
    for section, keys in config.SCHEMA.items():
        for name, key in keys.items():
            assert len(key.doc) > 10, f"{section}.{name} needs a description"
            check_value(f"{section}.{name}", key.default, "defaults")  # defaults are valid
    assert config.build_config() == config.build_config({})


def test_a_config_is_typed_sections_that_refuse_typos_and_changes():
    cfg = config.build_config({}, {"amp.dtype": "float16"})
    assert cfg.amp.dtype == "float16" and cfg.optim.lr == 1e-3 and cfg.data.num_workers == "auto"
    with pytest.raises(AttributeError):
        cfg.amp.dtyp  # noqa: B018 -- a typo is an error, not a silent default
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.amp.dtype = "bfloat16"  # type: ignore[misc]
    changed = cfg.with_overrides({"amp.dtype": "bfloat16"})
    assert (changed.amp.dtype, cfg.amp.dtype) == ("bfloat16", "float16")
    assert config.Config() == config.build_config()  # the dataclasses' defaults are the schema's
    assert config.build_config(cfg.to_dict()) == cfg and cfg.flat()["amp.dtype"] == "float16"


def test_product_schema_keys_exist():
    """The keys of the preset schema (docs/presets.md) that other parts and users rely on."""
    wanted = {
        "run": "name seed epochs max_steps device",
        "model": "name num_classes pretrained",
        "data": "name root img_size batch_size num_workers augment",
        "optim": "name lr weight_decay momentum",
        "sched": "name warmup_epochs patience",
        "amp": "autocast dtype grad_scaler init_scale growth_factor backoff_factor growth_interval clip_grad_norm accumulate",
        "dist": "mode nproc_per_node nnodes node_rank rdzv_endpoint backend max_restarts",
        "log": "every checkpoint_every checkpoint_every_steps eval_every",
        "debug": "inject_inf_every fail_at_step fail_rank",
    }
    for section, names in wanted.items():
        assert set(names.split()) <= set(config.SCHEMA[section]), section


def test_set_values_are_toml_values_and_bare_words_are_strings():
    got = config.parse_set(["amp.dtype=bfloat16", "run.max_steps=200", "optim.lr=1e-4", "amp.autocast=false",
                            "amp.grad_scaler=auto", "run.name=\"my run\"", "dist.rdzv_endpoint=host:29400"])
    assert got == {"amp.dtype": "bfloat16", "run.max_steps": 200, "optim.lr": 1e-4, "amp.autocast": False,
                   "amp.grad_scaler": "auto", "run.name": "my run", "dist.rdzv_endpoint": "host:29400"}
    cfg = config.build_config({}, got)
    assert cfg.amp.dtype == "bfloat16" and cfg.run.max_steps == 200 and cfg.amp.autocast is False


@pytest.mark.parametrize("assignment, words", [
    ("amp.dtypo=bfloat16", "unknown key 'amp.dtypo'"),
    ("ampp.dtype=bfloat16", "unknown section 'ampp'"),
    ("amp.dtype", "expected SECTION.KEY=VALUE"),
    ("amp.dtype=", "missing value"),
])
def test_bad_set_names_the_key(assignment, words):
    with pytest.raises(ConfigError, match=words):
        config.parse_set([assignment])


@pytest.mark.parametrize("overrides, words", [
    ({"data.batch_size": "64"}, "data.batch_size must be an integer"),
    ({"data.batch_size": 0}, "data.batch_size must be >= 1"),
    ({"amp.autocast": 1}, "amp.autocast must be true or false"),
    ({"amp.grad_scaler": "yes"}, "amp.grad_scaler must be \"auto\", true or false"),
    ({"amp.dtype": "float8"}, "amp.dtype must be one of auto, float16, bfloat16"),
    ({"optim.lr": True}, "optim.lr must be a number"),
    ({"dist.node_rank": 2, "dist.nnodes": 2}, "dist.node_rank"),
    ({"amp.growth_factor": 1.0}, r"amp.growth_factor must be > 1"),
    ({"amp.backoff_factor": 1.0}, r"amp.backoff_factor must be in \(0, 1\)"),
    ({"amp.init_scale": 0}, r"amp.init_scale must be > 0"),
    ({"sched.factor": 1.5}, r"sched.factor must be in \[0, 1\)"),
    ({"run.seed": 2**64}, r"run.seed must be in \[0, 4294967295\]"),
    ({"model.name": "alexnet", "data.img_size": 16}, r"needs data.img_size >= 63"),
])
def test_wrong_values_name_the_key(overrides, words):
    with pytest.raises(ConfigError, match=words):
        config.build_config({}, overrides)


def test_int_is_accepted_for_a_float_key():
    assert config.build_config({"optim": {"lr": 1}}).optim.lr == 1.0


def test_builtin_presets_load_and_quickstart_comes_first():
    names = [p.name for p in list_presets()]
    assert names[0] == "quickstart"
    assert set(names) >= {"quickstart", "alexnet-cifar10", "resnet18-intel", "mlp-recipe", "scaler-lab"}
    for name in names:
        cfg = find_preset(name).config()
        assert cfg.run.name == name
        assert find_preset(name).description


def test_builtin_presets_follow_the_tutorials():
    a = find_preset("alexnet-cifar10").config()
    assert (a.model.name, a.model.num_classes, a.data.name, a.data.img_size, a.data.batch_size, a.run.epochs) == \
        ("alexnet", 10, "cifar10", 227, 64, 20)
    assert (a.optim.name, a.optim.lr, a.sched.name, a.sched.patience) == ("adamw", 1e-4, "plateau", 3)
    r = find_preset("resnet18-intel").config()
    assert (r.model.name, r.model.num_classes, r.model.pretrained, r.data.name, r.data.img_size,
            r.data.batch_size, r.data.augment) == ("resnet18", 6, True, "imagefolder", 256, 256, True)
    assert (r.optim.name, r.optim.lr, r.sched.name) == ("adam", 1e-4, "cosine") and r.sched.warmup_epochs > 0
    m = find_preset("mlp-recipe").config()
    assert (m.model.name, m.model.width, m.model.depth, m.data.batch_size, m.run.epochs) == ("mlp", 4096, 3, 512, 3)
    assert m.data.train_samples // m.data.batch_size == 50
    assert (m.optim.name, m.optim.lr, m.data.name) == ("sgd", 1e-3, "random")
    s = find_preset("scaler-lab").config()
    assert s.amp.dtype == "float16" and s.amp.grad_scaler is True
    assert s.amp.init_scale >= 2.0 ** 24 and s.amp.growth_interval <= 16


@pytest.mark.parametrize("device, autocast, dtype, scaler, words, short", [
    ("cpu", True, "auto", "auto", "autocast bfloat16", "bf16"),
    ("cuda", True, "auto", "auto", "autocast float16 + GradScaler", "fp16+scaler"),
    ("cuda", True, "bfloat16", "auto", "autocast bfloat16", "bf16"),
    ("cpu", False, "auto", "auto", "fp32", "fp32"),
    ("cpu", False, "auto", True, "fp32 + GradScaler", "fp32+scaler"),
    ("cpu", True, "float16", False, "autocast float16", "fp16"),
])
def test_auto_precision_rules(device, autocast, dtype, scaler, words, short):
    values = config.build_config({}, {"amp.autocast": autocast, "amp.dtype": dtype, "amp.grad_scaler": scaler})
    assert Precision.from_config(values, device).words == words
    assert Precision.from_config(values, device).short == short


def test_minimal_keeps_only_what_differs():
    values = config.build_config({}, {"amp.dtype": "float16", "run.epochs": 4}).to_dict()
    assert config.minimal(values) == {"amp": {"dtype": "float16"}, "run": {"epochs": 4}}


def test_a_bad_set_value_is_blamed_on_set_not_the_preset_file():
    from amptui.core.config import presets

    preset = presets.find_preset("quickstart")
    with pytest.raises(ConfigError) as err:
        preset.config({"amp.init_scale": 0})
    assert str(err.value).startswith("--set: amp.init_scale must be > 0"), err.value
    alexnet = presets.find_preset("alexnet-cifar10")
    with pytest.raises(ConfigError) as err:
        alexnet.config({"data.img_size": 32})  # legal alone, impossible with that preset's model
    assert str(err.value).startswith("--set: model.name = \"alexnet\" needs data.img_size >= 63"), err.value
