"""A labelled, synthetic set of Chinese medical texts with known PII spans, and span-level scoring.

The texts are generated deterministically from a seed (valid resident IDs carry a correct MOD 11-2
check character, bank cards a correct Luhn digit) and mixed with look-alikes that must *not* be
removed: lab values, dates, doses, order numbers, 18-digit barcodes whose checksums fail, and
diseases that start with a surname character (黄疸, 高血压). Every generated text records the
exact span of each identifier, so recall and precision can be measured per type.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from care.curate.pii_rules import PII_TYPES, STRUCTURED_TYPES, Span, id_checksum_char, luhn_valid

DEFAULT_SEED = 20240601
AREA_CODES = ("110105", "310104", "440305", "510107", "330106", "420102", "320102", "610113", "370202", "210102")
MOBILE_PREFIXES = ("130", "135", "138", "139", "150", "158", "166", "177", "186", "189", "199")
LANDLINE_AREAS = ("010", "021", "0755", "0571", "028", "027", "025", "029", "0532", "024")
CARD_PREFIXES = ("6222", "6217", "6228", "6212", "4367", "5187", "6225")
EMAIL_DOMAINS = ("163.com", "qq.com", "126.com", "sina.com", "hospital.org.cn", "gmail.com")
URL_DOMAINS = ("www.example-hospital.cn", "health.example.com", "www.yiyuan.org.cn")
MRN_KEYWORDS = ("病历号", "住院号", "门诊号", "病案号", "就诊卡号")
GIVEN_CHARS = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华建国玉兰志红文辉晓燕海波鹏宇欣怡子涵浩然梓萱俊"
SURNAMES = "王李张刘陈杨赵吴周徐孙马朱胡郭何林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董潘袁蔡蒋余于杜叶程魏苏吕丁任卢姚沈钟姜崔谭陆范汪廖石金贾"
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛")
PROVINCES = (("北京市", ""), ("上海市", ""), ("广东省", "广州市"), ("浙江省", "杭州市"), ("四川省", "成都市"),
             ("湖北省", "武汉市"), ("江苏省", "南京市"), ("陕西省", "西安市"), ("山东省", "青岛市"))
DISTRICTS = ("朝阳区", "海淀区", "浦东新区", "天河区", "西湖区", "武侯区", "江汉区", "鼓楼区", "雁塔区", "市南区", "长安县")
ROADS = ("建国路", "中山路", "人民大道", "解放街", "文化巷", "长江路", "和平里街", "科技园路", "学院路")
SYMPTOMS = ("反复头痛", "胸闷气短", "上腹部隐痛", "咳嗽咳痰", "双下肢水肿", "乏力纳差", "心悸", "皮肤黄染")
DISEASES = ("高血压", "2型糖尿病", "慢性乙型肝炎", "冠心病", "胃食管反流病", "黄疸", "甲状腺功能亢进", "慢性胃炎")
ADDRESS_ANCHORS = ("住址：", "家住", "现住", "家庭住址：", "")
NAME_CONTEXTS = (("患者", "，"), ("主治医师：", "。"), ("家属", "陪同。"), ("请", "医生复诊。"), ("联系人：", "，"))


@dataclass(frozen=True)
class LabelledText:
    """A text and its gold PII spans."""

    text: str
    spans: tuple[Span, ...]


class _Builder:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[Span] = []
        self.length = 0

    def add(self, text: str, pii_type: str | None = None) -> None:
        if pii_type:
            self.spans.append(Span(self.length, self.length + len(text), pii_type, text))
        self.parts.append(text)
        self.length += len(text)

    def build(self) -> LabelledText:
        return LabelledText("".join(self.parts), tuple(self.spans))


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def make_resident_id(rng: random.Random) -> str:
    """A syntactically valid 18-digit resident ID (real area code, real date, correct check char)."""
    year, month, day = rng.randint(1940, 2015), rng.randint(1, 12), rng.randint(1, 28)
    first17 = f"{rng.choice(AREA_CODES)}{year:04d}{month:02d}{day:02d}{_digits(rng, 3)}"
    return first17 + id_checksum_char(first17)


def make_bank_card(rng: random.Random) -> str:
    """A Luhn-valid 16 or 19 digit card number, sometimes grouped by four."""
    length = rng.choice((16, 19))
    body = rng.choice(CARD_PREFIXES) + _digits(rng, length - 5)
    number = next(body + d for d in "0123456789" if luhn_valid(body + d))
    if length == 16 and rng.random() < 0.4:
        return " ".join(number[i:i + 4] for i in range(0, 16, 4))
    return number


def make_mobile(rng: random.Random) -> str:
    number = rng.choice(MOBILE_PREFIXES) + _digits(rng, 8)
    style = rng.random()
    if style < 0.2:
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if style < 0.3:
        return "+86 " + number
    return number


def make_landline(rng: random.Random) -> str:
    area = rng.choice(LANDLINE_AREAS)
    local = str(rng.randint(2, 8)) + _digits(rng, 7 if len(area) == 3 else rng.choice((6, 7)))
    return f"（{area}）{local}" if rng.random() < 0.2 else f"{area}-{local}"


def make_name(rng: random.Random) -> str:
    surname = rng.choice(COMPOUND_SURNAMES) if rng.random() < 0.05 else rng.choice(SURNAMES)
    return surname + "".join(rng.choice(GIVEN_CHARS) for _ in range(rng.choice((1, 2, 2))))


def make_address(rng: random.Random) -> str:
    province, city = rng.choice(PROVINCES)
    addr = province + city + rng.choice(DISTRICTS) + rng.choice(ROADS) + f"{rng.randint(1, 999)}号"
    if rng.random() < 0.5:
        addr += f"{rng.randint(1, 30)}栋{rng.randint(1, 6)}单元{rng.randint(101, 2804)}室"
    return addr


def make_invalid_id(rng: random.Random) -> str:
    """An 18-digit barcode that fails both the resident-ID check and the Luhn check."""
    while True:
        first17 = f"{rng.choice(AREA_CODES)}{rng.randint(1940, 2015):04d}0{rng.randint(1, 9)}1{rng.randint(0, 9)}{_digits(rng, 3)}"
        check = rng.choice("0123456789")
        cand = first17 + check
        if check != id_checksum_char(first17) and not luhn_valid(cand):
            return cand


def _distractor(rng: random.Random, b: _Builder) -> None:
    kind = rng.randrange(8)
    if kind == 0:
        b.add(f"空腹血糖{rng.randint(4, 15)}.{rng.randint(0, 9)}mmol/L，糖化血红蛋白{rng.randint(5, 12)}.{rng.randint(0, 9)}%。")
    elif kind == 1:
        b.add(f"{rng.randint(2015, 2024)}年{rng.randint(1, 12)}月{rng.randint(1, 28)}日复查肝功能，ALT {rng.randint(10, 300)} U/L。")
    elif kind == 2:
        b.add(f"予阿莫西林{rng.choice(('0.25', '0.5', '1.0'))}g 口服，每日{rng.randint(2, 3)}次，共{rng.randint(5, 14)}天。")
    elif kind == 3:
        b.add(f"检验条码{make_invalid_id(rng)}，标本已送检。")
    elif kind == 4:
        b.add(f"既往{rng.choice(DISEASES)}病史{rng.randint(2, 20)}年，{rng.choice(('黄疸', '高血压', '白细胞升高'))}待查。")
    elif kind == 5:
        b.add(f"订单号{_digits(rng, 12)}已支付，费用{rng.randint(100, 9999)}元。")
    elif kind == 6:
        b.add(f"血常规：白细胞{rng.randint(3, 15)}.{rng.randint(0, 9)}×10^9/L，血小板{rng.randint(100, 400)}×10^9/L。")
    else:
        b.add(f"建议到{rng.choice(('北京协和医院', '上海市第一人民医院', '华西医院'))}消化科就诊，康复期间注意休息。")


def _pii_sentence(rng: random.Random, b: _Builder) -> None:
    kind = rng.randrange(9)
    if kind == 0:
        before, after = rng.choice(NAME_CONTEXTS)
        b.add(before)
        b.add(make_name(rng), "NAME")
        b.add(after)
    elif kind == 1:
        b.add(rng.choice(("身份证号：", "身份证号码", "证件号 ")))
        b.add(make_resident_id(rng), "ID")
        b.add("。")
    elif kind == 2:
        b.add(rng.choice(("联系电话：", "手机", "电话 ", "如有不适请拨打")))
        b.add(make_mobile(rng), "PHONE")
        b.add("。")
    elif kind == 3:
        b.add(rng.choice(("科室电话", "座机：", "值班室电话")))
        b.add(make_landline(rng), "PHONE")
        b.add("。")
    elif kind == 4:
        b.add(rng.choice(("报销需提供银行卡号", "退费至卡号", "银行卡：")))
        b.add(make_bank_card(rng), "BANK_CARD")
        b.add("。")
    elif kind == 5:
        b.add(rng.choice(MRN_KEYWORDS) + rng.choice(("：", "", " ")))
        b.add(rng.choice(("", "ZY", "MZ")) + _digits(rng, rng.randint(6, 10)), "MRN")
        b.add("，")
    elif kind == 6:
        b.add(rng.choice(("报告发送至邮箱", "邮箱：", "联系邮箱 ")))
        user = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        b.add(f"{user}{rng.choice(('', '.', '_'))}{_digits(rng, rng.randint(0, 4))}@{rng.choice(EMAIL_DOMAINS)}", "EMAIL")
        b.add("。")
    elif kind == 7:
        b.add(rng.choice(("预约请访问", "详见 ", "结果查询：")))
        b.add(f"https://{rng.choice(URL_DOMAINS)}/report?id={_digits(rng, 6)}", "URL")
        b.add("。")
    else:
        b.add(rng.choice(ADDRESS_ANCHORS))
        b.add(make_address(rng), "ADDRESS")
        b.add("。")


def generate_labelled_texts(n: int, *, seed: int = DEFAULT_SEED) -> list[LabelledText]:
    """``n`` synthetic medical texts, each with 1-4 PII sentences and 1-3 look-alike distractors."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = _Builder()
        b.add(f"{rng.choice(SYMPTOMS)}{rng.randint(2, 30)}天，")
        for _ in range(rng.randint(1, 4)):
            _pii_sentence(rng, b)
            if rng.random() < 0.6:
                _distractor(rng, b)
        _distractor(rng, b)
        if rng.random() < 0.3:
            b.add(f"{rng.choice(SURNAMES)}某", "NAME")
            b.add(f"因{rng.choice(DISEASES)}就诊。")
        out.append(b.build())
    return out


