"""The JSON types each record kind's fields may hold, read from the record classes' annotations
(records.py): what the event reader (events.py) checks a line's values against, so a new field is
checked with no edit here."""

from __future__ import annotations

import typing
from typing import Any

from amptui.core.stream.records import COMMON_FIELDS, KINDS

_JSON_TYPES: dict[Any, tuple[type, ...]] = {int: (int, float), float: (int, float), str: (str,), dict: (dict,),
                                             list: (list,), bool: (bool,)}


def _json_types(annotation: Any) -> tuple[type, ...] | None:
    """The exact JSON value types an annotation allows (None: anything)."""
    parts = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, type(int | None)) \
        else (annotation,)
    found: list[type] = []
    for part in parts:
        if part is type(None):
            continue
        json = _JSON_TYPES.get(typing.get_origin(part) or part)
        if json is None:
            return None
        found += [t for t in json if t not in found]
    return tuple(found)


def field_types() -> dict[str, dict[str, tuple[type, ...]]]:
    """{kind: {field name: the JSON types its value may have (besides null)}}: each kind's own
    fields plus the common ones (a user's extra numbers in an epoch record are not checked
    against another kind's field of the same name)."""
    out: dict[str, dict[str, tuple[type, ...]]] = {}
    for cls in KINDS:
        own = dict(COMMON_FIELDS)
        for name, annotation in typing.get_type_hints(cls).items():
            types = _json_types(annotation)
            if name == "extra" or types is None or name in ("KIND", "OPTIONAL", "STATUSES"):
                continue
            own[name] = types
        out[cls.KIND] = own
    return out
