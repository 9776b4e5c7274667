"""The contract between the run driver and a kind of job (:class:`Kind`): what a kind supplies, typed by its plan."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol, TypeVar

from .._base.errors import JobError
from .._base.plan import Plan
from .._io.source import Sources
from .call import Call
from .program import Builder, Program, Ready

P = TypeVar("P")
"""A kind's plan: a :class:`~tfmapreduce._base.plan.Plan`, or one that adds reducers (``KeyedPlan``, ``JoinPlan``)."""


class Kind(Protocol[P]):
    """What a kind of job supplies to the run driver; everything else is the driver's.  ``P`` is the type of its plan.

    A new kind implements these hooks (any class with them: a Protocol, not a base class) and runs with
    ``driver.run(kind, x, settings)``; ``tests/_engine/test_driver.py`` plugs in a kind of its own.
    """

    @property
    def identity(self) -> Hashable:
        """What its programs depend on besides the plan and inputs: kinds with equal identities share them."""

    @property
    def ready(self) -> dict[Hashable, Ready]:
        """Where the driver keeps this kind's plain runs ready to go again."""

    @property
    def phase(self) -> str:
        """What a run does once its shards are mapped, as its progress bar says (``"combine"``, ``"reduce"``...)."""

    @property
    def speculation(self) -> str | None:
        """None when the kind backs up shards with ``speculate=True`` (see ``_speculate``); else why not."""

    def sources(self, x: Any) -> tuple[Sources, Any]:
        """The run's inputs, and a note the kind keeps for its finish."""

    def plan(self, shards: Plan, call: Call) -> P:
        """The kind's plan over the routed shards (a Plan, or one that adds reducers)."""

    def variant(self, plan: P, call: Call) -> Hashable | None:
        """What else the program depends on; None for a program built for this run alone (not kept)."""

    def build(self, builder: Builder, plan: P, call: Call) -> Program:
        """The graph of ``plan`` (inside ``builder.graph``), finished with ``builder.program(...)``."""

    def finish(self, value: Any, program: Program | None, plan: P, call: Call) -> Any:
        """The run's result from what it fetched (``program`` is None after a speculative run)."""

    def failure(self, error: JobError) -> Exception | None:
        """The kind's own reading of a failed run (a named map-function error), or None."""
