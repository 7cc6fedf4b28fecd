"""Settings: defaults, YAML, LIGHTRAG_RAY__* environment variables, explicit overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from lightrag_ray.config import Settings, load_settings


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lightrag.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_validate_and_are_offline_friendly():
    settings = load_settings(environ={})
    assert settings == Settings()
    assert settings.llm.backend == "none"
    assert settings.chunking.chunk_tokens == 1200
    assert settings.chunking.overlap_tokens == 100
    assert settings.chunking.encoding == "cl100k_base"
    assert settings.graph.num_shards == "auto" and settings.graph.shards_for(0) == 2
    assert settings.vectors.uri is None
    assert settings.ray.address is None
    # the defaults survive a dump/validate round trip unchanged
    assert Settings.model_validate(settings.model_dump()) == settings


def test_yaml_file_is_loaded(tmp_path):
    path = write_yaml(
        tmp_path,
        "workspace: /data/ws\n"
        "llm:\n  backend: openai\n  model: qwen\n  base_url: http://yaml:1/v1\n"
        "graph:\n  num_shards: 3\n"
        "extraction:\n  entity_types: [person, place]\n",
    )
    settings = load_settings(path, environ={})
    assert settings.workspace == "/data/ws"
    assert settings.llm.backend == "openai"
    assert settings.llm.model == "qwen"
    assert settings.llm.base_url == "http://yaml:1/v1"
    assert settings.graph.num_shards == 3
    assert settings.extraction.entity_types == ["person", "place"]
    # untouched fields keep their defaults, also inside a section that the file sets
    assert settings.llm.max_retries == 4
    assert settings.chunking.chunk_tokens == 1200


def test_empty_yaml_file_gives_defaults(tmp_path):
    assert load_settings(write_yaml(tmp_path, ""), environ={}) == Settings()


def test_env_overrides_yaml(tmp_path):
    path = write_yaml(tmp_path, "llm:\n  base_url: http://yaml:1/v1\n  model: from-yaml\ngraph:\n  num_shards: 3\n")
    environ = {
        "LIGHTRAG_RAY__LLM__BASE_URL": "http://env:2/v1",
        "LIGHTRAG_RAY__GRAPH__NUM_SHARDS": "4",
        "UNRELATED__LLM__MODEL": "ignored",
    }
    settings = load_settings(path, environ=environ)
    assert settings.llm.base_url == "http://env:2/v1"
    assert settings.graph.num_shards == 4
    assert isinstance(settings.graph.num_shards, int)
    assert settings.llm.model == "from-yaml"  # the env did not touch it


def test_env_is_read_from_os_environ_by_default(monkeypatch):
    monkeypatch.setenv("LIGHTRAG_RAY__GRAPH__NUM_SHARDS", "5")
    monkeypatch.setenv("LIGHTRAG_RAY__EXTRACTION__ENTITY_TYPES", "[a, b]")
    settings = load_settings()
    assert settings.graph.num_shards == 5
    assert settings.extraction.entity_types == ["a", "b"]


def test_env_values_for_string_fields_keep_their_exact_text():
    # YAML would read these as int 12345, octal 0123 = 83, bool True and float 1.5
    environ = {
        "LIGHTRAG_RAY__LLM__API_KEY": "12345",
        "LIGHTRAG_RAY__VECTORS__TOKEN": "0123",
        "LIGHTRAG_RAY__LLM__MODEL": "yes",
        "LIGHTRAG_RAY__VECTORS__DB_NAME": "1.5",
        "LIGHTRAG_RAY__LLM__TEMPERATURE": "0.5",
        "LIGHTRAG_RAY__VECTORS__URI": "null",
    }
    settings = load_settings(environ=environ)
    assert settings.llm.api_key == "12345"
    assert settings.vectors.token == "0123"
    assert settings.llm.model == "yes"
    assert settings.vectors.db_name == "1.5"
    assert settings.llm.temperature == 0.5
    assert settings.vectors.uri is None


def test_explicit_overrides_beat_env_and_yaml(tmp_path):
    path = write_yaml(tmp_path, "llm:\n  base_url: http://yaml:1/v1\ngraph:\n  num_shards: 3\n")
    environ = {"LIGHTRAG_RAY__LLM__BASE_URL": "http://env:2/v1", "LIGHTRAG_RAY__GRAPH__NUM_SHARDS": "4"}
    settings = load_settings(path, overrides={"llm": {"base_url": "http://explicit:3/v1"}}, environ=environ)
    assert settings.llm.base_url == "http://explicit:3/v1"
    assert settings.graph.num_shards == 4  # not overridden explicitly: env still wins over YAML


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"no_such_setting": 1}, "no_such_setting"),
        ({"llm": {"temprature": 0.2}}, "temprature"),
        ({"graph": {"shards": 4}}, "shards"),
    ],
)
def test_unknown_keys_are_rejected(overrides, key):
    with pytest.raises(ValidationError) as info:
        load_settings(overrides=overrides, environ={})
    assert key in str(info.value)
    assert any(error["type"] == "extra_forbidden" for error in info.value.errors())


def test_unknown_key_in_yaml_and_env_is_rejected(tmp_path):
    with pytest.raises(ValidationError, match="chunk_size"):
        load_settings(write_yaml(tmp_path, "chunking:\n  chunk_size: 10\n"), environ={})
    with pytest.raises(ValidationError, match="bogus"):
        load_settings(environ={"LIGHTRAG_RAY__LLM__BOGUS": "1"})


def test_invalid_values_are_rejected():
    with pytest.raises(ValidationError, match="num_shards"):
        load_settings(overrides={"graph": {"num_shards": 0}}, environ={})
    with pytest.raises(ValidationError, match="backend"):
        load_settings(environ={"LIGHTRAG_RAY__LLM__BACKEND": "gpt"})


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_yaml_that_is_not_a_mapping_is_a_value_error(tmp_path, text):
    path = write_yaml(tmp_path, text)
    with pytest.raises(ValueError, match="expected a mapping") as info:
        load_settings(path, environ={})
    assert not isinstance(info.value, ValidationError)
    assert str(path) in str(info.value)


def test_milvus_uri_defaults_to_a_file_in_the_workspace(tmp_path):
    settings = load_settings(overrides={"workspace": str(tmp_path / "ws")}, environ={})
    assert settings.milvus_uri() == str(tmp_path / "ws" / "milvus.db")
    file_uri = load_settings(overrides={"workspace": f"file://{tmp_path}/ws"}, environ={})
    assert file_uri.milvus_uri() == str(tmp_path / "ws" / "milvus.db")


def test_milvus_uri_explicit_wins():
    settings = load_settings(
        overrides={"workspace": "s3://bucket/ws", "vectors": {"uri": "http://milvus:19530"}}, environ={}
    )
    assert settings.milvus_uri() == "http://milvus:19530"


def test_milvus_uri_for_remote_workspace_needs_vectors_uri():
    settings = load_settings(overrides={"workspace": "s3://bucket/ws"}, environ={})
    with pytest.raises(ValueError, match="vectors.uri"):
        settings.milvus_uri()


def test_auto_shards_grow_with_the_first_runs_chunks_and_a_number_stays():
    from lightrag_ray.config import GraphConfig

    auto = GraphConfig(items_per_shard=1000)
    assert [auto.shards_for(n) for n in (0, 10, 100, 1000)] == [2, 2, 4, 32]  # 32 items a chunk, at least 2
    assert GraphConfig(num_shards=3, items_per_shard=1000).shards_for(1000) == 3


def test_the_cli_shards_flag_takes_a_number_or_auto():
    from lightrag_ray.cli.main import _parser

    parse = _parser().parse_args
    assert parse(["index", "x", "--shards", "auto"]).shards == "auto"
    assert parse(["index", "x", "--shards", "5"]).shards == 5
    with pytest.raises(SystemExit):
        parse(["index", "x", "--shards", "0"])
    assert parse(["reshard", "--shards", "8"]).shards == 8
