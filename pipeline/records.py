"""The shape of every JSON file the project reads back, as JSON Schema, checked with ``jsonschema``.

A wrong type, a missing key or a NaN where a number belongs is one line naming the file and the key
(``sweep.json: spec.seed: must be an integer, not 'x'``), instead of a ``KeyError`` or ``TypeError`` deep in
the code that uses it. The schemas hold what the code relies on; keys it does not read may be added freely
(older and newer files stay readable). The tuning table's shape is ``kernels.tuning_table``'s, its owner
(the runtime tuner reads it too, and ``kernels`` never imports ``pipeline``).

``number`` means a finite number here (times, fractions: NaN or infinity there is a broken file); model
scores, where NaN is a value ("undefined", a rank correlation of constant predictions), are not typed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from .errors import UserError


def _is_number(_: Any, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_TYPES = Draft202012Validator.TYPE_CHECKER.redefine("number", _is_number)
Validator = jsonschema.validators.extend(Draft202012Validator, type_checker=_TYPES)

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
COUNT = {"type": "integer", "minimum": 0}
OBJ = {"type": "object"}
STRS = {"type": "array", "items": STR}
CONFIG = {"type": "object", "additionalProperties": INT}  # a launch configuration: parameter -> value
MAYBE_CONFIG = {
    "type": ["object", "null"],
    "additionalProperties": INT,
}  # null: none (a cache has no default)
TIME = {"type": ["number", "null"], "minimum": 0}
SCORES = {"type": "object"}  # a model's scores: NaN is a value there (a rank correlation left undefined)

PLAN_FACTS = {
    "type": "object",
    "properties": {
        "params": STRS,
        "values": {"type": "object", "additionalProperties": {"type": "array", "items": INT}},
        "default": MAYBE_CONFIG,
        "kernels": STRS,
        "inactive": {"type": "array"},
        "measures": STRS,
        "objective": {"type": "object", "additionalProperties": STR, "maxProperties": 1},
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "folder marker": {
        "type": "object",
        "required": ["kind", "id"],
        "properties": {"kind": {"enum": ["sweep", "combined"]}, "id": STR},
    },
    "sweep description": {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name", "workload"],
                "properties": {
                    "name": STR,
                    "workload": STR,
                    "case": STR,
                    "size": STR,
                    "backend": STR,
                    "samples": COUNT,
                    "seed": COUNT,
                    "repeats": COUNT,
                    "batch_size": {"oneOf": [{"type": "integer", "minimum": 1}, {"const": "auto"}]},
                    "samplers": STRS,
                    "options": OBJ,
                    "test_fraction": NUM,
                },
            },
            "planning_key": {
                "type": "object",
                "properties": {"samples": COUNT, "seed": COUNT, "samplers": STRS, "options": OBJ},
            },
            "plan": PLAN_FACTS,
            "updated": STR,
            "combined": {"type": "object", "properties": {"sources": {"type": "array", "items": OBJ}}},
            "checksums": {"type": "object", "additionalProperties": STR},
        },
    },
    "plan": {
        "allOf": [
            PLAN_FACTS,
            {
                "type": "object",
                "properties": {
                    "configs": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "prefixItems": [STR, CONFIG],
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                    "n_configs": COUNT,
                    "configs_file": STR,
                    "device": OBJ,
                    "probe_s": NUM,
                    "planned_with": OBJ,
                    "checksums": {"type": "object", "additionalProperties": STR},
                },
            },
        ]
    },
    "model metrics": {
        "type": "object",
        "required": ["groups"],
        "properties": {
            "data_hash": STR,
            "seed": INT,
            "groups": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["models"],
                    "properties": {
                        "features": STRS,
                        "rows": COUNT,
                        "models": {"type": "object", "additionalProperties": SCORES},
                        "search_model": STR,
                    },
                },
            },
            "comparison": OBJ,
            "loco": OBJ,
        },
    },
    "validation results": {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "properties": {
                "candidates": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["config"],
                        "properties": {"config": CONFIG, "total_ms": TIME},
                    },
                },
                "default": {
                    "type": ["object", "null"],
                    "required": ["config"],
                    "properties": {"config": CONFIG, "total_ms": TIME},
                },
                "rejected": {"type": "array"},
                "model": STR,
                "repeats": COUNT,
            },
        },
    },
    "timing": {
        "type": "object",
        "properties": {
            "rows": COUNT,
            "ok": COUNT,
            "batches": COUNT,
            "seconds": {"type": "number", "minimum": 0},
            "workers": COUNT,
            "samples_per_minute": {"type": "number", "minimum": 0},
        },
    },
    "report": {
        "type": "object",
        "properties": {
            "sweep_id": STR,
            "seed": INT,
            "data_hash": STR,
            "classes": {"type": "object", "additionalProperties": OBJ},
            "figures": STRS,
        },
    },
    "Kernel Tuner cache": {
        "type": "object",
        "required": ["tune_params_keys", "cache"],
        "properties": {
            "tune_params_keys": {"type": "array", "items": STR, "minItems": 1},
            "cache": {"type": "object", "additionalProperties": OBJ},
            "objective": STR,
            "device_name": STR,
            "kernel_name": STR,
        },
    },
}

_VALIDATORS = {name: Validator(schema) for name, schema in SCHEMAS.items()}
for _schema in SCHEMAS.values():
    Validator.check_schema(_schema)

_TYPE_WORDS = {
    "number": "a finite number",
    "integer": "an integer",
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
    "boolean": "true or false",
}


def _where(error: jsonschema.ValidationError) -> str:
    text = ""
    for part in error.absolute_path:
        if not isinstance(part, int) and not (part.isprintable() and part.strip() == part and part):
            part = repr(part)  # a key with a newline (or empty) must not break the one line
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        words = " or ".join(_TYPE_WORDS.get(str(t), str(t)) for t in wanted)
        return f"must be {words}, not {_short(error.instance)}"
    if error.validator == "required":
        return error.message.split("\n")[0][:200]
    if error.validator in ("minimum", "maximum", "minItems", "maxItems"):
        return f"{_short(error.instance)} is out of range ({error.validator} {error.validator_value})"
    if error.validator in ("enum", "const"):
        allowed = error.validator_value if error.validator == "enum" else [error.validator_value]
        return f"must be one of {', '.join(map(repr, allowed))}, not {_short(error.instance)}"
    if error.validator == "oneOf":
        return f"{_short(error.instance)} is not a valid value"
    return " ".join(error.message.split())[:200]


def check_record(data: Any, kind: str, path: Path | str) -> None:
    """Refuse ``data`` (read from ``path``) unless it has the shape of a ``kind`` file (a key of ``SCHEMAS``),
    with one line naming the file and the first key that is wrong."""
    error = best_match(_VALIDATORS[kind].iter_errors(data))
    if error is not None:
        raise UserError(f"{path}: {_where(error)}: {_describe(error)} (in this {kind} file)")


def checked(data: Any, kind: str, path: Path | str) -> Any:
    """``data`` after :func:`check_record`; None stays None (a file that is not there)."""
    if data is not None:
        check_record(data, kind, path)
    return data
