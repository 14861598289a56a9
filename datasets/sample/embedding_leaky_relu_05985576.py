"""Level 2: Embedding -> leaky_relu. Synthesized by caf_agent_data from torch.nn.Embedding, torch.nn.functional.leaky_relu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Embedding(NUM_EMBEDDINGS, 32)

    def forward(self, x):
        x = self.op0(x)
        x = F.leaky_relu(x, 0.1)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 8
input_shape = (32,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
