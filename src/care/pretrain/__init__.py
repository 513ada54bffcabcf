"""Query-encoder pretraining before CARE's supervised initialisation (paper §4, "query encoder").

- RetroMAE (:mod:`care.pretrain.retromae`): masked auto-encoding with a one-layer decoder;
- unsupervised contrastive (:mod:`care.pretrain.contrastive`): in-batch InfoNCE on (title, content)
  pairs, fixed or learnable temperature, GradCache for large batches.

Both stream their text files (:mod:`care.pretrain.stream`), checkpoint and resume exactly, and save a
plain ``AutoModel`` folder that ``init_query`` loads as ``model.query_model``. Run them with
``care pretrain retromae|contrastive --config ...`` or :func:`care.pretrain.trainer.pretrain`.
"""

from care.pretrain.config import PretrainConfig, load_pretrain_config

__all__ = ["PretrainConfig", "load_pretrain_config"]
