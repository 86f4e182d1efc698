"""Shared helper: classes that exist for imports but refuse to be used."""


class Unavailable:
    """Base of every placeholder class: constructing one is an error."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            f"{type(self).__name__} is a placeholder (fbgemm_gpu is not installed); "
            "only TorchRec's planner may be used with these placeholders"
        )
