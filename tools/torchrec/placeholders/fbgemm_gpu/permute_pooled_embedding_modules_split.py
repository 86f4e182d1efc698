"""Placeholder class named by TorchRec's imports."""
from fbgemm_gpu._placeholder import Unavailable


class PermutePooledEmbeddingsSplit(Unavailable):
    pass
