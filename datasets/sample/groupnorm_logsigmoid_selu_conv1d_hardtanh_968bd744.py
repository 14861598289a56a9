"""Level 2: GroupNorm -> LogSigmoid -> SELU -> Conv1d -> hardtanh. Synthesized by caf_agent_data from torch.nn.GroupNorm, torch.nn.LogSigmoid, torch.nn.SELU, torch.nn.Conv1d, torch.nn.functional.hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.GroupNorm(8, 16)
        self.op1 = nn.LogSigmoid()
        self.op2 = nn.SELU()
        self.op3 = nn.Conv1d(16, 16, kernel_size=1, stride=2, padding=0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = self.op3(x)
        x = F.hardtanh(x)
        return x


batch_size = 4
input_shape = (16, 32)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
