"""Tensor transport between the worker and its child (shm_transport.py): large tensors cross
as sealed memfds, correctly and fast; a child that lies about a tensor's header or sends a bad
arena (unsealed, truncated, missing, not a memfd, overlapping) or a malformed frame gets a
failed verdict, and the worker goes on serving."""
import errno
import fcntl
import mmap
import os
import socket
import sys
import threading
import time

import pytest

from hack_helpers import ROOT, Judge, WorkerClient, build_root

sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))
import torch  # noqa: E402

from caf_agent_eval import protocol, shm_transport  # noqa: E402
from caf_agent_eval.child_client import ChildProcess, Zygote  # noqa: E402

BIG_TASK = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
            "    def forward(self, a, b):\n        return torch.relu(a + b)\n\n\n"
            "batch_size = {rows}\ndim = {cols}\n\n\ndef get_inputs():\n"
            "    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]\n\n\n"
            "def get_init_inputs():\n    return []\n")
AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
HONEST = AB + "        return caf_ext.add_relu(a, b)\n"


def _pair():
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def _send(obj, seal=True):
    """Stages obj as a sender would; returns (frame object, receiving socket)."""
    a, b = _pair()
    staged, fd = shm_transport.stage(obj, seal=seal)
    if fd is not None:
        shm_transport.send_fd(a, fd)
        os.close(fd)
    a.close()
    return staged, b


def test_large_tensor_round_trip_through_a_forked_child_is_exact_and_fast():
    z = Zygote("cpu", 1)
    child = ChildProcess("cpu", 1, z)
    try:
        child.wait_ready(300)
        sets = [[torch.randn(2048, 4096), torch.arange(70000, dtype=torch.int64),
                 torch.randn(3, 5).to(torch.bfloat16), torch.zeros(0, 7)]]
        t0 = time.perf_counter()
        child.request({"op": "load_sets", "sets": [protocol.encode_value(s) for s in sets]},
                      60, "load_sets")
        rep = child.request({"op": "sets_after"}, 60, "sets_after")
        back = protocol.decode_value(rep["sets"][0])
        dt = time.perf_counter() - t0
    finally:
        child.kill()
        z.close()
    print(f"\n32 MiB (+ small tensors) worker -> child -> worker round trip: {dt:.3f} s")
    assert len(back) == len(sets[0])
    for x, y in zip(sets[0], back):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
    back[0].add_(1)  # the received tensor is private and writable
    assert not torch.equal(back[0], sets[0][0])


def test_arena_bytes_are_sealed_and_private():
    t = torch.randn(256, 256)
    staged, sock = _send({"x": protocol.encode_value(t)})
    assert "data" not in staged["x"] and staged["__arena__"] >= t.numel() * 4
    got = protocol.decode_tensor(shm_transport.resolve(staged, sock)["x"])
    assert torch.equal(got, t)


def _memfd_mapped_writable():
    fd = os.memfd_create("seal_busy", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, 1 << 16)
    return fd, mmap.mmap(fd, 1 << 16, flags=mmap.MAP_SHARED,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)


def test_sealing_waits_out_busy_pages():
    """The kernel refuses F_SEAL_WRITE with EBUSY while the arena's pages are referenced
    (a writable mapping here; a page going to swap under memory pressure in CI once): the
    sender retries until the reference is gone instead of failing the frame."""
    fd, region = _memfd_mapped_writable()
    try:
        with pytest.raises(OSError) as refused:  # the kernel's answer the retry is for
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, shm_transport.SEALS)
        assert refused.value.errno == errno.EBUSY
        threading.Timer(0.3, region.close).start()
        t0 = time.monotonic()
        shm_transport.seal_arena(fd)
        assert time.monotonic() - t0 >= 0.25
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & shm_transport.SEALS == shm_transport.SEALS
    finally:
        region.close()
        os.close(fd)


def test_sealing_pages_that_stay_busy_fails_saying_why(monkeypatch):
    monkeypatch.setattr(shm_transport, "SEAL_RETRY_S", 0.2)
    fd, region = _memfd_mapped_writable()
    try:
        with pytest.raises(OSError, match="pages stayed busy") as e:
            shm_transport.seal_arena(fd)
        assert e.value.errno == errno.EBUSY
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE == 0
    finally:
        region.close()
        os.close(fd)


