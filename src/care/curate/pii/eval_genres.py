"""Labelled texts of three genres of medical writing, to measure the anonymiser genre by genre.

:func:`generate_genre_set` builds ``n`` texts of one genre of :data:`GENRES` from a seed:

- ``doctor_answer``: a doctor's answer on a consultation site (advice, drugs, when to come back);
- ``encyclopedic``: a disease article, a herb or drug monograph, a physiology entry (eponyms, historic
  physicians cited as sources, herbs, physiology terms, epidemiology lists of provinces and cities);
- ``clinical_note``: a ward or clinic note (history, findings, orders).

Each text is two to four sentences of its genre, written for the project by hand (not copied from any
data set), in which the medical words that must stay are marked as keep spans (``trap``): 唐氏儿,
伏格特-小柳-原田病, 张景岳认为, 黄蜀葵, 舒张峰, 北京、上海、广州等地 ... About half the texts also hold one
or two identifiers in the way the genre holds them (the answering doctor's name and phone in an answer,
the reviewer or a case report's patient in an article, the patient, relatives and record number in a
note), with exact gold spans. Scores: :func:`care.curate.pii.scoring.score_eval_set`; spurious
removals per 1,000 texts are the predicted spans that touch no identifier.

The sentences were written while the medical-word protection (:mod:`care.curate.pii.medical_terms`)
was built, so they are a development set; the public dev set's doctor answers (``benchmarks/bench_pii.py``,
``--real``) are the check nobody here wrote. Inputs: ``genre``, ``n``, ``seed``; the same inputs give
the same texts.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from care.curate.pii.eval_line import KEEP_TRAP, EvalLine, LineBuilder, digits
from care.curate.pii.eval_set import address, landline, mobile, name, record_number, resident_id
from care.errors import CareError

GENRES: tuple[str, ...] = ("doctor_answer", "encyclopedic", "clinical_note")
DEFAULT_GENRE_SEED = 60
DEFAULT_GENRE_TEXTS = 1000
#: Share of texts that hold identifiers (one or two); the rest hold none.
PII_SHARE = 0.5
#: Body sentences per text (fewest, most).
SENTENCES_PER_TEXT = (2, 4)

DOCTOR_ANSWERS = (
    "你好，根据你的描述，考虑是<慢性胃炎>，建议口服<奥美拉唑>和<铝碳酸镁>治疗。",
    "这种情况可能是<白大衣高血压>，建议在家自测血压一周再看。",
    "可以用<龙胆紫>外涂，保持创面干燥，一般一周左右能好。",
    "宝宝是<川崎病>的可能性不大，但要注意观察有没有持续发热、眼红、口唇皲裂。",
    "<帕金森病>目前不能根治，<多巴丝肼>可以改善症状，要在医生指导下调整剂量。",
    "建议查一下甲状腺功能和甲状腺抗体，排除<桥本甲状腺炎>。",
    "唐氏筛查高风险不等于就是<唐氏儿>，建议做无创DNA或羊水穿刺确诊。",
    "中药可以用<黄芪>、<党参>、<白术>益气健脾，但要辨证使用。",
    "<何首乌>有肝毒性的报道，长期服用要定期查肝功能。",
    "血压<舒张压>偏高，多见于年轻人，要少盐、戒烟、多运动。",
    "孩子的情况考虑<手足口病>，多由<柯萨奇病毒>引起，注意隔离。",
    "<罗布麻>茶有一定降压作用，但不能代替降压药。",
    "视力下降伴头痛耳鸣要警惕<原田病>，尽快去眼科查眼底。",
    "<克罗恩病>需要长期随访，按时复查肠镜。",
    "你说的口腔溃疡反复发作，还有外阴溃疡，要排除<白塞病>。",
    "可以喝点<金银花>、<菊花>泡水，清热解毒。",
    "按<张仲景>的说法这属于太阳病，可以考虑<桂枝汤>加减。",
    "<甘草>不宜长期大量服用，会引起水肿和血压升高。",
    "建议去医院做个心脏彩超，看看<舒张功能>怎么样。",
    "<黄连素>对一般的腹泻有效，如果有发热脓血便要查大便常规。",
    "老人记忆力下降要排除<阿尔茨海默病>，可以做个头颅核磁。",
    "手指遇冷发白发紫，考虑<雷诺现象>，注意保暖。",
    "眩晕伴耳鸣听力下降，可能是<梅尼埃病>，建议耳鼻喉科就诊。",
    "这个药是<马来酸依那普利>，饭前饭后吃都可以。",
    "<石菖蒲>、<远志>有安神作用，可以在中医师指导下服用。",
    "复查<幽门螺杆菌>要停药一个月以后再做呼气试验。",
    "这个年龄的女性要注意<宫颈癌>筛查，定期做<巴氏涂片>或TCT。",
    "如果服药后出现皮疹、发热、口腔黏膜糜烂，要警惕<斯-约综合征>，立即停药就医。",
)
ENCYCLOPEDIC = (
    "<唐氏儿>是指患有<唐氏综合征>的婴儿，<唐氏儿>的智力发育明显落后于同龄儿童。",
    "孕妇年龄越大，生育<唐氏儿>的风险越高。",
    "<伏格特-小柳-原田病>是一种累及眼、耳、皮肤和脑膜的自身免疫病。",
    "<张景岳>认为，阳非有余，阴常不足，治病当重视温补。",
    "《<景岳全书>》为明代<张景岳>所著，共六十四卷。",
    "<叶天士>创立了卫气营血辨证，为温病学说奠定了基础。",
    "<吴鞠通>著《<温病条辨>》，提出三焦辨证。",
    "<张仲景>被后世尊为医圣，所著《<伤寒杂病论>》确立了辨证论治的原则。",
    "<李时珍>在《<本草纲目>》中记载了此药的性味归经。",
    "<朱丹溪>提出“阳常有余，阴常不足”的观点，为滋阴派的代表。",
    "<黄蜀葵>，又名秋葵，其花入药，具有清利湿热、消肿解毒的功效。",
    "取<黄蜀葵>花适量，研末外敷，可治烫伤。",
    "<龙胆紫>俗称紫药水，可用于皮肤黏膜感染。",
    "心动周期分为<等容收缩>期、射血期、<等容舒张>期和充盈期。",
    "多普勒超声可见<收缩峰>和<舒张峰>，<舒张峰>降低提示心室舒张功能减退。",
    "<浦肯野纤维>分布于心室肌，传导速度最快。",
    "<郎飞结>是有髓神经纤维上的缩窄部，动作电位在此跳跃式传导。",
    "<柯蒂氏器>位于内耳蜗管的基底膜上，是听觉感受器。",
    "<希氏束>起自<房室结>，下行于室间隔。",
    "本病在我国<北京>、<上海>、<广州>等地发病率较高。",
    "本病在我国分布广泛，以<河北>、<山东>、<河南>、<安徽>等省多见。",
    "<新疆>、<西藏>、<青海>等地区报告病例较少。",
    "我国<湖北省武汉市>、<江苏省南京市>等地均有病例报告。",
    "在<云南省西双版纳州>、<广西壮族自治区百色市>等地曾发生暴发流行。",
    "<湖南省长沙市>、<湘潭市>、<株洲市>均有报道。",
    "<格林-巴利综合征>是急性炎性脱髓鞘性多发性神经病。",
    "<贝赫切特综合征>又称<白塞病>，以复发性口腔溃疡为特征。",
    "<霍奇金淋巴瘤>多见于青年，常以无痛性颈部淋巴结肿大起病。",
    "<何首乌>具有补肝肾、益精血、乌须发的功效。",
    "<马齿苋>性寒，味酸，可清热解毒、凉血止痢。",
    "<杜仲>补肝肾、强筋骨、安胎。",
    "<钟乳石>温肺、助阳、平喘、制酸。",
    "<车前子>利尿通淋、渗湿止泻、明目、祛痰。",
    "<白头翁汤>出自《<伤寒论>》，主治热毒痢疾。",
    "<常山>有截疟之效，但有催吐的副作用。",
    "<桥本甲状腺炎>是最常见的自身免疫性甲状腺疾病。",
    "<川崎病>又称皮肤黏膜淋巴结综合征，多见于5岁以下儿童。",
    "<雷诺病>表现为肢端动脉阵发性痉挛，遇冷或情绪激动时发作。",
    "<库欣综合征>是由于皮质醇长期分泌过多引起的一组症状。",
    "<马方综合征>是一种常染色体显性遗传的结缔组织病。",
    "明代医家<张景岳>在其著作中详细论述了此证。",
    "清代<王清任>著《<医林改错>》，创制了血府逐瘀汤。",
    "<孙思邈>著《<千金要方>》，被誉为药王。",
    "<巴宾斯基征>阳性提示锥体束受损。",
    "<墨菲征>阳性见于急性胆囊炎。",
    "<施万细胞>包绕周围神经的轴突形成髓鞘。",
)
CLINICAL_NOTES = (
    "主诉：反复上腹痛3年，加重1周。既往有<慢性胃炎>病史。",
    "查体：<巴宾斯基征>阴性，<克尼格征>阴性。",
    "诊断：<桥本甲状腺炎>，甲状腺功能减退。",
    "心脏彩超：左室<舒张功能>减低，二尖瓣血流<舒张峰>E/A小于1。",
    "既往史：10年前诊断<克罗恩病>，长期口服<美沙拉嗪>。",
    "眼科会诊考虑<伏格特-小柳-原田病>，予糖皮质激素治疗。",
    "予<黄芪>30g、<党参>15g、<白术>12g水煎服，日一剂。",
    "患儿发热5天，双眼结膜充血，口唇皲裂，考虑<川崎病>。",
    "产前筛查提示<唐氏综合征>高风险，建议羊水穿刺。",
    "皮肤破损处予<龙胆紫>外涂。",
    "神经科查体：<墨菲征>阴性，四肢肌力5级。",
    "<帕金森病>病史5年，规律服用<多巴丝肼>。",
    "心电图：窦性心律，<希氏束>电图未见异常。",
    "予<甘草>酸二铵保肝治疗。",
    "流行病学史：近期无<湖北省>旅居史。",
    "诊断：<白塞病>，口腔溃疡反复发作。",
    "<库欣综合征>术后，激素替代治疗中。",
    "病理：<霍奇金淋巴瘤>（结节硬化型）。",
    "血压150/95mmHg，<舒张压>偏高，予<氨氯地平>5mg口服。",
    "追问病史，患者曾服用<何首乌>制剂半年。",
    "耳鼻喉科：<梅尼埃病>待排。",
    "双手遇冷变白，<雷诺现象>阳性。",
)
BODIES: dict[str, tuple[str, ...]] = {"doctor_answer": DOCTOR_ANSWERS, "encyclopedic": ENCYCLOPEDIC,
                                      "clinical_note": CLINICAL_NOTES}

Piece = tuple[str, str | None]  # (text, PII type or None)
Identifier = Callable[[random.Random], list[Piece]]


def _wechat(r: random.Random) -> str:
    return r.choice(("dr_", "doc", "yisheng")) + digits(r, r.randint(4, 8))


def _email(r: random.Random) -> str:
    return r.choice(("zhang", "liyi", "wang.doc", "health")) + digits(r, 3) + "@" + r.choice(("163.com", "qq.com"))


DOCTOR_IDENTIFIERS: tuple[Identifier, ...] = (
    lambda r: [("我是消化内科的", None), (name(r), "NAME"), ("医生，", None)],
    lambda r: [("有问题可以打我电话", None), (mobile(r), "PHONE"), ("。", None)],
    lambda r: [("可以加我微信", None), (_wechat(r), "WECHAT"), ("，把检查结果发给我。", None)],
    lambda r: [("周三上午到门诊找", None), (name(r), "NAME"), ("主任复查。", None)],
    lambda r: [("你说的", None), (name(r), "NAME"), ("大夫是我们科的，可以找他。", None)],
)
ENCYCLOPEDIC_IDENTIFIERS: tuple[Identifier, ...] = (
    lambda r: [("本文由", None), (name(r), "NAME"), ("医生审核。", None)],
    lambda r: [("病例：患者", None), (name(r), "NAME"), (f"，男，{r.randint(20, 80)}岁，家住", None),
               (address(r), "ADDRESS"), ("。", None)],
    lambda r: [("投稿邮箱：", None), (_email(r), "EMAIL"), ("。", None)],
    lambda r: [("咨询电话：", None), (landline(r), "PHONE"), ("。", None)],
)
NOTE_IDENTIFIERS: tuple[Identifier, ...] = (
    lambda r: [("患者", None), (name(r), "NAME"), (f"，女，{r.randint(18, 90)}岁。", None)],
    lambda r: [("住院号：", None), (record_number(r), "MRN"), ("。", None)],
    lambda r: [("身份证号：", None), (resident_id(r), "ID"), ("。", None)],
    lambda r: [("家属", None), (name(r), "NAME"), ("陪同，联系电话", None), (mobile(r), "PHONE"), ("。", None)],
    lambda r: [("现住址：", None), (address(r), "ADDRESS"), ("。", None)],
    lambda r: [("主治医师：", None), (name(r), "NAME"), ("。", None)],
)
IDENTIFIERS: dict[str, tuple[Identifier, ...]] = {"doctor_answer": DOCTOR_IDENTIFIERS,
                                                 "encyclopedic": ENCYCLOPEDIC_IDENTIFIERS,
                                                 "clinical_note": NOTE_IDENTIFIERS}


def generate_genre_set(genre: str, n: int = DEFAULT_GENRE_TEXTS, *, seed: int = DEFAULT_GENRE_SEED) -> list[EvalLine]:
    """``n`` labelled texts of ``genre`` (one of :data:`GENRES`; see the module docstring)."""
    if genre not in GENRES:
        raise CareError(f"unknown genre {genre!r}; use one of {', '.join(GENRES)}")
    r = random.Random(f"{genre}:{seed}")
    lines = []
    for _ in range(n):
        parts: list[list[Piece] | str] = list(r.sample(BODIES[genre], r.randint(*SENTENCES_PER_TEXT)))
        if r.random() < PII_SHARE:
            for _ in range(r.choice((1, 1, 2))):
                parts.insert(r.randint(0, len(parts)), r.choice(IDENTIFIERS[genre])(r))
        line = LineBuilder()
        for part in parts:
            if isinstance(part, str):
                line.add_marked(part, KEEP_TRAP)
            else:
                for text, pii_type in part:
                    line.add(text, pii_type)
        lines.append(line.build())
    return lines
