"""Level 2: Linear -> instance_norm -> Hardtanh -> relu. Synthesized by caf_agent_data from torch.nn.Linear, torch.nn.functional.instance_norm, torch.nn.Hardtanh, torch.nn.functional.relu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Linear(16, 64)
        self.op2 = nn.Hardtanh()

    def forward(self, x):
        x = self.op0(x)
        x = F.instance_norm(x)
        x = self.op2(x)
        x = F.relu(x)
        return x


batch_size = 4
input_shape = (16, 16, 16)


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
