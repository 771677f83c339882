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
        {"embedding_dim": 0},
        {"embedding_dim": 2.5},
        {"model_path": ""},
        {"model_fingerprint": ""},
        {"embedder_num_gpus": -1},
        {"embedder_num_gpus": True},
        {"embedder_num_gpus": 1.5},
        {"embedder_num_gpus": "1"},
        {"embed_gpu_batch_size": 0},
        {"embed_gpu_batch_size": 9000},
        {"embedder_pool": ""},
        {"embedder_pool": "a pool"},
        {"embedder_pool": 3},
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
    from memorybus.shard.build import open_shard

    # one shard: it owns every scope (a shard refuses memories of scopes routed elsewhere)
    cfg = Config.embedded(
        tmp_path, num_shards=1, embedding_dim=4, bus=BusPolicy(judge="tests.hooks:always_contradicts")
    )
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


def test_relative_data_dir_is_resolved_where_the_config_is_built(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = Config.embedded("data")
    assert c.data_dir == str(tmp_path / "data")
    assert c.shard_dir("shard-0") == str(tmp_path / "data" / "shard-0")
    monkeypatch.chdir("/")  # an actor elsewhere (another cwd) gets the same path
    import pickle

    assert pickle.loads(pickle.dumps(c)).shard_dir("shard-0") == str(tmp_path / "data" / "shard-0")


def test_storage_identity_names_where_the_data_lives():
    a = Config.embedded("/srv/a", num_shards=2)
    assert a.storage_identity() == Config.embedded("/srv/a", num_shards=2, namespace="x").storage_identity()
    assert a.storage_identity() != Config.embedded("/srv/b", num_shards=2).storage_identity()
    assert a.storage_identity() != Config.embedded("/srv/a", num_shards=3).storage_identity()
    r = Config.redis("redis://:s3cret@10.0.0.1:6380/0", data_dir="/srv/a")
    assert r.storage_identity()["redis_url"] == "redis://10.0.0.1:6380/0"  # never the password
    assert r.storage_identity() != Config.redis("redis://10.0.0.2:6380/0", data_dir="/srv/a").storage_identity()
    assert r.storage_identity() != a.storage_identity()


@pytest.mark.parametrize(
    ("policy", "kw", "field"),
    [
        ("BusPolicy", {"strategy": "loudest"}, "bus.strategy"),
        ("BusPolicy", {"authorities": "lead"}, "bus.authorities"),
        ("BusPolicy", {"authorities": ["lead", ""]}, "bus.authorities"),
        ("BusPolicy", {"near_duplicate": 1.5}, "bus.near_duplicate"),
        ("BusPolicy", {"contradiction": float("nan")}, "bus.contradiction"),
        ("BusPolicy", {"fact_half_life_days": 0}, "bus.fact_half_life_days"),
        ("BusPolicy", {"delivery_batch": 0}, "bus.delivery_batch"),
        ("BusPolicy", {"partitions": 1.5}, "bus.partitions"),
        ("BusPolicy", {"callback_retries": -1}, "bus.callback_retries"),
        ("BusPolicy", {"cursor_flush_seconds": 61}, "bus.cursor_flush_seconds"),
        ("BusPolicy", {"max_cas_retries": True}, "bus.max_cas_retries"),
        ("GraphPolicy", {"hops": -1}, "graph.hops"),
        ("GraphPolicy", {"fanout": 0}, "graph.fanout"),
        ("DecayPolicy", {"archive_below": 2.0}, "decay.archive_below"),
        ("DecayPolicy", {"min_age_days": -1}, "decay.min_age_days"),
        ("DecayPolicy", {"interval_seconds": 0}, "decay.interval_seconds"),
        ("DecayPolicy", {"protect_importance": "high"}, "decay.protect_importance"),
        ("ConsolidationPolicy", {"similarity": 0}, "consolidation.similarity"),
        ("ConsolidationPolicy", {"min_cluster": 0}, "consolidation.min_cluster"),
        ("ConsolidationPolicy", {"window_days": -3}, "consolidation.window_days"),
        ("ConsolidationPolicy", {"interval_seconds": float("nan")}, "consolidation.interval_seconds"),
        ("ConsolidationPolicy", {"summarizer": "no_such_module_xyz:f"}, "consolidation.summarizer"),
    ],
)
def test_every_policy_checks_its_own_fields(policy, kw, field):
    """A policy with a value out of its range is refused where it is built, naming the
    field (not later, in a shard or a scheduled run)."""
    from memorybus import config

    with pytest.raises(ConfigError) as err:
        getattr(config, policy)(**kw)
    assert field in str(err.value)
    getattr(config, policy)()  # the defaults are valid


def test_config_refuses_a_policy_of_the_wrong_kind():
    from memorybus.config import BusPolicy, DecayPolicy

    with pytest.raises(ConfigError, match="decay"):
        Config(decay=BusPolicy())
    with pytest.raises(ConfigError, match="bus"):
        Config(bus={"strategy": "recency"})
    assert Config(decay=DecayPolicy(min_age_days=0)).decay.min_age_days == 0
    assert BusPolicy(authorities=["lead", "role:ops"]).authorities == ("lead", "role:ops")


@pytest.mark.parametrize(
    "bad",
    [
        {"thread_members": -1},
        {"thread_members": 2.5},
        {"thread_members": True},
        {"neighbor_candidates": -3},
        {"dense_candidates": "50"},
        {"exact_dense_limit": -1},
        {"named_share": 1.5},
        {"named": float("nan")},
    ],
)
def test_ranking_counts_are_whole_numbers_and_shares_stay_on_their_scale(bad):
    from memorybus.config import RankingWeights

    with pytest.raises(ConfigError, match=next(iter(bad))):
        RankingWeights(**bad)
    assert RankingWeights(thread_members=0, exact_dense_limit=0, named_share=1.0).thread_members == 0


def test_gpu_embedder_reserves_gpus_and_cpu_default_reserves_none():
    from memorybus.actors import embedder_options
    from memorybus.actors.startup import bus_demand

    cpu = Config.embedded("/tmp/x")
    assert "num_gpus" not in embedder_options(cpu, 0)
    assert all("GPU" not in res for _, _, res in bus_demand(cpu))
    gpu = Config.embedded("/tmp/x", embedder_num_gpus=0.5, embedder_replicas=2, embedder_resources={"edge": 1})
    assert embedder_options(gpu, 1)["num_gpus"] == 0.5
    embedders = [res for what, _, res in bus_demand(gpu) if what == "embedder"]
    assert embedders == [{"edge": 1, "GPU": 0.5}] * 2
    assert all("GPU" not in res for what, _, res in bus_demand(gpu) if what != "embedder")


def test_a_shared_embedder_pool_is_named_per_model_and_detached_in_its_own_namespace():
    from memorybus.actors import embedder_actor_name, embedder_namespace, embedder_options

    own = Config.embedded("/tmp/x", namespace="a", model_fingerprint="f1")
    assert embedder_namespace(own) == "a" and embedder_actor_name(own, 0) == "a:embedder-0"
    assert "lifetime" not in embedder_options(own, 0)
    pooled = own.with_(embedder_pool="team")
    other_bus = pooled.with_(namespace="b", data_dir="/tmp/y")
    other_model = pooled.with_(model_fingerprint="f2")
    assert embedder_namespace(pooled) == "memorybus-embedders"
    assert embedder_actor_name(pooled, 1) == embedder_actor_name(other_bus, 1) != embedder_actor_name(pooled, 0)
    assert embedder_actor_name(pooled, 0) != embedder_actor_name(other_model, 0)  # another model: other replicas
    opts = embedder_options(pooled, 0)
    assert opts["namespace"] == "memorybus-embedders" and opts["lifetime"] == "detached"
    assert opts["name"] == embedder_actor_name(pooled, 0)


def test_a_bad_pool_name_in_the_environment_is_refused_before_ray_starts(tmp_path, monkeypatch):
    import memorybus as mb

    monkeypatch.setenv("MEMORYBUS_EMBEDDER_POOL", "no spaces allowed")
    with pytest.raises(ConfigError, match="MEMORYBUS_EMBEDDER_POOL='no spaces allowed'"):
        mb.connect(Config.embedded(tmp_path / "d"))
    assert not (tmp_path / "d").exists()
