"""``python -m memorybus.cli``: the ``memorybus`` command."""

from memorybus.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
