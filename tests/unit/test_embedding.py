"""The real all-MiniLM-L6-v2 model: batching, caching, ordering."""

import asyncio
import itertools

import numpy as np
import pytest

from memorybus import InvalidRequest
from memorybus.encoder.embedding import BatchingEmbedder

pytestmark = pytest.mark.model


def test_encode_normalised_ordered_and_cached(embedder):
    texts = ["the cat sat on the mat", "quarterly revenue grew", "the cat sat on the mat"]
    before = embedder.encoded
    v = embedder.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[2])
    assert embedder.encoded - before <= 2  # duplicate encoded once
    sim = v @ v.T
    assert sim[0, 1] < 0.5
    hits = embedder.cache_hits
    again = embedder.encode(["quarterly revenue grew"])
    assert embedder.cache_hits == hits + 1
    assert np.array_equal(again[0], v[1])


def test_similar_texts_are_close(embedder):
    v = embedder.encode(
        ["I love programming in Rust", "Rust is my favourite language", "The weather is rainy today"]
    )
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_rejects_a_bare_string(embedder):
    with pytest.raises(InvalidRequest):
        embedder.encode("oops")


def test_batching_merges_concurrent_requests_and_keeps_order(embedder):
    batching = BatchingEmbedder(embedder, max_batch=16)
    long_req = [f"ingest item number {i} about topic {i % 7}" for i in range(40)]
    queries = [[f"query {i} on subject {i * 3}"] for i in range(6)]

    async def main():
        return await asyncio.gather(batching.encode(long_req), *(batching.encode(q) for q in queries))

    results = asyncio.run(main())
    assert np.allclose(results[0], embedder.encode(long_req), atol=1e-5)
    for q, r in zip(queries, results[1:], strict=True):
        assert np.allclose(r, embedder.encode(q), atol=1e-5)
    # 46 texts in batches of at most 16 -> at least 3 batches, but far fewer than 7 calls
    assert 3 <= batching.batches <= 5


def test_requests_queued_in_order_are_answered_in_order(embedder):
    """The batching queue serves the oldest long request first, so a shard that asks for
    one call's vectors before the next call's gets them first (memorybus.actors.ingest):
    a later request never finishes before an earlier one, and each gets its own rows."""
    batching = BatchingEmbedder(embedder, max_batch=32)
    requests = [[f"request {r} text {i} about topic {i * 7 % 13}" for i in range(80)] for r in range(4)]
    finished: list[int] = []

    async def one(r: int):
        out = await batching.encode(requests[r])
        finished.append(r)
        return out

    async def main():
        tasks = [asyncio.ensure_future(one(r)) for r in range(4)]
        return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    assert finished == [0, 1, 2, 3]
    for texts, out in zip(requests, results, strict=True):
        assert np.allclose(out[[0, 41, -1]], embedder.encode([texts[0], texts[41], texts[-1]]), atol=1e-5)
    assert batching.batches == 10  # 320 texts, every batch full: a request's tail shares one with the next's head


def test_long_requests_are_batched_by_length_and_returned_in_order(embedder, monkeypatch):
    """A long request (ingest) is cut into model batches in order of length, so a batch
    of short texts is not padded to a long one; the caller gets its own order back."""
    batching = BatchingEmbedder(embedder, max_batch=8)
    texts = [f"short {i}" if i % 2 else f"a much longer memory text, number {i}, " * (1 + i % 5) for i in range(40)]
    seen: list[list[str]] = []
    real = embedder.encode

    def recording(batch):
        seen.append(list(batch))
        return real(batch)

    monkeypatch.setattr(embedder, "encode", recording)
    out = asyncio.run(batching.encode(texts))
    monkeypatch.undo()
    assert np.allclose(out, embedder.encode(texts), atol=1e-5)
    assert sorted(t for b in seen for t in b) == sorted(texts) and len(seen) == 5
    for longer, shorter in itertools.pairwise(seen):
        assert min(map(len, longer)) >= max(map(len, shorter))


