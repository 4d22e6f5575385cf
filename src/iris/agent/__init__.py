"""The agent: one turn = one event stream (see ``iris.events``).

Use::

    agent = Agent(config)                      # owns the provider clients and tools
    async with agent.run(TurnRequest(messages=[{"role": "user", "content": "hi"}])) as turn:
        async for event in turn:               # TurnStarted … TurnEnded | TurnFailed
            ...
        # turn.interrupt() from anywhere closes the upstream stream within 1 s; the turn then
        # ends with TurnEnded(reason="interrupted") carrying the text so far.
    await agent.aclose()

``run_with_callback`` is the design's ``stream_callback(text_delta | None)`` API on top.
"""

from iris.agent.approvals import ApprovalPolicy, Approvals
from iris.agent.core import Agent, Turn, TurnRequest, run_with_callback

__all__ = ["Agent", "ApprovalPolicy", "Approvals", "Turn", "TurnRequest", "run_with_callback"]
