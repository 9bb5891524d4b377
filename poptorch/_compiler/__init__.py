"""From the captured torch dialect to a program the JIT runs.

- `driver.py`: the compile pipeline (import, passes, the JIT) with its reproducers.
- `optimizer_program.py`: the optimizer's update step written as ipu ops.
- `executable_file.py`: the executable file format (sections, safetensors weights).
- `cache.py`: the executable cache (`enableExecutableCaching`).
"""
