"""The one settings mechanism (``fetcher.config``) both processes declare their settings
over: each kind, both sides of every bound, lists, unknown names, where a value came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from fetcher import settings as fetcher_settings
from fetcher.config import (
    Bad,
    Field,
    convert,
    read,
    read_toml,
    unknown_keys,
    unknown_variables,
)
from gateway import settings as gateway_settings


def bounds() -> list[tuple[str, Field, float, bool]]:
    """Every bound of both processes' tables: the value at it, one step past it, and
    whether each is allowed."""
    cases = []
    tables = {"fetcher": fetcher_settings.FIELDS, "gateway": gateway_settings.FIELDS}
    for process, table in tables.items():
        for name, field in table.items():
            step = 1 if field.kind == "int" else 0.001
            if field.minimum is not None:
                low = field.minimum
                cases.append((f"{process}:{name}:min", field, low, not field.above))
                cases.append((f"{process}:{name}:min-", field, low - step, False))
                cases.append((f"{process}:{name}:min+", field, low + step, True))
            if field.maximum is not None:
                cases.append((f"{process}:{name}:max", field, field.maximum, True))
                cases.append((f"{process}:{name}:max+", field, field.maximum + step, False))
    return cases


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [case[1:] for case in bounds()],
    ids=[case[0] for case in bounds()],
)
def test_both_sides_of_every_bound(field: Field, value: float, allowed: bool) -> None:
    raw = int(value) if field.kind == "int" else value
    converted = convert(field, raw, "name", "file.toml", text=False)
    assert isinstance(converted, Bad) is not allowed
    # The same number as a variable's or a flag's text.
    assert isinstance(convert(field, str(raw), "name", "VAR", text=True), Bad) is not allowed


INT = Field("int", 1, 10, ceiling="why ten")
FLOAT = Field("float", 0, above=True)
LIST = Field("list", items="domains")
TEXT_LIST = Field("list", items="domains", text_in_toml=True)


@pytest.mark.parametrize(
    ("field", "raw", "text", "expected"),
    [
        (INT, 3, False, 3),
        (INT, "3", True, 3),
        (INT, "3", False, "bad value '3' for n: expected an integer"),
        (INT, 2.5, False, "expected an integer"),
        (INT, True, False, "expected an integer"),
        (INT, "x", True, "expected an integer"),
        (INT, 0, False, "must be at least 1"),
        (INT, 11, False, "must be at most 10 (why ten)"),
        (FLOAT, 1, False, 1.0),
        (FLOAT, 0, False, "must be more than 0"),
        (FLOAT, "nan", True, "expected a finite number"),
        (FLOAT, "x", True, "expected a number"),
        (Field("str", choices=("a", "b")), "c", True, "expected one of a, b"),
        (Field("str"), 3, False, "expected a string"),
        (LIST, [" a ", "", "b"], False, ("a", "b")),
        (LIST, "a, b,", True, ("a", "b")),
        (LIST, "a", False, "expected a list of domains"),
        (LIST, [1], False, "expected a list of domains"),
        (TEXT_LIST, "a,b", False, ("a", "b")),
        (TEXT_LIST, 3, False, "expected a list of domains (or comma-separated text)"),
        (Field("list", secret=True), 3, False, "f.toml: bad value for n: expected a list"),
        (Field("str", check=lambda v: Bad("no") if v == "x" else v.upper()), "y", False, "Y"),
        (Field("str", check=lambda v: Bad("no")), "x", False, "bad value 'x' for n: no"),
    ],
    ids=[
        "int",
        "int-text",
        "int-text-in-toml",
        "int-float",
        "int-bool",
        "int-not-a-number",
        "int-below",
        "int-above-with-why",
        "float-from-int",
        "float-above-exclusive-minimum",
        "float-nan",
        "float-not-a-number",
        "choice",
        "str-type",
        "list-stripped",
        "list-text",
        "list-string-in-toml",
        "list-items",
        "list-text-in-toml",
        "list-type",
        "secret-not-repeated",
        "check-converts",
        "check-refuses",
    ],
)
def test_convert(field: Field, raw: object, text: bool, expected: object) -> None:
    value = convert(field, raw, "n", "f.toml", text=text)
    if isinstance(expected, str) and not isinstance(value, str):
        assert isinstance(value, Bad)
        assert expected in value.message
        assert value.message.startswith("f.toml: bad value")
    else:
        assert value == expected


def test_read_takes_the_variable_over_the_file_and_names_each_source() -> None:
    fields = {"a.n": Field("int", 0, variable="T_N"), "m": Field("list", variable="T_M")}
    table = {"a": {"n": 1}, "m": ["x"]}
    assert read(fields, table, "f.toml", {}) == {"a.n": 1, "m": ("x",)}
    # An empty variable is as if unset, except for a list (an empty list).
    assert read(fields, table, "f.toml", {"T_N": "", "T_M": ""}) == {"a.n": 1, "m": ()}
    assert read(fields, table, "f.toml", {"T_N": "2"}) == {"a.n": 2, "m": ("x",)}
    assert read(fields, {}, "f.toml", {}) == {}
    assert read(fields, {"a": 3}, "f.toml", {}) == Bad("f.toml: [a] must be a table")
    assert read(fields, table, "f.toml", {"T_N": "-1"}) == Bad(
        "T_N: bad value '-1' for a.n: must be at least 0"
    )
    assert read(fields, {"a": {"n": "1"}}, "f.toml", {}, prefix="e[0].") == Bad(
        "f.toml: bad value '1' for e[0].a.n: expected an integer"
    )


def test_every_unknown_key_at_every_level_is_named() -> None:
    names = ["listen", "budgets.searches", "engines[].url", "fetcher.deny_domains"]
    table = {
        "lisen": 1,
        "budgets": {"serches": 1, "searches": 2},
        "engines": [{"url": "u"}, {"ulr": "u"}],
        "fetcher": {"anything": 1},
    }
    assert unknown_keys(table, names, open_tables=("fetcher",)) == [
        "'lisen' (did you mean 'listen'?)",
        "'budgets.serches' (did you mean 'budgets.searches'?)",
        "'engines[1].ulr' (did you mean 'engines[1].url'?)",
    ]
    assert unknown_keys(table, names)[-1].startswith("'fetcher.anything'")


def test_unknown_variables_leave_another_processs_prefix_alone() -> None:
    environ = {"T_LISEN": "", "T_LISTEN": "", "T_OTHER_X": "", "HOME": ""}
    assert unknown_variables(environ, ["T_LISTEN"], prefix="T_", others="T_OTHER_") == [
        "'T_LISEN' (did you mean 'T_LISTEN'?)"
    ]


def test_a_file_that_cannot_be_read_is_named_with_what_named_it(tmp_path: Path) -> None:
    missing = read_toml(tmp_path / "none.toml", "TIGRESS_CONFIG")
    assert isinstance(missing, Bad)
    assert missing.message.startswith(f"TIGRESS_CONFIG: config file '{tmp_path}/none.toml'")
    bad = tmp_path / "bad.toml"
    bad.write_text("a = [")
    broken = read_toml(bad, "--config")
    assert isinstance(broken, Bad)
    assert "--config" in broken.message
    assert "is not valid TOML" in broken.message