def test_lean_path_gives_the_sentence_transformers_vectors(embedder, model_path):
    """The lean model (loaded by transformers without sentence-transformers; transformer
    + mean pooling + normalisation run directly) must return what
    ``SentenceTransformer.encode`` returns, for every kind of text."""
    from sentence_transformers import SentenceTransformer

    assert embedder._lean is not None and embedder.model is None  # all-MiniLM-L6-v2 qualifies
    assert embedder.dim == 384 and embedder._lean[2] == 256
    texts = [
        "  padded with spaces  ",
        "",
        "x",
        "Caroline: I went to the support group yesterday! " * 40,  # past the 256-token limit
        "Ünïcödé naïve café 🎉",
        "tabs\tand\nnewlines",
        *(f"memory number {i} " * (i % 13 + 1) for i in range(70)),  # several length-sorted batches
    ]
    st = SentenceTransformer(model_path, device="cpu")
    reference = st.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    lean = embedder._forward(list(texts))
    assert lean.shape == reference.shape
    assert np.abs(lean - reference).max() < 1e-5
    assert [embedder.tokenizer_count(t) for t in texts[:4]] == [
        len(st.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts[:4]]


def test_a_model_with_other_settings_is_not_loaded_lean(model_path, tmp_path):
    """Only a model lean loading reproduces exactly skips SentenceTransformer."""
    import json
    import shutil

    from memorybus.encoder.embedding import lean_spec

    assert lean_spec(model_path) == 256
    copy = tmp_path / "m"
    shutil.copytree(model_path, copy)
    config = json.loads((copy / "sentence_bert_config.json").read_text())
    (copy / "sentence_bert_config.json").write_text(json.dumps({**config, "do_lower_case": True}))
    assert lean_spec(str(copy)) is None
    (copy / "sentence_bert_config.json").write_text(json.dumps(config))
    pooling = json.loads((copy / "1_Pooling" / "config.json").read_text())
    (copy / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode_cls_token": True}))
    assert lean_spec(str(copy)) is None
    assert lean_spec(str(tmp_path / "nowhere")) is None



@pytest.mark.parametrize("broken", ["missing", "empty", "bad_config", "bad_weights"])
def test_a_model_that_cannot_load_is_an_embedding_error(tmp_path, broken):
    """Each way a model folder can be wrong raises EmbeddingError naming the path (the
    loader catches the types these failures raise, not every Exception)."""
    from memorybus import EmbeddingError
    from memorybus.encoder.embedding import Embedder

    path = tmp_path / "model"
    if broken != "missing":
        path.mkdir()
    if broken == "bad_config":
        (path / "config.json").write_text("{not json")
    if broken == "bad_weights":
        (path / "config.json").write_text('{"model_type": "bert"}')
        (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(EmbeddingError, match="cannot load model from"):
        Embedder(str(path))


@pytest.mark.parametrize("device", ["gpu0", "tpu", "cuda:99"])
def test_a_device_this_process_cannot_use_is_an_embedding_error(model_path, device):
    """A GPU embedder asks for ``cuda``: a device torch cannot name, one that is not CPU or
    CUDA, or a GPU this process does not see fails at load with EmbeddingError."""
    from memorybus import EmbeddingError
    from memorybus.encoder.embedding import Embedder

    with pytest.raises(EmbeddingError, match=f"device '{device}'"):
        Embedder(model_path, device=device)


def test_an_explicit_cpu_device_gives_the_default_vectors(embedder, model_path):
    from memorybus.encoder.embedding import Embedder

    cpu = Embedder(model_path, device="cpu", cache_size=0)
    assert cpu.device == "cpu"
    texts = ["the staging database lives in Frankfurt", "tea at four"]
    assert np.allclose(cpu.encode(texts), embedder.encode(texts), atol=1e-6)
