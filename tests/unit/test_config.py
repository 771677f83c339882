import pytest

from memorybus import Config, ConfigError


def test_factories():
    c = Config.embedded("/tmp/x", num_shards=3)
    assert c.backend == "embedded" and c.num_shards == 3 and c.data_dir == "/tmp/x"
    r = Config.redis("redis://127.0.0.1:1/0")
    assert r.backend == "redis"
    with pytest.raises(AttributeError):
        c.num_shards = 4  # frozen


@pytest.mark.parametrize(
    "kw",
    [
        {"backend": "mongo"},
        {"backend": "redis"},
        {"num_shards": 0},
        {"namespace": "bad name!"},
        {"embedder_replicas": 0},
        {"embed_batch_size": 0},
        {"vector_backend": "faiss"},
        {"query_encoder": "gpu"},
    ],
)
def test_bad_config(kw):
    with pytest.raises(ConfigError):
        Config(**kw)


def test_model_path_defaults_to_shipped_model():
    import os

    assert os.path.isdir(Config().resolved_model_path())
