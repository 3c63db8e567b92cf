"""The core of bitnet_go: everything else imports it, it imports nothing else of bitnet_go.

- ``lib``: loading the Go shared library, declaring and calling its exports
  (status codes to exceptions);
- ``types``: the ``Literal`` types of the public API (qtypes, methods,
  algorithms, devices);
- ``arrays``: user input to C-contiguous float32 arrays, integer checks;
- ``devices``: GPU arrays (torch, CuPy, ``__cuda_array_interface__``,
  DLPack): detection, adoption, device strings and indexes;
- ``ops``: the one place that calls the Go op exports (quantize, pack,
  unpack, dequantize, conv2d and their CUDA forms);
- ``runtime``: CPU features and the thread setting.

This ``__init__`` imports nothing, so that importing one core module loads
only what it needs.
"""
