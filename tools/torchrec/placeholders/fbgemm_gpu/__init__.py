# Placeholder for the `fbgemm_gpu` package, written for tools/torchrec/make_golden.py
# (not FBGEMM code). TorchRec v0.3.2 imports a few names from fbgemm_gpu at module
# load time; its sharding planner calls no FBGEMM kernel, so the names only have to
# exist. Anything that would actually run a kernel raises.
