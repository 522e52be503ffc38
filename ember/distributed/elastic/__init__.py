"""``ember.distributed.elastic``: the pieces of ``torch.distributed.elastic`` that training
scripts touch -- ``multiprocessing.errors.record`` (write a worker's exception where the
launcher can read it) and ``ChildFailedError`` (the launcher's report of failed workers).

The launcher itself is ``ember.distributed.run`` (``torchrun``); its worker-group agent lives
in ``ember.distributed.elastic.agent``. Elastic rendezvous across several nodes (joining and
leaving workers) is not implemented: ``ember.distributed.run`` refuses ``--nnodes`` other than 1."""
