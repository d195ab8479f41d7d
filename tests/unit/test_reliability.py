"""Faults done for real: signals to the trainer, a full disk and a death mid-checkpoint, runs
started together, a resume whose config changed, and random hostile config input."""


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amptui.core.config import values as config
from amptui.core.errors import ConfigError

# --- hostile config input -------------------------------------------------------------------------

toml_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6)
known_keys = st.sampled_from([f"{s}.{k}" for s, keys in config.SCHEMA.items() for k in keys])
any_key = known_keys | st.text(max_size=20)


def _doc_from(pairs):
    doc = {}
    for dotted, value in pairs:
        section, _, name = dotted.partition(".")
        if value is None:
            continue
        doc.setdefault(section or "run", {})
        if isinstance(doc[section or "run"], dict):
            doc[section or "run"][name or "x"] = value
    return doc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(any_key, toml_values), max_size=6))
def test_random_documents_give_a_config_or_one_clear_error(pairs):
    try:
        cfg = config.build_config(_doc_from(pairs), source="random.toml")
    except ConfigError as exc:
        assert str(exc).startswith("random.toml") and "\n" not in str(exc)
    else:
        config.build_config(cfg.to_dict())  # what validated once validates again


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=4))
def test_random_set_strings_give_overrides_or_one_clear_error(assignments):
    try:
        overrides = config.parse_set(assignments)
        config.build_config({}, overrides)
    except ConfigError as exc:
        assert str(exc) and "\n" not in str(exc)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_toml_text_gives_a_document_or_one_clear_error(text):
    try:
        config.build_config(config.parse_toml(text, "fuzz.toml"), source="fuzz.toml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml")
