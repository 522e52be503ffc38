"""The stock DDP communication hooks: ``hook(process_group, bucket) -> future``."""
from __future__ import annotations

from ... import distributed_c10d as dist

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"]


def _group(process_group):
    return process_group if process_group is not None else dist.GroupMember.WORLD


def allreduce_hook(process_group, bucket):
    """Average the bucket over the group (divide, then sum), as DDP without a hook."""
    g = _group(process_group)
    tensor = bucket.buffer().div_(g.size())
    return dist.all_reduce(tensor, group=g, async_op=True).get_future().then(lambda fut: fut.value()[0])


def _compress_hook(dtype):
    def hook(process_group, bucket):
        g = _group(process_group)
        buf = bucket.buffer()
        compressed = buf.to(dtype).div_(g.size())
        fut = dist.all_reduce(compressed, group=g, async_op=True).get_future()

        def decompress(f):
            buf.copy_(f.value()[0])
            return buf
        return fut.then(decompress)
    return hook


def fp16_compress_hook(process_group, bucket):
    """Average in float16 (half the bytes on the wire), results cast back to the bucket dtype."""
    from .... import float16
    return _compress_hook(float16)(process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """Average in bfloat16, results cast back to the bucket dtype."""
    from .... import bfloat16
    return _compress_hook(bfloat16)(process_group, bucket)
