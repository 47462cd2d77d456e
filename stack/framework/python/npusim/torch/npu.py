"""torch_npu.npu: the device functions (the same as torch.npu once npusim.torch is imported)."""

from . import (current_device, device_count, get_device_name, is_available, max_memory_allocated,  # noqa: F401
               memory_allocated, set_device, synchronize)
