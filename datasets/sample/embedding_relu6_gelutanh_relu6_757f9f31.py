"""Level 2: Embedding -> ReLU6 -> GELUTanh -> relu6. Synthesized by caf_agent_data from torch.nn.Embedding, torch.nn.ReLU6, transformers.activations.GELUTanh, torch.nn.functional.relu6."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers.activations import GELUTanh


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Embedding(NUM_EMBEDDINGS, 64)
        self.op1 = nn.ReLU6()
        self.op2 = GELUTanh()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = self.op2(x)
        x = F.relu6(x)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 16
input_shape = (32,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
