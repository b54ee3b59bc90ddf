"""``adaptedge train --method cscc``: the cost-sensitive cascade (CSCC, Xu et al. JMLR 2014
eq. 19) and, with ``--param variant=cronus``, Cronus (Chen et al. 2012). The model, its
optimiser and export are shared with CSTC in ``trainer.methods.cstc``."""

from adaptedge.trainer.methods.cstc.estimator import CSCCClassifier
from adaptedge.trainer.methods.cstc.method import train_cscc

__all__ = ["CSCCClassifier", "train_cscc"]
