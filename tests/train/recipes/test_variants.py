"""The variant grammar (care.train.recipes.variants): what each item form means, and the exact error of each bad item."""

from __future__ import annotations

import pytest

from care.config import ConfigError
from care.train.recipes.recipe import RecipeConfig
from care.train.recipes.variants import Variant, parse_items, parse_variant
from care.train.stage_settings import StageSetting


def test_each_item_form_lands_where_it_belongs():
    variant = parse_variant("mined2=stage2:optim.lr=4e-5;stage2:mine=2;stage2:mine.relative_margin=0.02;"
                            "optim.batch_size=16;recipe:skip_stage1=true")
    assert variant == Variant("mined2", ("stage2:optim.lr=4e-5", "stage2:mine=2", "stage2:mine.relative_margin=0.02",
                                         "optim.batch_size=16", "recipe:skip_stage1=true"),
                              settings=(StageSetting("optim.lr", "4e-5", "stage2"), StageSetting("optim.batch_size", 16)),
                              switches={"skip_stage1": True}, mining={"n_negatives": 2, "relative_margin": 0.02})
    recipe = variant.recipe(RecipeConfig(skip_stage2=False, overrides=["stage1:loss.lambda_mse=0"]))
    assert recipe.skip_stage1 and recipe.mine_negatives == {"n_negatives": 2, "relative_margin": 0.02}
    assert recipe.overrides == ["stage1:loss.lambda_mse=0"]  # the base's own settings are kept


def test_no_mining_item_keeps_the_bases_mining_and_mine_zero_turns_it_off():
    base = RecipeConfig(mine_negatives={"n_negatives": 1, "range_max": 300})
    assert parse_variant("lr=stage2:optim.lr=1e-5").recipe(base).mine_negatives == {"n_negatives": 1, "range_max": 300}
    off = parse_variant("plain=stage2:mine=0").recipe(base)
    assert off.mine_negatives == {"n_negatives": 0} and off.mining is None
    assert parse_variant("same=") == Variant("same")  # no items: the base recipe itself
    assert parse_variant(" spaced = stage2:optim.lr=1e-5 ; ").items == ("stage2:optim.lr=1e-5",)


@pytest.mark.parametrize("text, message", [
    ("noequals", "variant 'noequals': write NAME=ITEM;ITEM;... with items STAGE:KEY=VALUE, KEY=VALUE, "
                 "recipe:FIELD=VALUE, stage2:mine=N or stage2:mine.FIELD=VALUE"),
    ("a=stage2", "variant 'a': item 'stage2' is not KEY=VALUE; write STAGE:KEY=VALUE, KEY=VALUE, recipe:FIELD=VALUE, "
                 "stage2:mine=N or stage2:mine.FIELD=VALUE"),
    ("a=stage3:optim.lr=1", "variant 'a': item 'stage3:optim.lr=1': unknown stage 'stage3'; stages are init_query, "
                            "init_document, stage1, stage1_rank, stage2 (recipe: for a recipe switch)"),
    ("a=stage2:optim.lrr=1", "variant 'a': item 'stage2:optim.lrr=1': unknown field 'optim.lrr'; valid fields are: "
                             "batch_size, betas, document_lr, epochs, eps, grad_cache_chunk_size, "
                             "gradient_accumulation_steps, lr, max_grad_norm, max_steps, warmup_ratio, weight_decay"),
    ("a=stage2:optim.lr=fast", "variant 'a': item 'stage2:optim.lr=fast': config field 'optim.lr': expected a number, "
                               "got 'fast'"),
    ("a=stage2:mine.range_max=300", "variant 'a': mining settings ['range_max'] need stage2:mine=N (negatives per "
                                    "query; stage2:mine=0 mines none)"),
    ("a=stage2:mine=-1", "variant 'a': item 'stage2:mine=-1': N must be a whole number >= 0 (negatives per query)"),
    ("a=stage2:mine=two", "variant 'a': item 'stage2:mine=two': N must be a whole number >= 0 (negatives per query)"),
    ("a=stage2:mine=1;stage2:mine.depth=3", "variant 'a': stage2:mine: unknown field 'depth'; valid fields are: "
                                            "absolute_margin, batch_size, document_prompt, n_negatives, query_prompt, "
                                            "range_max, range_min, relative_margin, seed"),
    ("a=recipe:skip=true", "variant 'a': item 'recipe:skip=true': 'skip' is not a recipe switch; recipe: takes "
                           "skip_query_init, pretrained_query_model, skip_document_init, skip_stage1, stage1_data, "
                           "skip_stage1_rank, skip_stage2 (mining: stage2:mine=N)"),
    ("a=recipe:skip_stage1=maybe", "variant 'a': config field 'skip_stage1': expected true/false, got 'maybe'"),
    ("a=recipe:stage1_data=rich", "variant 'a': config field 'stage1_data': must be one of alignment, finetune, "
                                  "got 'rich'"),
    ("base=stage2:optim.lr=1e-5", "variant name 'base': that name is the base recipe's row; choose another"),
    ("a/b=stage2:optim.lr=1e-5", "variant name 'a/b': use letters, digits, '_', '.' or '-' (it names a folder), "
                                 "starting with a letter or digit"),
])
def test_a_bad_item_is_refused_naming_it(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_variant(text)
    assert str(caught.value) == message


def test_items_from_a_config_list_parse_the_same_as_a_command_line():
    items = ["stage2:mine=1", "stage2:optim.document_lr=1e-4"]
    assert parse_items("doclr", items) == parse_variant("doclr=" + ";".join(items))
    with pytest.raises(ConfigError, match="variant 'x': item 3 is not text"):
        parse_items("x", [3])
