"""BM25 hard negatives: positives and their near-duplicates are never negatives."""

from __future__ import annotations

from care.data.training import TrainingExample
from care.train.recipes.alignment_data import char_overlap
from care.train.recipes.bm25_negatives import mine_negatives


def test_mine_negatives_skips_positives_and_near_duplicates():
    pool = ["高血压患者应低盐饮食，每天盐少于5克。", "高血压患者应低盐饮食，每天食盐少于5克。",
            "糖尿病患者要控制主食。", "哮喘发作时使用吸入剂。", "胃炎要少吃辛辣。", "失眠可以先调整作息。"]
    rows = [TrainingExample("高血压饮食要注意什么", (pool[0],), (pool[4],), neg_scores=(0.1,))]
    mined = mine_negatives(rows, pool, n=3, seed=0, keep_existing=True)[0]
    assert mined.neg[0] == pool[4] and len(mined.neg) == 3 and len(set(mined.neg)) == 3
    assert pool[0] not in mined.neg and pool[1] not in mined.neg  # the positive and its near-duplicate
    assert mined.neg_scores is None  # the teacher scored one negative, not the three
    assert char_overlap(pool[0], pool[1]) >= 0.5
