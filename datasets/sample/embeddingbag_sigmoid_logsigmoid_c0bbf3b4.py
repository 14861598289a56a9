"""Level 2: EmbeddingBag -> Sigmoid -> logsigmoid. Synthesized by caf_agent_data from torch.nn.EmbeddingBag, torch.nn.Sigmoid, torch.nn.functional.logsigmoid."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.EmbeddingBag(NUM_EMBEDDINGS, 64, mode='mean')
        self.op1 = nn.Sigmoid()

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = F.logsigmoid(x)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 8
input_shape = (16,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
