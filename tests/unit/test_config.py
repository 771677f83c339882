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


def test_hooks_are_callables_or_import_paths_checked_when_the_config_is_made():
    import json
    from dataclasses import replace

    from memorybus.config import BusPolicy, resolve_hook
    from tests.hooks import always_contradicts, tagged_summary

    assert resolve_hook("json:dumps", "x") is json.dumps
    assert resolve_hook("json.dumps", "x") is json.dumps
    assert resolve_hook(None, "x") is None and resolve_hook(len, "x") is len
    cfg = Config(bus=BusPolicy(judge="tests.hooks:always_contradicts"))
    assert resolve_hook(cfg.bus.judge, "bus.judge") is always_contradicts
    cfg = cfg.with_(consolidation=replace(cfg.consolidation, summarizer="tests.hooks:tagged_summary"))
    assert resolve_hook(cfg.consolidation.summarizer, "consolidation.summarizer") is tagged_summary
    for bad in ("no_such_module_xyz:f", "json:no_such_function", "json:__name__", "", 42):
        with pytest.raises(ConfigError):
            Config(bus=BusPolicy(judge=bad))


def test_the_configured_judge_reaches_the_shard(tmp_path):
    import numpy as np

    from memorybus import Context, MemoryNode
    from memorybus.config import BusPolicy
    from memorybus.storage.factory import open_shard

    # one shard: it owns every scope (a shard refuses memories of scopes routed elsewhere)
    cfg = Config.embedded(tmp_path, num_shards=1, embedding_dim=4, bus=BusPolicy(judge="tests.hooks:always_contradicts"))
    shard = open_shard(cfg, "shard-0")
    ctx = Context("acme", "u1")
    v = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    w = np.array([0.9, 0.1, 0.0, 0.0], dtype=np.float32)
    (a,) = shard.put_many(ctx, [MemoryNode(content="The office opens at nine", scope=ctx.scope, kind="semantic")], [v])
    (b,) = shard.put_many(ctx, [MemoryNode(content="The office opens early", scope=ctx.scope, kind="semantic")],
                          [w / np.linalg.norm(w)])  # fmt: skip
    # no negation, no numbers: only the configured judge calls these a contradiction
    assert a.id in b.contradicts
    shard.close()
