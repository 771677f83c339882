"""A Ray Job that uses the cluster's memorybus (README, "Running on a cluster").

    ray dashboard cluster.yaml &     # forwards the job API to 127.0.0.1:8265
    ray job submit --address http://127.0.0.1:8265 --working-dir deploy -- python job_example.py

Ray runs the entrypoint on the head with RAY_ADDRESS set (memorybus joins that Ray)
and the head's environment (MEMORYBUS_REDIS_URL). Shards stay on nodes with the
memorybus_shard resource: never on spot nodes.
"""

import os

import memorybus as mb


def main() -> None:
    cfg = mb.Config.redis(
        os.environ["MEMORYBUS_REDIS_URL"],
        namespace=os.environ.get("MEMORYBUS_NAMESPACE", "memorybus"),
        data_dir=os.environ.get("MEMORYBUS_DATA_DIR", "/home/ray/memorybus/data"),
        shard_resources={"memorybus_shard": 0.01},
        embedder_resources={"memorybus_shard": 0.01},
        detached=True,  # the bus outlives this job; the next job joins it
    )
    with mb.connect(cfg) as bus:
        ctx = mb.Context(org="acme", user="u1", agent="job-example")
        bus.remember("The cluster example job ran", ctx, kind="semantic")
        for hit in bus.recall("did the example job run?", ctx, k=3):
            print(f"{hit.score:.3f} {hit.node.content}")
        print(bus.stats()["memories"], "memories on", len(bus.stats()["shards"]), "shards")


if __name__ == "__main__":
    main()
