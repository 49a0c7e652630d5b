"""Build the sandbox's file system view and drop privileges; runs inside fresh Linux namespaces.

The sandbox worker is started as ``unshare --user --map-root-user --mount --pid --fork --kill-child --net --ipc
--uts`` (see ``pool.py``), so it is process 1 of a new PID namespace and root *inside* a new user namespace,
which lets it mount file systems in its own mount namespace (invisible to the host). ``enter_jail`` then

1. mounts a small tmpfs on ``root`` (an empty host directory) and builds there a minimal tree:
   read-only, non-recursive bind mounts of the system directories (``/usr``, ``/lib*``, ``/bin``, ``/sbin``), of the
   Python installation and its site-packages, and of ``/etc/ld.so.cache`` and ``/etc/localtime``; nothing else of
   the host (no home directories, no project or data directories, no ``/tmp``, no ``/sys``);
2. ``/dev``: a tmpfs holding only ``null zero full random urandom`` (bind mounts of the host nodes, still usable),
   the ``fd``/``stdin``/``stdout``/``stderr`` links, its own empty tmpfs on ``/dev/shm`` (the only writable place
   besides the scratch directory) and on ``/dev/mqueue``; ``/dev`` itself is then remounted read-only;
3. ``/proc``: a fresh read-only procfs of the new PID namespace (only the sandbox's own processes are visible);
4. ``/scratch``: a size-limited tmpfs with ``home`` and ``tmp`` (``$HOME`` and ``$TMPDIR``), the working area;
5. remounts the tree read-only, ``pivot_root``s into it and detaches the old root, so no host path is reachable;
6. sets ``no_new_privs`` and drops every capability (bounding, ambient, effective, permitted, inheritable), so
   nothing in the sandbox can undo a mount, mount anything, or ptrace a process it does not own.

``forbid_new_processes`` installs a seccomp filter (in every child that runs a program, jailed or not): creating
a process (fork, vfork, clone without CLONE_THREAD) fails with EPERM, clone3 with ENOSYS (so libc falls back to
clone), and system calls of another ABI (32-bit ``int 0x80``, x32) fail with ENOSYS; threads still work. Fork
bombs and subprocesses thus fail at once, even for root, where RLIMIT_NPROC does not apply. The filter also refuses
(EPERM) the ways to hold memory that the address-space limit does not count and that can outlive the process:
``memfd_create`` and ``memfd_secret`` (anonymous files, written without mapping them), System V ``shmget`` and
``msgget`` (segments and queues that stay in the IPC namespace after the run). Files on the tmpfs mounts are bounded
by their size (``_build_dev``, ``_build_scratch``); the worker adds per-process file-size and descriptor limits.
Both the jail and the filter need the architecture's system call numbers (``_ARCH``: x86_64, aarch64); elsewhere
neither is used.

Everything here is standard library + ``ctypes`` calls into libc (mount, umount2, pivot_root, capset, prctl).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

__all__ = ["enter_jail", "forbid_new_processes", "capabilities", "JAIL_HOME", "JAIL_TMP"]

SCRATCH = "/scratch"
JAIL_HOME, JAIL_TMP = SCRATCH + "/home", SCRATCH + "/tmp"  # $HOME and $TMPDIR inside the jail
DEVICE_NODES = ("null", "zero", "full", "random", "urandom")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_ST_KEEP = sum(getattr(os, flag, 0) for flag in ("ST_NOEXEC", "ST_NOATIME", "ST_NODIRATIME", "ST_RELATIME"))
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# Per architecture: pivot_root's syscall number, the seccomp audit architecture, the numbers of clone and clone3,
# and of the calls refused with EPERM (aarch64 has no fork or vfork). Elsewhere there is no jail and no seccomp filter.
_ARCH = {
    "x86_64": (155, 0xC000003E, 56, 435, {"fork": 57, "vfork": 58, "memfd_create": 319, "memfd_secret": 447,
                                          "shmget": 29, "msgget": 68}),
    "aarch64": (41, 0xC00000B7, 220, 435, {"memfd_create": 279, "memfd_secret": 447, "shmget": 194, "msgget": 186}),
}
_X32_SYSCALL_BIT, CLONE_THREAD = 0x40000000, 0x00010000
_RET_ALLOW, _RET_EPERM, _RET_ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target} ({fstype}, flags {flags:#x})")


def _bind_readonly(source: str, target: str, devices: bool = False) -> None:
    """Non-recursive read-only bind of ``source`` on ``target`` (nodev unless ``devices``), keeping locked flags."""
    _mount(source, target, None, MS_BIND)
    keep = os.statvfs(source).f_flag & _ST_KEEP  # ST_* and MS_* share these bit values
    nodev = 0 if devices else MS_NODEV
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | nodev | keep)


def _make_mount_point(root: str, path: str, is_dir: bool) -> str:
    target = root + path
    os.makedirs(target if is_dir else os.path.dirname(target), exist_ok=True)
    if not is_dir and not os.path.exists(target):
        open(target, "w").close()
    return target


def _host_paths() -> list[str]:
    """System directories and files plus the Python installation and site-packages, parents first."""
    import site

    python = [sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))]
    python += [p for p in site.getsitepackages() if os.path.isdir(p)]
    paths = {os.path.realpath(p) for p in python} | {p for p in SYSTEM_DIRS + SYSTEM_FILES if os.path.lexists(p)}
    return sorted(paths, key=lambda p: (p.count("/"), p))


def _populate_root(root: str) -> None:
    for path in _host_paths():
        if os.path.islink(path) and path in SYSTEM_DIRS:  # merged /usr: /bin -> usr/bin
            os.symlink(os.readlink(path), root + path)
        elif not os.path.exists(root + path) or not os.path.ismount(root + path):
            _bind_readonly(path, _make_mount_point(root, path, os.path.isdir(path)))


def _build_dev(root: str) -> None:
    dev = root + "/dev"
    os.mkdir(dev)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    for name in DEVICE_NODES:
        _bind_readonly("/dev/" + name, _make_mount_point(root, "/dev/" + name, is_dir=False), devices=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")
    os.mkdir(dev + "/shm")
    os.mkdir(dev + "/mqueue")
    _mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=16m,nr_inodes=1024,mode=1777")
    _mount("tmpfs", dev + "/mqueue", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
    _mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)


def _build_scratch(root: str, scratch_bytes: int) -> None:
    scratch = root + SCRATCH
    os.mkdir(scratch)
    _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_bytes},nr_inodes=4096,mode=0777")
    for sub in (JAIL_HOME, JAIL_TMP):
        os.mkdir(root + sub)


def _pivot_into(root: str) -> None:
    if platform.machine() not in _ARCH:
        raise OSError(f"no jail for {platform.machine()}: pivot_root's syscall number is not known here")
    number = _ARCH[platform.machine()][0]
    os.chdir(root)
    _check(_libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach old root")
    os.chdir("/")


def _drop_privileges() -> None:
    """no_new_privs, empty bounding and ambient sets, then capset to nothing."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two __user_cap_data_struct, all zero
    _check(_libc.capset(header, data), "capset")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _seccomp_program(arch: int, clone: int, clone3: int, refused: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """Classic BPF as (code, jump-if-true, jump-if-false, k); a jump skips that many instructions."""
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    checks = 2 + len(refused) + 3  # x32, clone3, each refused call, then clone and its flags
    allow, eperm, enosys = 4 + checks, 5 + checks, 6 + checks  # where the three returns are

    def to(target: int, at: int) -> int:
        return target - at - 1

    program = [(load, 0, 0, 4),         # 0: A = seccomp_data.arch
               (jeq, 1, 0, arch),       # 1: native ABI -> 3
               (ret, 0, 0, _RET_ENOSYS),  # 2: 32-bit int 0x80 and other ABIs
               (load, 0, 0, 0)]         # 3: A = seccomp_data.nr
    program.append((jge, to(enosys, 4), 0, _X32_SYSCALL_BIT))  # the x32 ABI
    program.append((jeq, to(enosys, 5), 0, clone3))  # ENOSYS: libc falls back to clone
    for at, number in enumerate(refused.values(), start=6):
        program.append((jeq, to(eperm, at), 0, number))
    at = len(program)
    program += [(jeq, 0, to(allow, at), clone),  # clone -> its flags, anything else -> allow
                (load, 0, 0, 16),  # A = low 32 bits of args[0], the clone flags
                (jset, to(allow, at + 2), to(eperm, at + 2), CLONE_THREAD),  # a thread, or a process
                (ret, 0, 0, _RET_ALLOW), (ret, 0, 0, _RET_EPERM), (ret, 0, 0, _RET_ENOSYS)]
    return program


def forbid_new_processes() -> bool:
    """Install the seccomp filter described in the module doc (irreversible, inherited by threads).

    Returns False, doing nothing, on architectures without a known system call table (see ``_ARCH``)."""
    if platform.machine() not in _ARCH:
        return False
    program = _seccomp_program(*_ARCH[platform.machine()][1:])
    filters = (_SockFilter * len(program))(*(_SockFilter(*instruction) for instruction in program))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_SockFprog(len(program), filters)), 0, 0),
           "seccomp filter")
    return True


def capabilities() -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of this process, from /proc/self/status."""
    with open("/proc/self/status") as handle:
        return {k: int(v, 16) for k, v in (line.split(":") for line in handle) if k.startswith("Cap")}


def enter_jail(root: str, scratch_bytes: int) -> None:
    """Build the jail on ``root`` (an empty directory), move into it and drop all privileges (see module doc)."""
    if os.getpid() != 1:
        raise RuntimeError("enter_jail must run as process 1 of a fresh PID namespace")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    _populate_root(root)
    _build_dev(root)
    os.mkdir(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    _build_scratch(root, scratch_bytes)
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _pivot_into(root)
    _drop_privileges()
    if any(capabilities().values()):
        raise RuntimeError(f"capabilities left after dropping them: {capabilities()}")
