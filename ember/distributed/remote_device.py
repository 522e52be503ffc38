"""``torch.distributed.remote_device``: ``_remote_device``, a device on a (possibly remote)
worker, as RPC-based code names one: ``"<workername>/<device>"``, ``"rank:<rank>/<device>"``,
a bare worker name (device cpu) or a bare local device (``"cpu"``, or an ``ember.device``)."""
from __future__ import annotations

from typing import Optional


def _parse_error(spec):
    return ValueError(f"Could not parse remote_device: {spec}. The valid format is '<workername>/<device>' or "
                      f"'rank:<rank>/<device>' or '<device>'")


class _remote_device:  # noqa: N801 - torch's name
    def __init__(self, remote_device):
        from .. import device as _device
        self._worker_name: Optional[str] = None
        self._rank: Optional[int] = None
        if isinstance(remote_device, _device):
            dev = remote_device
        elif isinstance(remote_device, str):
            parts = remote_device.split("/")
            if len(parts) > 2:
                raise _parse_error(remote_device)
            if len(parts) == 2:
                self._worker_name, dev = parts
            elif self._is_valid_local_device(parts[0]):
                dev = parts[0]
            else:
                self._worker_name, dev = parts[0], "cpu"
            if self._worker_name is not None:
                if not self._worker_name:
                    raise _parse_error(remote_device)
                pieces = self._worker_name.split(":")
                if len(pieces) > 2 or (len(pieces) == 2 and not (pieces[0] == "rank" and pieces[1].isdigit())):
                    raise _parse_error(remote_device)
                if len(pieces) == 2:
                    self._rank, self._worker_name = int(pieces[1]), None
        else:
            raise TypeError(f"Invalid type for remote_device: {type(remote_device)}")
        self._device = _device(dev)

    @staticmethod
    def _is_valid_local_device(device) -> bool:
        from .. import device as _device
        try:
            _device(device)
        except Exception:  # noqa: BLE001 - any parse failure means "not a device"
            return False
        return True

    def worker_name(self) -> Optional[str]:
        """The remote worker's name, or None when the device was named by rank or is local."""
        return self._worker_name

    def rank(self) -> Optional[int]:
        """The remote worker's rank, or None when it was named by worker name or is local."""
        return self._rank

    def device(self):
        """The device on the remote worker."""
        return self._device

    def __repr__(self):
        if self._worker_name is not None:
            return f"{self._worker_name}/{self._device}"
        if self._rank is not None:
            return f"rank:{self._rank}/{self._device}"
        return str(self._device)

    def __eq__(self, other):
        return isinstance(other, _remote_device) and (self._worker_name, self._device, self._rank) == \
            (other._worker_name, other._device, other._rank)

    def __hash__(self):
        return hash(self._worker_name) ^ hash(self._device) ^ hash(self._rank)


__all__: list = []
