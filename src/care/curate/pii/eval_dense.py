"""The "dense" style of the anonymiser's evaluation set: clinical notes that hold one to four
identifiers each among look-alike values (formerly ``pii_examples``, the set of
``benchmarks/bench_curate.py``).

A note opens with a symptom, then one to four PII sentences (a name after a context word, a resident
ID, a mobile or landline, a bank card, a record number, an e-mail address, a URL, an address), each
followed by a look-alike sentence more often than not: lab values, a visit date, a dose, an order
number, an 18-digit barcode whose checksums fail, a disease that starts with a surname character
(黄疸, 高血压), a hospital named after its city. A masked name (``王某``) ends some notes. Unlike
the "written" style (:mod:`care.curate.pii.eval_set`), identifiers here are always valid (resident
IDs carry a correct MOD 11-2 check character, bank cards a correct Luhn digit) and labelled the
standard way, names are drawn character by character, and URLs occur.

Every look-alike sentence is a keep span (:data:`~care.curate.pii.eval_line.KEEP_TRAP` for the
diseases and hospitals, :data:`~care.curate.pii.eval_line.KEEP_CLINICAL` for the rest). Inputs:
``n`` and ``seed``; output: :class:`~care.curate.pii.eval_line.EvalLine` s, the same for the same
``(n, seed)``. Use it through :func:`care.curate.pii.eval_set.generate_eval_set` (``style="dense"``).
"""

from __future__ import annotations

import random

from care.curate.pii.eval_line import KEEP_CLINICAL, KEEP_TRAP, EvalLine, LineBuilder, digits
from care.curate.pii.rules import id_checksum_char, luhn_valid

#: The seed of the set measured by ``benchmarks/bench_curate.py`` since the set was written.
DENSE_SEED = 20240601
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
HOSPITALS = ("北京协和医院", "上海市第一人民医院", "华西医院")
NAME_CONTEXTS = (("患者", "，"), ("主治医师：", "。"), ("家属", "陪同。"), ("请", "医生复诊。"), ("联系人：", "，"))


def valid_resident_id(rng: random.Random) -> str:
    """A syntactically valid 18-digit resident ID (real area code, real date, correct check char)."""
    year, month, day = rng.randint(1940, 2015), rng.randint(1, 12), rng.randint(1, 28)
    first17 = f"{rng.choice(AREA_CODES)}{year:04d}{month:02d}{day:02d}{digits(rng, 3)}"
    return first17 + id_checksum_char(first17)


def _bank_card(rng: random.Random) -> str:
    """A Luhn-valid 16 or 19 digit card number, sometimes grouped by four."""
    length = rng.choice((16, 19))
    body = rng.choice(CARD_PREFIXES) + digits(rng, length - 5)
    number = next(body + d for d in "0123456789" if luhn_valid(body + d))
    if length == 16 and rng.random() < 0.4:
        return " ".join(number[i:i + 4] for i in range(0, 16, 4))
    return number


def _mobile(rng: random.Random) -> str:
    number = rng.choice(MOBILE_PREFIXES) + digits(rng, 8)
    style = rng.random()
    if style < 0.2:
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if style < 0.3:
        return "+86 " + number
    return number


def _landline(rng: random.Random) -> str:
    area = rng.choice(LANDLINE_AREAS)
    local = str(rng.randint(2, 8)) + digits(rng, 7 if len(area) == 3 else rng.choice((6, 7)))
    return f"（{area}）{local}" if rng.random() < 0.2 else f"{area}-{local}"


def _name(rng: random.Random) -> str:
    surname = rng.choice(COMPOUND_SURNAMES) if rng.random() < 0.05 else rng.choice(SURNAMES)
    return surname + "".join(rng.choice(GIVEN_CHARS) for _ in range(rng.choice((1, 2, 2))))


def _address(rng: random.Random) -> str:
    province, city = rng.choice(PROVINCES)
    addr = province + city + rng.choice(DISTRICTS) + rng.choice(ROADS) + f"{rng.randint(1, 999)}号"
    if rng.random() < 0.5:
        addr += f"{rng.randint(1, 30)}栋{rng.randint(1, 6)}单元{rng.randint(101, 2804)}室"
    return addr


