"""The device-to-device reply path (skills/eval_worker/caf_agent_eval/ipc.py): every claim of
a child's IPC map is checked before anything is mapped, and a handle that does not open costs
only a resend by memfd. The CUDA path itself runs in the CUDA suite
(tests/reward_hacks/cuda: test_the_childs_tensors_come_back_device_to_device)."""
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "skills", "eval_worker"))

from caf_agent_eval import ipc, protocol  # noqa: E402
from caf_agent_eval.protocol import FrameInvalid  # noqa: E402


def ipc_map(shape=(4, 8), dtype="float32", **kw):
    n = 4 if dtype == "float32" else 1
    for d in shape:
        n *= d
    m = {ipc.KEY: 1, "dtype": dtype, "shape": list(shape), "handle": b"h" * 64, "off": 0,
         "nbytes": n, "id": 0}
    m.update(kw)
    return m


@pytest.mark.parametrize("bad, words", [
    ({"dtype": "object"}, "not allowed"),
    ({"nbytes": 12}, "does not hold 128 bytes"),
    ({"off": -4096}, "does not hold"),
    ({"off": "0"}, "does not hold"),
    ({"handle": b"h" * 63}, "64 bytes"),
    ({"handle": "h" * 64}, "64 bytes"),
    ({"shape": [4, -8]}, "not a list of sizes"),
])
def test_a_lying_ipc_map_is_refused_before_anything_is_mapped(bad, words):
    with pytest.raises(FrameInvalid, match=words):
        ipc.check([ipc_map(**bad)])


def test_a_reply_announcing_more_device_bytes_than_a_frame_may_hold_is_refused():
    big = ipc_map(shape=(1 << 20, 1 << 10), nbytes=4 << 30)
    with pytest.raises(FrameInvalid, match="exceed"):
        ipc.check([big, dict(big), dict(big), dict(big), dict(big)])  # 20 GiB > 16 GiB


def test_handles_that_do_not_open_are_resent_by_memfd(monkeypatch):
    def no_ipc(m, device):
        raise ipc.IpcUnavailable("not on this host")
    monkeypatch.setattr(ipc, "import_copy", no_ipc)
    x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    rep = {"outputs": [ipc_map(id=0)], "inputs_after": [{"__seq__": [ipc_map(id=1)], "tuple": False}]}
    asked = []

    def resend(ids):
        asked.append(ids)
        return [protocol.encode_tensor(x), protocol.encode_tensor(x + 1)]
    assert ipc.resolve(rep, "cuda:0", resend) == (0, 2)
    assert sorted(asked[0]) == [0, 1]
    got = [protocol.decode_tensor(rep["outputs"][0]), protocol.decode_value(rep["inputs_after"][0])[0]]
    assert {float(got[0].sum()), float(got[1].sum())} == {float(x.sum()), float((x + 1).sum())}


def test_a_resent_tensor_must_be_the_one_announced(monkeypatch):
    monkeypatch.setattr(ipc, "import_copy", lambda m, d: (_ for _ in ()).throw(ipc.IpcUnavailable("x")))
    rep = {"outputs": [ipc_map()]}
    with pytest.raises(FrameInvalid, match="another tensor"):
        ipc.resolve(rep, "cuda:0", lambda ids: [protocol.encode_tensor(torch.zeros(2, 2))])
    with pytest.raises(FrameInvalid, match="resend"):
        ipc.resolve({"outputs": [ipc_map()]}, "cuda:0", lambda ids: None)


def test_a_copied_tensor_is_decoded_where_it_was_copied(monkeypatch):
    x = torch.arange(32, dtype=torch.float32).reshape(4, 8)
    monkeypatch.setattr(ipc, "import_copy", lambda m, d: x.reshape(-1).view(torch.uint8).clone())
    rep = {"outputs": [ipc_map()]}
    assert ipc.resolve(rep, "cuda:0", lambda ids: pytest.fail("nothing to resend")) == (1, 0)
    got = protocol.decode_tensor(rep["outputs"][0])
    assert torch.equal(got, x) and got.device == x.device


def test_a_region_outside_its_allocation_is_a_lie(monkeypatch):
    # import_copy's bounds check (the allocation's real size from the driver) raises
    # FrameInvalid, which resolve passes on: the child is killed, the verdict is bad_frame.
    def lie(m, d):
        raise FrameInvalid("device tensor region (0, 128) outside its allocation of 64 bytes")
    monkeypatch.setattr(ipc, "import_copy", lie)
    with pytest.raises(FrameInvalid, match="outside its allocation"):
        ipc.resolve({"outputs": [ipc_map()]}, "cuda:0", lambda ids: [])


def test_ipc_is_for_cuda_workers_only(monkeypatch):
    assert not ipc.wanted("cpu")
    assert ipc.wanted("cuda:0")
    monkeypatch.setenv("CAF_EVAL_IPC", "0")
    assert not ipc.wanted("cuda:0")
