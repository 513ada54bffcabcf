"""The six aspects of a condition a patient asks about, with question templates and answer openings.

``{c}`` in a template is replaced by a surface form of the condition's name. Benchmark and
training templates are disjoint by construction (a test asserts it on the generated texts too).
"""

from __future__ import annotations

from care.demo.content.schema import Aspect

SYMPTOM = Aspect(
    key="symptom",
    label="症状",
    bench_templates=(
        "{c}有哪些症状？",
        "得了{c}身体会有什么表现？",
        "怎么判断自己是不是得了{c}？",
        "{c}早期有什么信号？",
        "{c}会让人有哪些不舒服？",
        "家里老人有{c}，哪些表现需要注意？",
    ),
    train_templates=(
        "{c}的典型症状是什么？",
        "{c}会出现哪些不适感？",
        "{c}的临床表现有哪些？",
        "怀疑自己有{c}，一般会有什么感觉？",
        "{c}的早期症状明显吗？",
        "{c}患者常见的身体变化有哪些？",
    ),
    openings=("关于{c}的症状，", "{c}的表现因人而异，", "{c}的常见表现如下："),
)

CAUSE = Aspect(
    key="cause",
    label="病因",
    bench_templates=(
        "为什么会得{c}？",
        "{c}是什么原因引起的？",
        "哪些人容易得{c}？",
        "{c}和遗传有关系吗？",
        "年纪轻轻怎么会得{c}？",
        "{c}的诱因有哪些？",
    ),
    train_templates=(
        "{c}的病因是什么？",
        "导致{c}的原因有哪些？",
        "{c}的高危人群有哪些？",
        "什么情况下容易诱发{c}？",
        "{c}是怎么得上的？",
        "生活中哪些因素会引起{c}？",
    ),
    openings=("{c}的发生和多种因素有关。", "关于{c}的原因，", "引起{c}的因素主要有这些："),
)

DIAGNOSIS = Aspect(
    key="diagnosis",
    label="检查诊断",
    bench_templates=(
        "{c}需要做哪些检查？",
        "怎么确诊{c}？",
        "去医院查{c}要做什么检查？",
        "{c}的诊断标准是什么？",
        "体检能查出{c}吗？",
        "检查{c}要抽血吗？",
    ),
    train_templates=(
        "诊断{c}一般要做什么检查？",
        "{c}怎么查出来？",
        "确诊{c}需要哪些化验？",
        "医生是怎么判断{c}的？",
        "{c}做什么检查最准确？",
        "怀疑{c}应该做哪些检查项目？",
    ),
    openings=("关于{c}的检查，", "判断是不是{c}，", "{c}的诊断主要靠以下检查："),
)

TREATMENT = Aspect(
    key="treatment",
    label="治疗用药",
    bench_templates=(
        "{c}怎么治疗？",
        "{c}吃什么药效果好？",
        "{c}能治好吗？需要一直吃药吗？",
        "得了{c}该用什么药？",
        "{c}有哪些治疗方法？",
        "{c}用药要注意什么？",
    ),
    train_templates=(
        "{c}的治疗方案有哪些？",
        "{c}一般用什么药物治疗？",
        "{c}需要手术吗还是吃药就行？",
        "{c}的常用药有哪些？",
        "治疗{c}的首选方法是什么？",
        "{c}患者该如何规范用药？",
    ),
    openings=("关于{c}的治疗，", "{c}的治疗要个体化，", "治疗{c}的要点如下："),
)

LIFESTYLE = Aspect(
    key="lifestyle",
    label="饮食生活",
    bench_templates=(
        "{c}平时吃什么好？",
        "{c}饮食上要注意什么？",
        "得了{c}生活中要注意哪些方面？",
        "{c}能运动吗？",
        "{c}有什么忌口？",
        "{c}患者怎么调理？",
    ),
    train_templates=(
        "{c}患者的饮食原则是什么？",
        "{c}不能吃什么？",
        "{c}日常生活怎么保养？",
        "{c}适合做什么运动？",
        "{c}在饮食起居上有什么讲究？",
        "{c}患者每天怎么安排饮食和作息？",
    ),
    openings=("{c}患者在日常生活中需要注意：", "关于{c}的饮食和生活方式，", "{c}的调理离不开好的生活习惯。"),
)

PREVENTION = Aspect(
    key="prevention",
    label="预防与并发症",
    bench_templates=(
        "{c}有哪些并发症？",
        "怎么预防{c}？",
        "{c}不治疗会有什么后果？",
        "{c}严重吗？会不会引起别的病？",
        "如何避免{c}复发或加重？",
        "{c}会带来哪些危害？",
    ),
    train_templates=(
        "{c}的并发症严重吗？",
        "预防{c}应该怎么做？",
        "{c}放任不管会怎样？",
        "{c}的预防措施有哪些？",
        "{c}长期控制不好有什么危害？",
        "怎样降低得{c}的风险？",
    ),
    openings=("关于{c}的预防和并发症，", "{c}需要重视，", "{c}的危害和预防要点如下："),
)

ASPECTS: tuple[Aspect, ...] = (SYMPTOM, CAUSE, DIAGNOSIS, TREATMENT, LIFESTYLE, PREVENTION)

#: Pairs of aspects whose answers partly answer each other's questions (grade 1).
RELATED_ASPECTS: tuple[tuple[str, str], ...] = (
    ("symptom", "diagnosis"),
    ("cause", "prevention"),
    ("treatment", "lifestyle"),
)
