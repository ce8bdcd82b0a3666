"""generate_object(): the schema from the type, the reply decoded, mismatches as INVALID_OUTPUT."""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import msgspec
import pytest
from runtime_scripted import AdapterPlugin, ScriptedAdapter, reply

from harness_core import (
    GenerateOptions,
    Harness,
    InvalidOutputError,
    JsonObjectFormat,
    JsonSchemaFormat,
    LlmError,
    Message,
    SyncHarness,
)
from harness_core.structured import decode_output, response_format_for, schema_for, schema_name
from harness_llm_mock import MockPlugin

pytestmark = pytest.mark.anyio


class Pet(msgspec.Struct):
    name: str


class Person(msgspec.Struct):
    name: str
    age: int
    pets: list[Pet] = []


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def mock_harness() -> Harness:
    return Harness([("mock", MockPlugin(MockPlugin.Config()))])


def ask(text: str) -> GenerateOptions:
    return GenerateOptions(route="mock", model="echo", messages=[Message.user(text)])


async def test_struct_dataclass_and_typed_dict_are_decoded() -> None:
    async with mock_harness() as harness:  # the mock returns the prompt as the reply
        person = await harness.generate_object(ask('{"name": "Zoë", "age": 36, "pets": [{"name": "Rex"}]}'), Person)
        point = await harness.generate_object(ask('```json\n{"x": 1, "y": 2}\n```'), Point)
        movie = await harness.generate_object(ask(' {"title": "Heat", "year": 1995}\n'), Movie)
    assert person == Person("Zoë", 36, [Pet("Rex")])
    assert point == Point(1, 2)
    assert movie == {"title": "Heat", "year": 1995}


async def test_the_schema_of_the_type_is_sent_replacing_any_format() -> None:
    adapter = ScriptedAdapter(reply('{"x": 1, "y": 2}'))
    async with Harness([("fake", AdapterPlugin(adapter, ["fake"]))]) as harness:
        options = GenerateOptions(route="fake", response_format=JsonObjectFormat())
        assert await harness.generate_object(options, Point, name="pt", strict=True) == Point(1, 2)
    assert adapter.calls[0].response_format == JsonSchemaFormat(
        "pt",
        {
            "title": "Point",
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        strict=True,
    )


@pytest.mark.parametrize(
    ("text", "path", "detail"),
    [
        ('{"name": "Ada", "age": "old"}', "$.age", "Expected `int`, got `str`"),
        ('{"name": "Ada", "age": 3, "pets": [{"name": 7}]}', "$.pets[0].name", "Expected `str`, got `int`"),
        ('{"age": 3}', "$", "Object missing required field `name`"),
        ("Ada is 36", "$", "the reply is not JSON"),
        ('["Ada", 36]', "$", "Expected `object`, got `array`"),
    ],
)
async def test_a_mismatch_names_the_path_and_keeps_the_text(text: str, path: str, detail: str) -> None:
    async with mock_harness() as harness:
        with pytest.raises(InvalidOutputError) as caught:
            await harness.generate_object(ask(text), Person)
    error = caught.value
    assert isinstance(error, LlmError)
    assert (error.code, error.path, error.text, error.provider) == ("INVALID_OUTPUT", path, text, "mock")
    assert detail in error.message
    if path != "$":
        assert error.message.startswith(f"the reply does not match Person at {path}: ")


def test_sync_generate_object() -> None:
    with SyncHarness(mock_harness()) as harness:
        assert harness.generate_object(ask('{"x": 5, "y": 6}'), Point, name="p") == Point(5, 6)
        with pytest.raises(InvalidOutputError, match=r"at \$\.y"):
            harness.generate_object(ask('{"x": 5, "y": null}'), Point)


def test_schemas_inline_the_root_and_keep_needed_definitions() -> None:
    person = schema_for(Person)
    assert person["type"] == "object"
    assert person["$defs"] == {"Pet": schema_for(Pet)}  # the root itself is not repeated
    assert "$defs" not in schema_for(Pet)
    node = schema_for(Node)  # recursive: the root's own definition stays
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert set(node["$defs"]) == {"Node"}
    assert schema_for(list[int]) == {"type": "array", "items": {"type": "integer"}}
    with pytest.raises(TypeError):
        schema_for(object)


def test_schema_names() -> None:
    assert schema_name(Person) == "Person"
    assert schema_name(list[int]) == "list"
    assert schema_name(int | None) == "output"
    local = type("Résumé v2!", (msgspec.Struct,), {})
    assert schema_name(local) == "R_sum_v2"
    assert schema_name(type("x" * 80, (), {})) == "x" * 64
    assert response_format_for(Point).name == "Point"


def test_response_formats_close_every_object() -> None:
    schema = response_format_for(Person).schema
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Pet"]["additionalProperties"] is False
    assert schema["properties"]["pets"] == {"type": "array", "items": {"$ref": "#/$defs/Pet"}, "default": []}
    open_dict = response_format_for(dict[str, int]).schema  # a mapping is no object with properties
    assert open_dict == {"type": "object", "additionalProperties": {"type": "integer"}}


def test_decode_output_names_types_without_a_name() -> None:
    with pytest.raises(InvalidOutputError, match=r"does not match list\[int\] at \$\[1\]"):
        decode_output("[1, 2.5]", list[int])
