"""The contract between the run driver and a kind of job (:class:`Kind`): what a kind supplies, typed by its plan."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from .._base.errors import JobError
from .._base.plan import Plan
from .._io.source import Sources
from .._options import RunOptions
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
    def refused(self) -> Mapping[str, str]:
        """The run options the kind does not take beyond their defaults, each with the message that refuses it
        (``{value!r}`` stands for the value given); the driver checks them once, as a run starts (:func:`refuse`)."""

    def sources(self, x: Any) -> tuple[Sources, Any]:
        """The run's inputs, and a note the kind keeps for its finish."""

    def plan(self, shards: Plan, call: Call) -> P:
        """The kind's plan over the routed shards (a Plan, or one that adds reducers)."""

    def variant(self, plan: P, call: Call) -> Hashable | None:
        """What else the program depends on; None for a program built for this run alone (not kept)."""

    def shape_of(self, plan: P) -> Hashable | None:
        """What its program reads of ``plan`` where no input's graph holds its row counts (resident data read through
        fed handles): the plan's shape, so runs over fresh data of the same shape share one program; None where the
        program depends on the whole plan (its shards' rows included)."""

    def build(self, builder: Builder, plan: P, call: Call) -> Program:
        """The graph of ``plan`` (inside ``builder.graph``), finished with ``builder.program(...)``."""

    def finish(self, value: Any, program: Program | None, plan: P, call: Call) -> Any:
        """The run's result from what it fetched (``program`` is None after a speculative run)."""

    def failure(self, error: JobError, plan: P) -> Exception | None:
        """The kind's own reading of a failed run of ``plan`` (a named map-function error), or None."""


P_contra = TypeVar("P_contra", contravariant=True)


@runtime_checkable
class CleansUp(Protocol[P_contra]):
    """A kind whose failed runs may leave work going on its tasks (a write's parts still being written): the driver
    calls :meth:`clean_up` once a run of it failed, before it raises."""

    def clean_up(self, plan: P_contra, call: Call, error: BaseException) -> None:
        """After a run of ``plan`` failed with ``error``: undo what its tasks may still be doing; best effort, raising
        nothing."""


@attrs.define(eq=False, repr=False)
class KindBase(Generic[P]):
    """The defaults a kind shares: its plain runs kept ready, every run option taken, no reading of its own failures.

    A kind subclasses it (an attrs class), names what it refuses in ``refused`` and implements the rest of
    :class:`Kind`: ``identity``, ``phase``, ``sources``, ``plan``, ``variant``, ``build`` and ``finish``.
    """

    ready: dict[Hashable, Ready] = attrs.field(factory=dict, init=False)
    """Where the driver keeps this kind's plain runs ready to go again."""
    refused: ClassVar[Mapping[str, str]] = {}

    def shape_of(self, plan: P) -> Hashable | None:
        return None  # the whole plan: a kind's graph may hold its shards' rows

    def failure(self, error: JobError, plan: P) -> Exception | None:
        return None


_DEFAULTS = {f.name: f.default for f in attrs.fields(RunOptions)}


def refuse(refused: Mapping[str, str], settings: RunOptions) -> None:
    """TypeError where ``settings`` gives an option a kind does not take (``refused``: any value but its default).

    Examples:
        >>> refuse({"speculate": "speculate={value!r} does not apply to this example; drop speculate="}, RunOptions.of(speculate=True))
        Traceback (most recent call last):
        TypeError: speculate=True does not apply to this example; drop speculate=
    """
    for name, message in refused.items():
        value = getattr(settings, name)
        if value != _DEFAULTS[name]:
            raise TypeError(message.format(value=value))
