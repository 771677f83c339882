"""``memorybus simulate``: many agents sharing changing knowledge, with ground truth.

- :mod:`~memorybus.simulation.world`: the seeded world and its ground truth
- :mod:`~memorybus.simulation.plan`: who observes what, who is asked what
- :mod:`~memorybus.simulation.agent`: the agent (a plain class; the actor is in
  :mod:`memorybus.actors.fleet`)
- :mod:`~memorybus.simulation.grading`, :mod:`~memorybus.simulation.audit`:
  answers graded against the truth, leaks, lost writes, delivery
- :mod:`~memorybus.simulation.chaos`: faults on demand
- :mod:`~memorybus.simulation.runner`: one run; :mod:`~memorybus.simulation.report`
  and :mod:`~memorybus.simulation.plots`: what it reports
- :mod:`~memorybus.simulation.demo`: the scripted three-agent walk-through
"""