@dataclass(frozen=True)
class TypeScore:
    """Span-level scores of one type: a gold span counts as found when a predicted span of the same
    type overlaps it; a prediction counts as correct when it overlaps a gold span of its type."""

    type: str
    gold: int
    predicted: int
    recall: float
    precision: float
    exact: int

    def as_dict(self) -> dict[str, float | int | str]:
        return {"type": self.type, "gold": self.gold, "predicted": self.predicted, "recall": self.recall,
                "precision": self.precision, "exact_matches": self.exact}


def _overlaps(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


def score_spans(gold: Sequence[Sequence[Span]], predicted: Sequence[Sequence[Span]]) -> dict[str, TypeScore]:
    """Per-type recall / precision over a corpus, plus ``"STRUCTURED"`` and ``"ALL"`` aggregates."""
    groups: dict[str, tuple[frozenset[str], list[int]]] = {t: (frozenset({t}), [0, 0, 0, 0, 0]) for t in PII_TYPES}
    groups["STRUCTURED"] = (STRUCTURED_TYPES, [0, 0, 0, 0, 0])
    groups["ALL"] = (frozenset(PII_TYPES), [0, 0, 0, 0, 0])
    for gold_spans, pred_spans in zip(gold, predicted, strict=True):
        for types, c in groups.values():
            g = [s for s in gold_spans if s.type in types]
            p = [s for s in pred_spans if s.type in types]
            c[0] += len(g)
            c[1] += len(p)
            c[2] += sum(any(x.type == s.type and _overlaps(x, s) for x in p) for s in g)
            c[3] += sum(any(x.type == s.type and _overlaps(x, s) for x in g) for s in p)
            c[4] += sum(any(x.type == s.type and (x.start, x.end) == (s.start, s.end) for x in p) for s in g)
    return {
        name: TypeScore(name, c[0], c[1], c[2] / c[0] if c[0] else 1.0, c[3] / c[1] if c[1] else 1.0, c[4])
        for name, (_, c) in groups.items()
    }


def evaluate_anonymiser(anonymiser: object, examples: Iterable[LabelledText]) -> dict[str, TypeScore]:
    """Score ``anonymiser.find`` on labelled texts."""
    examples = list(examples)
    return score_spans([e.spans for e in examples], [anonymiser.find(e.text) for e in examples])  # type: ignore[attr-defined]
