"""Many "machines" on one host: each worker alone in its own network, mount and pid namespaces, on a bridge.

A :class:`Rack` makes a Linux bridge with an address of a private test range (``10.233.X.1/24``, X chosen free)
in this host's namespace, and per machine a network namespace joined to the bridge by a veth pair, with its own
address (``10.233.X.(10 + i)``).  Each machine's ``tfmapreduce worker --allow-network`` runs there as pid 1 of its
own pid namespace, with an empty private ``/tmp`` and ``/dev/shm`` (see ``namespaces.machine_argv``): the
client's files and processes are invisible to it, as another machine's are (but for the interpreter and the package,
bound back at their paths where they lie under ``/tmp``).  The client stays in this host's
namespace and reaches the machines over the bridge; ``beside=`` adds workers in this host's namespace too (on the
bridge's address), which do share the client's files.

Operations: :meth:`Rack.shape` (``tc``: rate and delay of a machine's link, both ways), :meth:`Rack.cut` and
:meth:`Rack.restore` (the bridge end of its veth down and up: a pulled cable), :meth:`Rack.kill` and
:meth:`Rack.restart` (the worker SIGKILLed, and started again on the same address), :meth:`Rack.traffic` (bytes
through a machine's link).  Closing the rack (the end of its ``with`` block, or a finalizer if it is never
closed) ends its processes by process group and removes the veths, namespaces, bridge and logs, whatever
happened; a rack whose process was SIGKILLed is swept by the next one made (:func:`sweep`).  Making one skips the
test, with the reason, where the OS refuses namespaces.

Used by ``tests/_cluster/test_machines.py`` and ``python -m benchmarks machines``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from namespaces import free_octet, ip, machine_argv, private_paths, require_netns, shape, unshare_works
from ports import free_port

import tfmapreduce as tmr

SUBNET = "10.233.{}.{}"
"""The rack's addresses: a /24 of this private range per rack, the bridge on .1, machine ``i`` on ``.(10 + i)``."""
PORT = 2222
"""Every machine's worker listens on this port of its own address (each has its own network namespace)."""

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child before exec: SIGKILL when the thread that started it ends
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@attrs.define(eq=False)
class Machine:
    """One worker of a rack: a "machine" of its own (``netns`` set) or a worker beside the client (``netns`` None)."""

    task: int
    """Its index in the job ``local`` of the rack's spec."""
    address: str
    """``ip:port`` as the spec names it."""
    netns: str | None
    """Its network namespace, None for a worker in this host's namespace."""
    link: str | None
    """The bridge end of its veth pair (``ip link set LINK down`` cuts it), None beside the client."""
    inner: str | None
    """The machine's end of the veth pair, inside ``netns``."""
    log: Path
    """Its worker's stdout and stderr."""
    argv: list[str]
    """The command that starts its worker."""
    process: subprocess.Popen[bytes] | None = None
    """The running worker (its own process group), None once killed."""

    @property
    def device(self) -> str:
        """Its first CPU device, e.g. ``/job:local/replica:0/task:2/device:CPU:0``."""
        return f"/job:local/replica:0/task:{self.task}/device:CPU:0"

    @property
    def remote(self) -> bool:
        """Whether it is a machine of its own (invisible to the client), not a worker beside the client."""
        return self.netns is not None


def _undo(steps: list[Callable[[], object]]) -> None:
    while steps:
        with contextlib.suppress(Exception):
            steps.pop()()


def _stop(machine: Machine) -> None:
    process, machine.process = machine.process, None
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


RACKS = Path("/run/tfmapreduce-racks")
"""One file per open rack, ``TAG.pid``, holding the pid of the process that made it: what :func:`sweep` goes by."""


def sweep() -> list[str]:
    """Remove what racks of processes now gone left behind (a client SIGKILLed runs no finalizer): their namespaces,
    veths and bridge.  Their workers died with them (``PR_SET_PDEATHSIG``).  Returns the names removed."""
    removed: list[str] = []
    for marker in sorted(RACKS.glob("*.pid")) if RACKS.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            if Path(f"/proc/{int(marker.read_text())}").exists():
                continue
        prefix = f"tmr{marker.stem}"
        names = [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.split()]
        links = [line.split(":")[1].strip().split("@")[0] for line in ip("-o", "link", "show").stdout.splitlines()]
        for name in names:
            if name.startswith(f"{prefix}m") and ip("netns", "del", name).returncode == 0:
                removed.append(name)
        for name in links:
            if name[: len(prefix) + 1] in (f"{prefix}b", f"{prefix}h") and ip("link", "del", name).returncode == 0:
                removed.append(name)
        marker.unlink(missing_ok=True)
    return removed


