"""The seccomp filter of the terminal's sandbox: a classic BPF program, generated here (no
compiler, no libseccomp), that ``bwrap --seccomp FD`` loads before the command runs.

It refuses with ``EPERM`` what a shell never needs and what sandbox escapes and kernel exploits
lean on: tracing other processes, eBPF, the kernel keyring, userfaultfd, perf events, mounts
and namespaces, kexec, kernel modules, io_uring and reading other processes' memory. A system
call of another ABI (32-bit ``int 0x80`` or x32 on x86-64) kills the process: a filter keyed
on one ABI's numbers would let the other through.

``program(machine)`` returns the program for ``platform.machine()``, or None where the syscall
numbers are not known here (then the sandbox runs with its namespaces only, and says so).
"""

from __future__ import annotations

import errno
import struct

# What is refused, by name: (x86_64 number, aarch64 number; None where it does not exist).
DENIED: dict[str, tuple[int, int | None]] = {
    "ptrace": (101, 117),
    "syslog": (103, 116),
    "pivot_root": (155, 41),
    "acct": (163, 89),
    "mount": (165, 40),
    "umount2": (166, 39),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "iopl": (172, None),
    "ioperm": (173, None),
    "init_module": (175, 105),
    "delete_module": (176, 106),
    "quotactl": (179, 60),
    "kexec_load": (246, 104),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "unshare": (272, 97),
    "perf_event_open": (298, 241),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "setns": (308, 268),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "finit_module": (313, 273),
    "kexec_file_load": (320, 294),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
}

# clone(2) asking for a new user namespace is refused too (an unprivileged process may make one
# where the sandbox has no user namespace of its own), and clone3(2), whose flags a filter
# cannot read, answers ENOSYS: the C library then falls back to clone(2).
CLONE = (56, 220)
CLONE3 = 435
CLONE_NEWUSER = 0x10000000

# <linux/audit.h>: the architecture seccomp_data.arch names.
_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000  # x86-64's x32 ABI numbers carry this bit

# <linux/bpf_common.h>, <linux/seccomp.h>
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_NOSYS = 0x00050000 | errno.ENOSYS
_NR, _ARCH_AT, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]: its low half)

Jump = int | str  # a relative offset, or the label to jump to
Insn = tuple[int, Jump, Jump, int]


def program(machine: str) -> bytes | None:
    """The filter as ``struct sock_filter[]`` bytes, or None for an unknown architecture."""
    arch = _ARCH.get(machine)
    if arch is None:
        return None
    column = 0 if machine == "x86_64" else 1
    numbers = sorted({n for pair in DENIED.values() if (n := pair[column]) is not None})
    code: list[Insn | str] = [
        (_LD_W_ABS, 0, 0, _ARCH_AT),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, _KILL_PROCESS),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":
        code.append((_JGE_K, "kill", 0, _X32_BIT))
    code += [(_JEQ_K, "deny", 0, number) for number in numbers]
    code += [
        (_JEQ_K, "nosys", 0, CLONE3),
        (_JEQ_K, 0, "allow", CLONE[column]),
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET_K, "deny", "allow", CLONE_NEWUSER),
        "allow",
        (_RET_K, 0, 0, _ALLOW),
        "deny",
        (_RET_K, 0, 0, _DENY),
        "nosys",
        (_RET_K, 0, 0, _NOSYS),
        "kill",
        (_RET_K, 0, 0, _KILL_PROCESS),
    ]
    return b"".join(struct.pack("=HBBI", *insn) for insn in _assemble(code))


def _assemble(code: list[Insn | str]) -> list[tuple[int, int, int, int]]:
    """Labels (strings) become the offsets classic BPF jumps by (from the next instruction)."""
    at: dict[str, int] = {}
    count = 0
    for item in code:
        if isinstance(item, str):
            at[item] = count
        else:
            count += 1
    out: list[tuple[int, int, int, int]] = []
    for item in code:
        if isinstance(item, str):
            continue
        here = len(out) + 1
        op, jt, jf, k = item
        out.append(
            (
                op,
                at[jt] - here if isinstance(jt, str) else jt,
                at[jf] - here if isinstance(jf, str) else jf,
                k,
            )
        )
    return out
