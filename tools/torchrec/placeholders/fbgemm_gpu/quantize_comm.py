"""Placeholder classes named by TorchRec's imports."""
from fbgemm_gpu._placeholder import Unavailable


class QuantizationContext(Unavailable):
    pass


class QuantizedCommCodec(Unavailable):
    pass
