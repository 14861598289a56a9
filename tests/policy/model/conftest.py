"""Fixtures shared by the policy model's GPU tests (test_*_gpu.py)."""
import pytest
import torch


@pytest.fixture(scope="module")
def cuda():
    """Skips the test where no CUDA device is present."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
