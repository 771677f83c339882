"""BusSession against the OpenAI Agents SDK's own interfaces: its ``Session`` protocol,
and ``Runner.run`` with a session, driven by a local model (the SDK's ``Model`` base
class answering from the input it is given: no network, no API key)."""

import asyncio
import uuid

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner
from agents.memory import Session
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import memorybus as mb
from memorybus.integrations.openai_agents import BusSession

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    b = mb.connect(mb.Config.embedded(tmp_path_factory.mktemp("oaibus"), num_shards=2, namespace="oai_t"))
    yield b
    b.shutdown()


def context(org, user="alice"):
    return mb.Context(org, user, "assistant")


class EchoModel(Model):
    """Answers with how many user messages it was given and the first one's text."""

    def __init__(self):
        self.inputs = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):  # fmt: skip
        from agents.items import ModelResponse

        self.inputs.append(input)
        users = [i for i in input if isinstance(i, dict) and i.get("role") == "user"]
        text = f"{len(users)} user messages; the first: {users[0]['content']}"
        message = ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex[:8]}", type="message", role="assistant",
                                        status="completed",
                                        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])  # fmt: skip
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


def test_a_runner_keeps_its_history_on_the_bus_across_handles(bus):
    org = f"org{uuid.uuid4().hex[:8]}"
    session = BusSession("chat-1", bus, context(org))
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
    model = EchoModel()
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    run_config = RunConfig(tracing_disabled=True)

    async def two_runs():
        first = await Runner.run(agent, "my name is Ada", session=session, run_config=run_config)
        # a second handle on the same session, as another process would open it
        again = BusSession("chat-1", bus, context(org))
        second = await Runner.run(agent, "what is my name?", session=again, run_config=run_config)
        return first, second, await again.get_items()

    first, second, items = asyncio.run(two_runs())
    assert first.final_output == "1 user messages; the first: my name is Ada"
    assert second.final_output == "2 user messages; the first: my name is Ada"  # history came from the bus
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
    assert items[0]["content"] == "my name is Ada" and items[2]["content"] == "what is my name?"
    # the history is memories of the bus: another agent of the user recalls it
    hits = bus.recall("Ada", mb.Context(org, "alice", "assistant"), k=3)
    assert any("my name is Ada" in h.node.content for h in hits)


def test_session_operations_keep_order_duplicates_and_boundaries(bus):
    org = f"org{uuid.uuid4().hex[:8]}"
    s = BusSession("s1", bus, context(org))
    other_session = BusSession("s2", bus, context(org))
    bob = BusSession("s1", bus, context(org, "bob"))  # bob's scope: the same id, another history

    async def run():
        await s.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        await s.add_items([{"role": "user", "content": "hi"}])  # an equal item is kept, not merged
        await other_session.add_items([{"role": "user", "content": "elsewhere"}])
        await bob.add_items([{"role": "user", "content": "bob's"}])
        got = await s.get_items()
        last_two = await s.get_items(limit=2)
        popped = await s.pop_item()
        after_pop = await s.get_items()
        with pytest.raises(mb.InvalidRequest):
            await s.add_items([{"role": "user", "content": "ok"}, "not a dict"])
        unchanged = await s.get_items()
        await s.clear_session()
        return got, last_two, popped, after_pop, unchanged, await s.get_items(), await s.pop_item(), \
            await other_session.get_items(), await bob.get_items()

    got, last_two, popped, after_pop, unchanged, cleared, empty_pop, other, bobs = asyncio.run(run())
    assert [i["content"] for i in got] == ["hi", "hello", "hi"]
    assert [i["content"] for i in last_two] == ["hello", "hi"]
    assert popped == {"role": "user", "content": "hi"}
    assert [i["content"] for i in after_pop] == ["hi", "hello"] == [i["content"] for i in unchanged]
    assert cleared == [] and empty_pop is None
    assert [i["content"] for i in other] == ["elsewhere"] and [i["content"] for i in bobs] == ["bob's"]
    with pytest.raises(mb.InvalidRequest):
        BusSession("a/b", bus, context(org))


def test_concurrent_pops_never_return_the_same_item(bus):
    org = f"org{uuid.uuid4().hex[:8]}"
    s = BusSession("race", bus, context(org))

    async def run():
        await s.add_items([{"role": "user", "content": f"m{i}"} for i in range(6)])
        twin = BusSession("race", bus, context(org))
        return await asyncio.gather(*(x.pop_item() for x in (s, twin, s, twin))), await s.get_items()

    popped, left = asyncio.run(run())
    contents = [p["content"] for p in popped if p is not None]
    assert len(contents) == len(set(contents)) == 4
    assert sorted(contents + [i["content"] for i in left]) == sorted(f"m{i}" for i in range(6))
