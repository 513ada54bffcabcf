"""Openings and closings of doctors' answers, patients' question prefixes, and STS templates."""

from __future__ import annotations

#: Greetings a doctor's answer may start with (empty = start directly with the content).
GENERIC_OPENINGS: tuple[str, ...] = (
    "",
    "你好，",
    "您好，",
    "你好，根据你的描述，",
    "您好，很高兴为您解答。",
    "你好，这个问题很常见。",
)

#: Closings; ``{dept}`` is the condition's department.
CLOSINGS: tuple[str, ...] = (
    "",
    "建议到正规医院{dept}就诊。",
    "具体情况请到{dept}面诊，在医生指导下处理。",
    "以上建议仅供参考，如有不适请及时就医。",
    "祝您早日康复。",
    "如果症状持续或加重，请及时到{dept}复诊。",
)

#: Optional openings of a patient's question.
QUERY_PREFIXES: tuple[str, ...] = (
    "请问",
    "医生你好，",
    "想咨询一下，",
    "你好，",
    "大夫您好，",
)

#: Context sentences patients add before a question in unlabelled (raw) questions.
RAW_CONTEXTS: tuple[str, ...] = (
    "我今年{age}岁，",
    "我妈今年{age}岁，",
    "我爸{age}岁了，",
    "家里老人{age}岁，",
    "本人{age}岁，最近有点担心，",
)

#: Names and phone-number prefixes for the synthetic personal details in raw questions
#: (an anonymisation demo); the numbers are random, the names generic.
RAW_PII_NAMES: tuple[str, ...] = ("张先生", "李女士", "王阿姨", "刘先生", "陈女士")
RAW_PII_TEMPLATES: tuple[str, ...] = (
    "我是{name}，电话{phone}，",
    "{name}（手机{phone}）咨询：",
    "您好，我叫{name}，联系方式{phone}，",
)
PHONE_PREFIXES: tuple[str, ...] = ("138", "139", "150", "186")

#: STS question templates per synonym-group category; ``{t}`` is the dictionary term.
#: Templates of one category ask different things, so switching template changes the meaning.
STS_TEMPLATES: dict[str, tuple[str, ...]] = {
    "disease": (
        "{t}有哪些早期表现？",
        "{t}需要长期吃药吗？",
        "{t}会遗传给孩子吗？",
        "{t}要做哪些检查才能确诊？",
        "{t}能彻底治好吗？",
        "{t}患者能喝酒吗？",
    ),
    "drug": (
        "{t}有什么副作用？",
        "{t}应该饭前吃还是饭后吃？",
        "{t}可以长期服用吗？",
        "孕妇可以用{t}吗？",
        "{t}漏服了一次怎么办？",
        "{t}一天吃几次？",
    ),
    "lab": (
        "{t}偏高说明什么？",
        "{t}偏低是怎么回事？",
        "查{t}需要空腹吗？",
        "{t}的正常值是多少？",
        "{t}多久复查一次比较好？",
    ),
    "exam": (
        "做{t}之前要做什么准备？",
        "{t}检查大概要多长时间？",
        "{t}报告怎么看？",
        "{t}有辐射吗？",
        "{t}多久做一次比较合适？",
    ),
    "pathogen": (
        "{t}会传染给家人吗？",
        "感染了{t}一定要治疗吗？",
        "{t}是怎么传播的？",
        "怎么检查有没有感染{t}？",
    ),
    "symptom": (
        "老是{t}是怎么回事？",
        "{t}应该挂什么科？",
        "{t}吃什么药能缓解？",
        "{t}严重吗，需要去医院吗？",
        "晚上{t}是什么原因？",
    ),
}
