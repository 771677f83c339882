"""``memorybus ui``: a local, read-only web page over a bus's memories, for its operator.

- :mod:`~memorybus.inspector.readonly` opens a data directory's stores read-only;
- :mod:`~memorybus.inspector.source` and :mod:`~memorybus.inspector.views` turn them
  into JSON-ready views (scopes, memories and search, fact timelines, subscriptions,
  maintenance, a simulation's report);
- :mod:`~memorybus.inspector.guard` checks the operator's credential on every data request;
- :mod:`~memorybus.inspector.app` is the ASGI app (starlette) serving the API and the page
  in ``static/`` (plain HTML, JS and CSS: no build step, nothing from the network);
- :mod:`~memorybus.inspector.cli` is the command.
"""