def test_the_senders_own_staging_failure_is_not_the_childs_crash(monkeypatch):
    """The worker failing to stage a request's tensors (here: its arena's pages staying busy)
    is the judge's failure: the request raises StageFailed (an infrastructure error out of
    job.run), not ChildCrashed (a -1 for the submission), and the child, sent nothing, goes on
    serving."""
    z = Zygote("cpu", 1)
    child = ChildProcess("cpu", 1, z)
    try:
        child.wait_ready(300)
        sets = [[torch.randn(256, 256)]]
        req = {"op": "load_sets", "sets": [protocol.encode_value(s) for s in sets]}
        with monkeypatch.context() as m:
            def busy(fd):
                raise OSError(errno.EBUSY, "its pages stayed busy")
            m.setattr(shm_transport, "seal_arena", busy)
            with pytest.raises(protocol.StageFailed, match="pages stayed busy"):
                child.request(req, 60, "load_sets")
        child.request(req, 60, "load_sets")
        back = protocol.decode_value(child.request({"op": "sets_after"}, 60, "sets_after")["sets"][0])
        assert torch.equal(back[0], sets[0][0])
    finally:
        child.kill()
        z.close()


@pytest.mark.parametrize("lie,words", [
    ("shape", "does not hold"), ("dtype", "not allowed"), ("unsealed", "not sealed"),
    ("pipe", "not a memory file"), ("no_fd", "no descriptor"), ("truncated", "holds"),
    ("overlap", "overlaps"), ("inline_len", "expected"), ("huge", "out of bounds")])
def test_receiver_rejects_lying_tensor_maps(lie, words):
    t = torch.randn(256, 256)
    obj = {"x": protocol.encode_value(t), "y": protocol.encode_value(t)}
    if lie == "inline_len":
        obj = {"x": {**protocol.encode_value(torch.ones(4)), "shape": [5]}}
    staged, sock = _send(obj, seal=(lie != "unsealed"))
    if lie == "shape":
        staged["x"]["shape"] = [512, 256]
    elif lie == "dtype":
        staged["x"]["dtype"] = "Tensor"
    elif lie == "overlap":
        staged["y"]["off"] = staged["x"]["off"]
    elif lie == "huge":
        staged["__arena__"] = 1 << 50
    elif lie in ("pipe", "no_fd", "truncated"):
        for fd in socket.recv_fds(sock, 16, 1)[1]:  # drop the honest descriptor
            os.close(fd)
        a, b = _pair()
        if lie == "pipe":
            r, w = os.pipe()
            shm_transport.send_fd(a, r)
            os.close(r)
            os.close(w)
        elif lie == "truncated":
            fd = os.memfd_create("t", os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, staged["__arena__"] // 2)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, shm_transport.SEALS)
            shm_transport.send_fd(a, fd)
            os.close(fd)
        sock = b
    with pytest.raises(protocol.FrameInvalid) as e:
        shm_transport.resolve(staged, sock)
    assert words in str(e.value), e.value


def test_malformed_frame_is_invalid_not_a_crash():
    r, w = os.pipe()
    os.write(w, b"\x00\x00\x00\x04\xc1\xc1\xc1\xc1")
    os.close(w)
    a, b = _pair()
    with pytest.raises(protocol.FrameInvalid):
        protocol.read_frame(r, time.monotonic() + 5, fd_sock=b)
    os.close(r)


LIES = ["shape", "dtype", "unsealed", "truncated", "no_fd", "pipe_fd", "overlap", "garbage"]


@pytest.fixture(scope="module")
def lying_judge(tmp_path_factory):
    path = tmp_path_factory.mktemp("lie") / "mode"
    path.write_text("")
    client = WorkerClient(device="cpu", threads=1, build_root=build_root(),
                          env={"CAF_EVAL_TEST_HOOKS": "1", "CAF_EVAL_CHILD_LIE_FILE": str(path),
                               "MAX_JOBS": "2"})
    yield Judge(client), path
    client.close()


def _big_job(judge):
    task = BIG_TASK.format(rows=256, cols=1024)  # 1 MiB tensors: out of band
    files = {"model_new.py": "import torch\nimport torch.nn as nn\nimport caf_ext\n\n" + HONEST}
    from hack_helpers import cpu_kernels
    files.update(cpu_kernels())
    resp = judge.client.evaluate("big_add_relu", task, files, mode="verify")
    assert resp["status"] == "ok", resp.get("error")
    return resp["verdict"]


@pytest.mark.parametrize("lie", LIES)
def test_lying_child_gets_a_failed_verdict_and_the_worker_survives(lying_judge, lie):
    judge, path = lying_judge
    path.write_text(lie)
    v = _big_job(judge)
    path.write_text("")
    assert v["correct"] is False and v["reward"] == -1, v
    assert "bad_frame" in v["flags"], (v["flags"], v["reason"])
    assert "invalid reply" in v["reason"], v["reason"]


def test_worker_still_serves_honest_work_after_the_lies(lying_judge):
    judge, path = lying_judge
    path.write_text("")
    v = _big_job(judge)
    assert v["correct"] is True, v["reason"]
