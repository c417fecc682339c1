"""Study: MLM pre-training on true negatives (notebook 03).

Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True Negatives" (AAAI 2023, arXiv 2212.00460): hard
correction (HC, eq. 2) drops a masked position whose prediction is in the gold token's synonym list (single tokens,
footnote 5; the workbench's ``word`` level judges whole jieba words); soft regularization (SR, eq. 3) adds
1 - cos(e_k, e'_k) of the input embeddings; sentence-level SR (Sec. 5) adds KL(H_p || H_s). Modules:
:mod:`.masking_demo` (section 1), :mod:`.experiments` (the runs, Table 2, Table 6), :mod:`.hard_correction`
(held-out HC, Figure 3) and :mod:`.claims` (the results page's rows and the evidence entry, section 9).
"""
