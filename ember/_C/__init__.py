"""C extensions of ember: ``_eval_frame``, the PEP 523 frame hook used by ember.dynamo."""
