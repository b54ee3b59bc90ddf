"""Cost-sensitive trees (CSTC) and cascades (CSCC, Cronus) of classifiers (Xu et al., JMLR 2014).

``structure`` holds the shapes, ``objective`` the relaxed cost-sensitive objective,
``node_solve`` one block of Algorithm 1, ``optimise`` the whole algorithm, ``boosted`` the
boosted-tree features (``features=boosted``), ``estimator`` the scikit-learn-style estimators,
``export`` the policy graph (``tree_node``: a node on tree features as one tree ensemble) and
``method`` the registry entries ``adaptedge train --method cstc`` and ``--method cscc``.
"""