def _invalid_barcode(rng: random.Random) -> str:
    """An 18-digit barcode that fails both the resident-ID check and the Luhn check."""
    while True:
        first17 = f"{rng.choice(AREA_CODES)}{rng.randint(1940, 2015):04d}0{rng.randint(1, 9)}1{rng.randint(0, 9)}{digits(rng, 3)}"
        check = rng.choice("0123456789")
        cand = first17 + check
        if check != id_checksum_char(first17) and not luhn_valid(cand):
            return cand


def _distractor(rng: random.Random, b: LineBuilder) -> None:
    """A look-alike sentence, added as one keep span."""
    kind, r = rng.randrange(8), rng.randint
    if kind == 0:
        text, keep = f"空腹血糖{r(4, 15)}.{r(0, 9)}mmol/L，糖化血红蛋白{r(5, 12)}.{r(0, 9)}%。", KEEP_CLINICAL
    elif kind == 1:
        text, keep = f"{r(2015, 2024)}年{r(1, 12)}月{r(1, 28)}日复查肝功能，ALT {r(10, 300)} U/L。", KEEP_CLINICAL
    elif kind == 2:
        dose = rng.choice(("0.25", "0.5", "1.0"))
        text, keep = f"予阿莫西林{dose}g 口服，每日{r(2, 3)}次，共{r(5, 14)}天。", KEEP_CLINICAL
    elif kind == 3:
        text, keep = f"检验条码{_invalid_barcode(rng)}，标本已送检。", KEEP_CLINICAL
    elif kind == 4:
        disease = rng.choice(DISEASES)
        text, keep = f"既往{disease}病史{r(2, 20)}年，{rng.choice(('黄疸', '高血压', '白细胞升高'))}待查。", KEEP_TRAP
    elif kind == 5:
        text, keep = f"订单号{digits(rng, 12)}已支付，费用{r(100, 9999)}元。", KEEP_CLINICAL
    elif kind == 6:
        text, keep = f"血常规：白细胞{r(3, 15)}.{r(0, 9)}×10^9/L，血小板{r(100, 400)}×10^9/L。", KEEP_CLINICAL
    else:
        text, keep = f"建议到{rng.choice(HOSPITALS)}消化科就诊，康复期间注意休息。", KEEP_TRAP
    b.add(text, keep=keep)


def _pii_sentence(rng: random.Random, b: LineBuilder) -> None:
    kind = rng.randrange(9)
    if kind == 0:
        before, after = rng.choice(NAME_CONTEXTS)
        b.add(before)
        b.add(_name(rng), "NAME")
        b.add(after)
    elif kind == 1:
        b.add(rng.choice(("身份证号：", "身份证号码", "证件号 ")))
        b.add(valid_resident_id(rng), "ID")
        b.add("。")
    elif kind == 2:
        b.add(rng.choice(("联系电话：", "手机", "电话 ", "如有不适请拨打")))
        b.add(_mobile(rng), "PHONE")
        b.add("。")
    elif kind == 3:
        b.add(rng.choice(("科室电话", "座机：", "值班室电话")))
        b.add(_landline(rng), "PHONE")
        b.add("。")
    elif kind == 4:
        b.add(rng.choice(("报销需提供银行卡号", "退费至卡号", "银行卡：")))
        b.add(_bank_card(rng), "BANK_CARD")
        b.add("。")
    elif kind == 5:
        b.add(rng.choice(MRN_KEYWORDS) + rng.choice(("：", "", " ")))
        b.add(rng.choice(("", "ZY", "MZ")) + digits(rng, rng.randint(6, 10)), "MRN")
        b.add("，")
    elif kind == 6:
        b.add(rng.choice(("报告发送至邮箱", "邮箱：", "联系邮箱 ")))
        user = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 8)))
        b.add(f"{user}{rng.choice(('', '.', '_'))}{digits(rng, rng.randint(0, 4))}@{rng.choice(EMAIL_DOMAINS)}", "EMAIL")
        b.add("。")
    elif kind == 7:
        b.add(rng.choice(("预约请访问", "详见 ", "结果查询：")))
        b.add(f"https://{rng.choice(URL_DOMAINS)}/report?id={digits(rng, 6)}", "URL")
        b.add("。")
    else:
        b.add(rng.choice(ADDRESS_ANCHORS))
        b.add(_address(rng), "ADDRESS")
        b.add("。")


def generate_dense_lines(n: int, *, seed: int = DENSE_SEED) -> list[EvalLine]:
    """``n`` notes, each with 1-4 PII sentences and 1-5 look-alike sentences (keep spans)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = LineBuilder()
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