class Rack:
    """``machines`` workers, each on a "machine" of its own, plus ``beside`` workers in the client's namespace.

    The spec's job ``local`` lists the machines first (tasks 0 to machines − 1), then the workers beside the client.

    Example::

        with Rack(4) as rack, rack.cluster() as cluster:
            rack.shape(1, rate_bps=1e9, delay_ms=0.2)
            tmr.mean(x, cluster=cluster)
    """

    def __init__(self, machines: int, *, beside: int = 0, cpu_devices: int = 1, ready_timeout: float = 180.0) -> None:
        require_netns("a rack of machines in network namespaces")
        if not unshare_works("--mount", "--pid", "--fork", "--mount-proc"):
            pytest.skip("a rack's machines need pid and mount namespaces (unshare --mount --pid --fork): refused here")
        # what a worker runs (the interpreter, its libraries, the package) stays visible where it lies under /tmp
        package = Path(tmr.__file__).parents[1]
        needed = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), str(package)]
        self._keep = private_paths([*needed, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
        self._steps: list[Callable[[], object]] = []
        self._finalizer = weakref.finalize(self, _undo, self._steps)
        sweep()
        self.tag = secrets.token_hex(2)
        RACKS.mkdir(mode=0o700, exist_ok=True)
        marker = RACKS / f"{self.tag}.pid"
        marker.write_text(str(os.getpid()))
        self._steps.append(lambda: marker.unlink(missing_ok=True))  # the first step made, the last undone
        self.octet = free_octet(SUBNET)
        self.bridge = f"tmr{self.tag}b"
        self.host_ip = SUBNET.format(self.octet, 1)
        self.logs = logs = Path(tempfile.mkdtemp(prefix=f"tmr-rack-{self.tag}-"))
        self._steps.append(lambda: shutil.rmtree(logs, ignore_errors=True))  # the steps hold no reference to the rack
        self.shaping: dict[int, str] = {}
        try:
            bridge = self.bridge
            self._ip("link", "add", bridge, "type", "bridge")
            self._steps.append(lambda: ip("link", "del", bridge))
            self._ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            addresses = [f"{SUBNET.format(self.octet, 10 + i)}:{PORT}" for i in range(machines)]
            addresses += [f"{self.host_ip}:{free_port()}" for _ in range(beside)]
            self.spec = {"local": addresses}
            self.machines = [self._machine(i, addresses, cpu_devices) for i in range(len(addresses))]
            for machine in self.machines:
                self._start(machine)
            self._wait_ready(self.machines, ready_timeout)
        except BaseException:
            self.close()
            raise

    def _ip(self, *args: str) -> None:
        done = ip(*args)
        if done.returncode != 0:
            pytest.skip(f"cannot build the rack here: ip {' '.join(args)}: {done.stderr.strip()}")

    def _machine(self, task: int, addresses: list[str], cpu_devices: int) -> Machine:
        worker = [sys.executable, "-m", "tfmapreduce", "worker", "--cluster", json.dumps(self.spec)]
        worker += ["--job", "local", "--task", str(task), "--allow-network", "--cpu-devices", str(cpu_devices)]
        log = self.logs / f"task{task}.log"
        address = addresses[task]
        if address.startswith(f"{self.host_ip}:"):
            return Machine(task, address, None, None, None, log, worker)
        netns, link, inner = f"tmr{self.tag}m{task}", f"tmr{self.tag}h{task}", f"tmr{self.tag}n{task}"
        self._ip("netns", "add", netns)
        self._steps.append(lambda: ip("netns", "del", netns))
        self._ip("link", "add", link, "type", "veth", "peer", "name", inner)
        self._steps.append(lambda: ip("link", "del", link))  # takes its peer with it, wherever that is
        self._ip("link", "set", inner, "netns", netns)
        self._ip("link", "set", link, "master", self.bridge)
        self._ip("link", "set", link, "up")
        self._ip("-n", netns, "addr", "add", f"{address.rpartition(':')[0]}/24", "dev", inner)
        self._ip("-n", netns, "link", "set", inner, "up")
        self._ip("-n", netns, "link", "set", "lo", "up")
        return Machine(task, address, netns, link, inner, log, machine_argv(netns, worker, self._keep))

    def _start(self, machine: Machine) -> None:
        with open(machine.log, "ab") as log:
            machine.process = subprocess.Popen(
                machine.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: killpg ends the worker and its namespace's pid 1
                preexec_fn=_die_with_parent,
            )
        self._steps.append(lambda m=machine: _stop(m))

    def _wait_ready(self, machines: list[Machine], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(machines)
        while waiting:
            for machine in list(waiting):
                text = machine.log.read_text(errors="replace")
                if " ready on " in text.rpartition("--- started ---")[2]:
                    waiting.remove(machine)
                elif machine.process is None or machine.process.poll() is not None:
                    raise RuntimeError(f"the worker of task {machine.task} exited: {text[-2000:]}")
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"tasks {[m.task for m in waiting]} not ready within {timeout:.0f} s")
            time.sleep(0.2)

    # ------------------------------------------------------------------ what a test does with it

    @property
    def remote(self) -> list[Machine]:
        """The machines of their own (namespaces), in task order."""
        return [m for m in self.machines if m.remote]

    @property
    def beside(self) -> list[Machine]:
        """The workers in the client's namespace."""
        return [m for m in self.machines if not m.remote]

    def cluster(self) -> tmr.Cluster:
        """A new client of the rack (``tmr.Cluster.from_spec``), every task answering; close it (or use ``with``)."""
        deadline = time.monotonic() + 60
        while True:
            cluster = tmr.Cluster.from_spec(self.spec)
            try:
                cluster.devices  # noqa: B018 - every task answers
                return cluster
            except tmr.ClusterError:
                cluster.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def shape(self, task: int, *, rate_bps: float | None = None, delay_ms: float | None = None) -> str:
        """Shape machine ``task``'s link both ways (its namespace's end and the bridge's); ``None, None`` unshapes it.

        Returns what was set, in words (``netem`` where the kernel has it, else ``tbf``: rate only).
        """
        machine = self.machines[task]
        assert machine.link is not None, "only a machine's link can be shaped"
        assert machine.inner is not None
        said = shape(machine.link, rate_bps=rate_bps, delay_ms=delay_ms)
        shape(machine.inner, rate_bps=rate_bps, delay_ms=delay_ms, netns=machine.netns)
        self.shaping[task] = said
        return said

    def cut(self, task: int) -> None:
        """Pull machine ``task``'s cable: the bridge end of its veth goes down (packets dropped, nothing refused)."""
        link = self.machines[task].link
        assert link is not None, "only a machine's link can be cut"
        done = ip("link", "set", link, "down")
        assert done.returncode == 0, done.stderr

    def restore(self, task: int) -> None:
        """Plug machine ``task``'s cable back in."""
        link = self.machines[task].link
        assert link is not None
        done = ip("link", "set", link, "up")
        assert done.returncode == 0, done.stderr

    def kill(self, task: int) -> None:
        """SIGKILL task ``task``'s worker (its process group: the machine's pid namespace dies with it)."""
        _stop(self.machines[task])

    def restart(self, task: int, timeout: float = 120.0) -> None:
        """Start task ``task``'s worker again on the same address (killing it first if it runs); wait until ready."""
        machine = self.machines[task]
        _stop(machine)
        with open(machine.log, "a") as log:
            log.write("--- started ---\n")
        self._start(machine)
        self._wait_ready([machine], timeout)

    def traffic(self, task: int) -> tuple[int, int]:
        """Bytes through machine ``task``'s link so far: (received by the machine, sent by it)."""
        link = self.machines[task].link
        assert link is not None
        stats = Path("/sys/class/net") / link / "statistics"
        return int((stats / "tx_bytes").read_text()), int((stats / "rx_bytes").read_text())

    def close(self) -> None:
        """End every worker (by process group) and remove the namespaces, veths, bridge and logs."""
        self._finalizer()

    def __enter__(self) -> Rack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Rack({len(self.remote)} machines + {len(self.beside)} beside the client on {SUBNET.format(self.octet, 0)}/24)"
