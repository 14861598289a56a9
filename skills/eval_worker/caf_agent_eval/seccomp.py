"""The system-call filter of the judging child, installed after the build and before the
submission's extension is loaded or model_new.py is imported (child.py).

It is installed with the system's libseccomp (`libseccomp.so.2`, Debian's libseccomp2,
through ctypes: nothing to compile, and the library turns the rules into a BPF program for
this architecture). After it, in this process and every thread it starts:

- new processes are impossible: fork/vfork, and clone without CLONE_THREAD, kill the
  process (SIGSYS); clone3 answers ENOSYS (its flags sit in memory a filter cannot read),
  so glibc falls back to clone, where the rule above applies. Threads stay possible: torch's
  OpenMP pool and the CUDA driver start theirs lazily, after the filter (the dispatcher
  guard and the thread-count check cover what runs on them);
- execve/execveat, socket/socketpair, ptrace, process_vm_readv/writev kill the process;
- kill/tgkill answer EPERM unless aimed at this process (no signalling the worker, the fork
  server or the next job's child);
- opening a file for writing (O_WRONLY, O_CREAT, O_TRUNC, O_APPEND and, on a CPU, O_RDWR),
  creat, unlink, rename, mkdir, link, chmod, truncate answer EACCES: Python's bytecode
  cache write fails silently, as on a read-only disk. On CUDA, O_RDWR stays open: the
  driver opens device nodes read-write lazily (a residual risk in docs/JUDGE.md);
- io_uring, bpf, perf_event_open, userfaultfd, mount/unshare/setns and the like answer
  EPERM (each is a way around the rules above or into the kernel).
Writes to already-open descriptors are not filtered: the child's pipes, memfd arenas and
its log are what it holds (the fork server passes it exactly those).
"""
from __future__ import annotations

import ctypes
import errno
import functools
import os

# libseccomp's constants (seccomp.h).
ACT_ALLOW = 0x7FFF0000
ACT_KILL_PROCESS = 0x80000000
CMP_NE, CMP_EQ, CMP_MASKED_EQ = 1, 4, 7
CLONE_THREAD = 0x00010000
O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND = 0o1, 0o2, 0o100, 0o1000, 0o2000


def act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class SeccompError(RuntimeError):
    """The filter could not be installed (the judge's own failure, not the submission's)."""


KILL = ["fork", "vfork", "execve", "execveat", "socket", "socketpair", "ptrace",
        "process_vm_readv", "process_vm_writev"]
DENY_FILES = ["creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir",
              "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod",
              "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "mknod",
              "mknodat", "utimes", "utimensat", "setxattr", "lsetxattr", "fsetxattr"]
DENY_OTHER = ["io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
              "perf_event_open", "userfaultfd", "mount", "umount2", "unshare", "setns",
              "pivot_root", "chroot", "init_module", "finit_module", "delete_module",
              "kexec_load", "keyctl", "add_key", "request_key", "tkill", "name_to_handle_at",
              "open_by_handle_at", "pidfd_open", "pidfd_send_signal", "pidfd_getfd"]


def load_library() -> None:
    """Loads libseccomp ahead of time (the fork server does, so children need not)."""
    _lib()


@functools.lru_cache(maxsize=1)
def _lib():
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as e:
        raise SeccompError(f"libseccomp.so.2 is not installed (Debian: libseccomp2): {e}") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def install(allow_rdwr_open: bool = False) -> None:
    """Installs the filter in this process (irreversible). Raises SeccompError."""
    lib = _lib()
    ctx = lib.seccomp_init(ACT_ALLOW)
    if not ctx:
        raise SeccompError("seccomp_init failed")
    me = os.getpid()
    try:
        def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a system call on this architecture (e.g. fork on arm64)
            arr = (ArgCmp * max(1, len(cmps)))(*[ArgCmp(*c) for c in cmps])
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
            if rc < 0:
                raise SeccompError(f"seccomp rule for {name} failed ({os.strerror(-rc)})")

        for name in KILL:
            rule(ACT_KILL_PROCESS, name)
        rule(ACT_KILL_PROCESS, "clone", (0, CMP_MASKED_EQ, CLONE_THREAD, 0))
        rule(act_errno(errno.ENOSYS), "clone3")
        rule(act_errno(errno.EPERM), "kill", (0, CMP_NE, me, 0))
        rule(act_errno(errno.EPERM), "tgkill", (0, CMP_NE, me, 0))
        write_bits = [O_WRONLY, O_CREAT, O_TRUNC, O_APPEND] + ([] if allow_rdwr_open else [O_RDWR])
        for bit in write_bits:
            rule(act_errno(errno.EACCES), "open", (1, CMP_MASKED_EQ, bit, bit))
            rule(act_errno(errno.EACCES), "openat", (2, CMP_MASKED_EQ, bit, bit))
        rule(act_errno(errno.ENOSYS), "openat2")  # flags in a struct: glibc uses openat
        for name in DENY_FILES:
            rule(act_errno(errno.EACCES), name)
        for name in DENY_OTHER:
            rule(act_errno(errno.EPERM), name)
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise SeccompError(f"seccomp_load failed ({os.strerror(-rc)})")
    finally:
        lib.seccomp_release(ctx)


def wanted() -> bool:
    """CAF_EVAL_SECCOMP=0 turns the filter off (a host without libseccomp; documented)."""
    return os.environ.get("CAF_EVAL_SECCOMP", "1") != "0"
