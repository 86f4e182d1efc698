"""Placeholder enums and kernel classes named by TorchRec's imports."""
import enum

from fbgemm_gpu._placeholder import Unavailable


class EmbeddingLocation(enum.IntEnum):
    DEVICE = 0
    MANAGED = 1
    MANAGED_CACHING = 2
    HOST = 3


class ComputeDevice(enum.IntEnum):
    CPU = 0
    CUDA = 1


class PoolingMode(enum.IntEnum):
    SUM = 0
    MEAN = 1
    NONE = 2


class SplitTableBatchedEmbeddingBagsCodegen(Unavailable):
    pass


class DenseTableBatchedEmbeddingBagsCodegen(Unavailable):
    pass


class IntNBitTableBatchedEmbeddingBagsCodegen(Unavailable):
    pass


def rounded_row_size_in_bytes(*args, **kwargs):
    raise RuntimeError("rounded_row_size_in_bytes is a placeholder (fbgemm_gpu is not installed)")
