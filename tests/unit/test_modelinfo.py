"""A model is whatever ``Config.model_path`` names: its dimension and its fingerprint are
read from its files, and a store refuses to open with a model other than the one whose
vectors it holds. Real models (the shipped MiniLM and one made from it), real SQLite."""

import shutil
from pathlib import Path

import pytest

from memorybus import Config, ConfigError
from memorybus.encoder.embedding import Embedder
from memorybus.encoder.modelinfo import model_dimension, model_fingerprint
from memorybus.errors import EmbeddingError
from memorybus.storage.identity import check_identity, marker_path
from memorybus.storage.sqlite import SqliteStore

pytestmark = pytest.mark.model


def test_the_dimension_is_read_from_the_model_files_and_matches_what_the_model_makes(
    embedder, model_path, projected_model_path
):
    assert model_dimension(model_path) == embedder.dim == 384
    assert Config().vector_dim() == 384
    projected = Embedder(projected_model_path, threads=1, cache_size=0)
    assert model_dimension(projected_model_path) == projected.dim == 48
    assert projected.encode(["a beagle"]).shape == (1, 48)
    assert Config(model_path=projected_model_path).vector_dim() == 48
    assert Config(model_path=projected_model_path, embedding_dim=7).vector_dim() == 7  # set explicitly: as given


def test_the_fingerprint_follows_the_weights_not_the_path(model_path, projected_model_path, tmp_path):
    copy = tmp_path / "minilm-copy"
    shutil.copytree(model_path, copy)
    assert model_fingerprint(str(copy)) == model_fingerprint(model_path)  # the same model moved
    assert model_fingerprint(projected_model_path) != model_fingerprint(model_path)
    tuned = tmp_path / "minilm-tuned"  # same architecture and sizes, other weights (a fine-tune)
    shutil.copytree(model_path, tuned)
    weights = tuned / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert model_fingerprint(str(tuned)) != model_fingerprint(model_path)


def test_a_relative_model_directory_is_resolved_where_the_config_is_built(model_path, tmp_path, monkeypatch):
    shutil.copytree(model_path, tmp_path / "mymodel")
    monkeypatch.chdir(tmp_path)
    cfg = Config(model_path="mymodel")
    monkeypatch.chdir("/")  # an actor's working directory
    assert cfg.model_path == str(tmp_path / "mymodel") and cfg.vector_dim() == 384
    assert Config(model_path="some-org/some-model").model_path == "some-org/some-model"  # a name stays a name


def test_a_model_that_is_neither_a_directory_nor_cached_is_named_in_the_error(tmp_path):
    with pytest.raises(EmbeddingError, match="no-such-org/no-such-model"):
        model_dimension("no-such-org/no-such-model")
    with pytest.raises(EmbeddingError, match="not in the local Hugging Face cache"):
        Config(model_path=str(tmp_path / "absent")).vector_dim()


def test_a_store_refuses_another_model_and_names_both(tmp_path, projected_model_path):
    cfg = Config.embedded(tmp_path / "data", num_shards=1)
    store = SqliteStore(str(tmp_path / "r.sqlite"))
    try:
        meta = check_identity(cfg, "shard-0", store)
        assert meta["model"] == cfg.model_label() and meta["embedding_dim"] == "384"
        before = (store.meta(), Path(marker_path(cfg, "shard-0")).read_text())
        other = cfg.with_(model_path=projected_model_path)
        with pytest.raises(ConfigError) as err:
            check_identity(other, "shard-0", store)
        text = str(err.value)
        assert cfg.model_label() in text and projected_model_path in text and "384" in text and "48" in text
        assert (store.meta(), Path(marker_path(cfg, "shard-0")).read_text()) == before  # refused: nothing changed
        assert check_identity(cfg, "shard-0", store) == meta  # its own model still opens it
        resolved = cfg.with_model_resolved()  # what connect hands the actors: read once, on the driver
        assert (resolved.embedding_dim, resolved.model_fingerprint) == (384, meta["model_fingerprint"])
        assert check_identity(resolved, "shard-0", store) == meta
        with pytest.raises(ConfigError):  # the shard checks the fingerprint it was given, not its own reading
            check_identity(resolved.with_(model_fingerprint="0" * 16), "shard-0", store)
    finally:
        store.close()


def test_a_store_written_before_models_were_recorded_adopts_the_configured_one(tmp_path, projected_model_path):
    cfg = Config.embedded(tmp_path / "data", num_shards=1)
    store = SqliteStore(str(tmp_path / "r.sqlite"))
    try:
        old = {"namespace": cfg.namespace, "shard": "shard-0", "num_shards": "1", "store_id": "s1", "created": "0"}
        store.set_meta(old)
        meta = check_identity(cfg, "shard-0", store)
        assert meta["model_fingerprint"] == model_fingerprint(cfg.resolved_model_path())
        assert store.meta() == meta  # recorded: from now on another model is refused
        with pytest.raises(ConfigError):
            check_identity(cfg.with_(model_path=projected_model_path), "shard-0", store)
    finally:
        store.close()
