"""``care run``: the whole CARE pipeline on the user's own data from one config (``care demo`` is it on the
demo config shipped in ``care/pipeline/configs/``): curate, label, train, evaluate, time, index, report."""
