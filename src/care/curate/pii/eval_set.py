"""The anonymiser's labelled evaluation set: one generator, two styles of line.

:func:`generate_eval_set` builds ``n`` labelled lines (:class:`~care.curate.pii.eval_line.EvalLine`:
text, gold PII spans, keep spans with their category) from a seed, in one of :data:`EVAL_STYLES`:

- ``"written"`` (the default; ``benchmarks/bench_pii.py``), below;
- ``"dense"``: clinical notes holding one to four valid, standard-labelled identifiers among
  look-alike values, URLs included (:mod:`care.curate.pii.eval_dense`; ``benchmarks/bench_curate.py``).

The ``written`` style, the way patients and clinicians write, builds ``n`` single-line texts (online consultations, chat messages, ward
notes, discharge summaries, forms) from a seed. Each line holds one to three pieces of personal
information with their exact gold spans, and one or two things that must be *kept*: clinical values
(lab results, doses, visit dates, order and batch numbers, barcodes that fail every checksum) and
trap words (clinical words that start with a surname character, 王老吉, 及时看医生 ...).

The phrasing is deliberately not the shape of the rules in :mod:`care.curate.pii.rules`: labels come
with and without colons, in full-width and half-width forms, with stray spaces; numbers are grouped
by spaces or hyphens, written in full-width digits, or carry wrong check digits; names and addresses
appear in many sentence positions. Every PII kind of :data:`EVAL_KINDS` appears in every 14 lines.

Inputs: ``n`` (lines), ``seed`` and ``style``. Output: a list of :class:`EvalLine`. The same
``(n, seed, style)`` gives the same lines.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from care.curate.pii.eval_dense import generate_dense_lines
from care.curate.pii.eval_line import KEEP_CLINICAL, KEEP_TRAP, EvalLine, LineBuilder, digits
from care.curate.pii.rules import id_checksum_char, luhn_valid
from care.errors import CareError

DEFAULT_EVAL_SEED = 17
DEFAULT_EVAL_LINES = 420
#: Styles of line (see the module docstring); the first is the default.
EVAL_STYLES: tuple[str, ...] = ("written", "dense")
#: Each line is built around one of these kinds (in turn), so every kind appears n/14 times at least
#: (names and addresses, the hardest kinds, twice as often).
EVAL_KINDS: tuple[str, ...] = ("ID", "BANK_CARD", "PHONE", "MRN", "PASSPORT", "WECHAT", "QQ", "BIRTH_DATE",
                               "PLATE", "EMAIL", "NAME", "ADDRESS", "NAME", "ADDRESS")
#: Share of values written in full-width digits / letters (how some input methods type them).
FULL_WIDTH_SHARE = 0.12

_FULL_WIDTH = {c: chr(ord(c) + 0xFEE0) for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}

AREA_CODES = ("110105", "310115", "440106", "510104", "330102", "420111", "320106", "610103", "370212",
              "230102", "350203", "130102", "410105", "530102")
LANDLINE_AREAS_3 = ("010", "020", "021", "022", "023", "024", "025", "027", "028", "029")
LANDLINE_AREAS_4 = ("0571", "0755", "0532", "0731", "0591", "0871", "0451")
SURNAMES = ("王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周", "徐", "孙", "马", "朱", "胡", "郭", "何", "高",
            "林", "罗", "郑", "梁", "谢", "宋", "唐", "许", "韩", "冯", "邓", "曹", "彭", "曾", "肖", "田", "董", "袁",
            "潘", "蒋", "蔡", "余", "杜", "叶", "程", "苏", "魏", "吕", "丁", "任", "沈", "姚", "卢", "姜", "崔", "钟",
            "谭", "陆", "汪", "范", "金", "石", "廖", "贾", "夏", "韦", "付", "方", "白", "邹", "孟", "熊", "秦", "邱")
COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "慕容", "司徒", "夏侯", "令狐")
GIVEN_CHARS = ("丽娜", "志强", "秀丽", "娜娜", "建华", "晓东", "雨桐", "子轩", "春梅", "国栋", "海燕", "文静", "思远",
               "佳怡", "俊杰", "宏伟", "丹", "磊", "敏", "静", "勇", "婷", "超", "洁", "鑫", "琳", "浩", "颖", "桂兰",
               "淑珍", "德明", "玉梅", "家豪", "梓涵", "一鸣", "明轩", "欣妍", "晨曦", "红霞", "秋菊", "永福", "振华")
PINYIN_NAMES = ("Zhang Wei", "Wang Xiaoming", "Li Na", "LIU Yang", "Chen Jing", "Zhao Lei", "Ouyang Nana",
                "Huang Zhiqiang", "Xu Lina", "Sun Hao", "Wei Zhang", "Lin Yiming")
TITLES = ("医生", "主任", "女士", "先生", "大夫", "护士", "老师", "阿姨", "教授")
CITIES = (("浙江省", "杭州市", "西湖区", "文三路"), ("", "杭州市", "拱墅区", "莫干山路"), ("江苏省", "南京市", "鼓楼区", "中山北路"),
          ("广东省", "深圳市", "南山区", "科技园南路"), ("", "北京市", "朝阳区", "望京西路"), ("", "上海市", "浦东新区", "张杨路"),
          ("四川省", "成都市", "武侯区", "人民南路四段"), ("湖北省", "武汉市", "洪山区", "珞喻路"), ("", "重庆市", "渝北区", "金开大道"),
          ("山东省", "青岛市", "市南区", "香港中路"), ("河南省", "郑州市", "金水区", "花园路"), ("", "天津市", "南开区", "鞍山西道"))
COMMUNITIES = ("阳光花园", "幸福小区", "金色家园", "翠苑一区", "锦绣华庭", "滨江公寓", "望京西园四区", "南湖新村")
TOWNS = (("安徽省", "六安市", "霍邱县", "城关镇", "东湖村"), ("河北省", "保定市", "定兴县", "固城镇", "北河村"),
         ("湖南省", "邵阳市", "隆回县", "桃洪镇", "白马村"))
PLATE_PROVINCES = "京沪粤浙苏川鄂渝鲁豫津冀湘闽"
PLATE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXY"
EMAIL_DOMAINS = ("163.com", "qq.com", "126.com", "foxmail.com", "outlook.com", "sina.cn")

CLINICAL_VALUES: tuple[Callable[[random.Random], str], ...] = (
    lambda r: f"空腹血糖{r.choice(('', ' ', '：'))}{r.randint(4, 16)}.{r.randint(0, 9)} mmol/L",
    lambda r: f"血压{r.randint(100, 180)}/{r.randint(60, 110)}mmHg",
    lambda r: f"体温{r.randint(36, 40)}.{r.randint(0, 9)}℃",
    lambda r: f"心率 {r.randint(55, 130)} 次/分",
    lambda r: f"白细胞{r.randint(3, 18)}.{r.randint(0, 9)}×10^9/L",
    lambda r: f"糖化血红蛋白 {r.randint(5, 12)}.{r.randint(0, 9)}%",
    lambda r: f"肌酐{r.randint(50, 400)}μmol/L",
    lambda r: f"阿莫西林{r.choice(('0.25', '0.5', '1.0'))}g tid",
    lambda r: f"{r.randint(2019, 2025)}年{r.randint(1, 12)}月{r.randint(1, 28)}日复查",
    lambda r: f"复诊日期 {r.randint(2020, 2025)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
    lambda r: f"订单号{''.join(r.choice('0123456789') for _ in range(14))}",
    lambda r: f"国药准字H{r.randint(10000000, 20999999)}",
    lambda r: f"批号 {r.randint(220101, 251231)}",
    lambda r: f"检验条码 {_invalid_barcode(r)}",
    lambda r: f"孕{r.randint(8, 40)}周",
    lambda r: f"术后第{r.randint(1, 14)}天",
    lambda r: f"右肺结节约{r.randint(3, 25)}mm",
    lambda r: f"TSH {r.randint(0, 9)}.{r.randint(10, 99)} mIU/L",
    lambda r: f"布洛芬缓释胶囊 0.3 g，一日{r.choice('两三')}次",
    lambda r: f"HPV16型阳性，CA125 {r.randint(5, 90)} U/mL",
)
#: A trap: a sentence holding one word that must survive, marked by brackets ``<word>``.
TRAP_SENTENCES: tuple[str, ...] = (
    "CT提示<张力性气胸>，立即穿刺减压", "既往<高血压>十年", "<白细胞>偏高怎么办", "新生儿<黄疸>还没退", "<毛细血管>扩张是怎么回事",
    "骨折后打了<石膏>", "治疗<方案>要调整吗", "需要<马上>去医院吗", "上火了喝点<王老吉>行吗", "有症状要<及时看医生>",
    "有<家族史>", "<既往史>无特殊", "<孙子>三岁发烧到39度", "膝<关节>疼了两个月", "<周期>不规律", "<金黄色葡萄球菌>感染",
    "用了<万古霉素>", "<白内障>术后视力模糊", "<唐氏筛查>高风险", "吃了<黄芪>和<甘草>", "<杜仲>泡水喝可以吗",
    "<严重>的话去急诊", "<何时>复查比较好", "请<向医生>说明过敏情况", "<找医生>看看再说", "<家庭医生>签约了",
    "<全科医生>建议转诊", "<主任医师>门诊挂不上号", "<雷贝拉唑>饭前吃", "<孟鲁司特>钠片睡前吃", "<马齿苋>能吃吗",
    "<常规>体检没问题", "<石淋>用中药", "<胡萝卜>素高", "<段>时间后复查", "<毛囊炎>反复", "<林可霉素>过敏",
    "<安静>时心率偏快", "<易感>人群要接种", "<温度>计显示37.8", "<田七>粉怎么吃", "<柴胡>颗粒", "<龙胆>泻肝丸",
    "<左侧>乳腺结节", "<于是>去了急诊", "<高烧>不退", "<牛奶>过敏", "<钱>不够住院", "<朱砂>有毒吗", "<金银花>露",
)
CLAUSE_JOINERS = ("，", "。", "；", "，", " ", "! ", "，", "？", ",", "。")


def _full_width(r: random.Random, value: str) -> str:
    return "".join(_FULL_WIDTH.get(c, c) for c in value) if r.random() < FULL_WIDTH_SHARE else value


def _colon(r: random.Random) -> str:
    return r.choice(("：", ":", " ", "", "： ", "为", "是", " : "))


def _invalid_barcode(r: random.Random) -> str:
    """18 digits that fail the resident-ID check and Luhn (a lab barcode)."""
    while True:
        first17 = f"{r.choice(AREA_CODES)}{r.randint(1950, 2015)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}{digits(r, 3)}"
        check = r.choice("0123456789")
        if check != id_checksum_char(first17) and not luhn_valid(first17 + check):
            return first17 + check


# --- values ------------------------------------------------------------------------------------

def resident_id(r: random.Random) -> str:
    first17 = f"{r.choice(AREA_CODES)}{r.randint(1940, 2016)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}{digits(r, 3)}"
    check = id_checksum_char(first17)
    if r.random() < 0.45:  # a typo in the check digit: still somebody's ID
        check = r.choice([c for c in "0123456789X" if c != check])
    number = first17 + (check.lower() if check == "X" and r.random() < 0.5 else check)
    style = r.random()
    if style < 0.3:
        return f"{number[:6]} {number[6:14]} {number[14:]}"
    if style < 0.4:
        return f"{number[:6]}-{number[6:14]}-{number[14:]}"
    return number


def bank_card(r: random.Random) -> str:
    length = r.choice((16, 16, 19))
    body = r.choice(("6222", "6217", "6228", "6230", "6214", "4392", "5201")) + digits(r, length - 5)
    valid = next(body + d for d in "0123456789" if luhn_valid(body + d))
    number = valid if r.random() < 0.5 else next(body + d for d in "0123456789" if not luhn_valid(body + d))
    style = r.random()
    if style < 0.45:
        return " ".join(number[i:i + 4] for i in range(0, length, 4))
    if style < 0.55:
        return "-".join(number[i:i + 4] for i in range(0, length, 4))
    return number


def mobile(r: random.Random) -> str:
    number = r.choice(("130", "133", "135", "137", "139", "150", "152", "158", "166", "176", "181", "188", "199")) + digits(r, 8)
    style = r.random()
    if style < 0.25:
        return f"{number[:3]} {number[3:7]} {number[7:]}"
    if style < 0.35:
        return f"{number[:3]}-{number[3:7]}-{number[7:]}"
    if style < 0.45:
        return "+86 " + number
    return number


def landline(r: random.Random) -> str:
    if r.random() < 0.55:
        area, local = r.choice(LANDLINE_AREAS_3), str(r.randint(2, 8)) + digits(r, 7)
        return r.choice((f"{area} {local[:4]} {local[4:]}", f"{area}-{local[:4]}-{local[4:]}", f"{area}-{local}",
                         f"({area}){local}", f"{area}{local}"))
    area, local = r.choice(LANDLINE_AREAS_4), str(r.randint(2, 8)) + digits(r, 6)
    return r.choice((f"{area} {local[:3]} {local[3:]}", f"{area}-{local}", f"（{area}）{local}", f"{area}-{local}转{r.randint(100, 899)}"))


def record_number(r: random.Random) -> str:
    year = r.randint(2015, 2025)
    return r.choice((
        f"BA-{year}-{digits(r, 5)}", f"ZY-{year}-{digits(r, 6)}", f"MZ{year}{digits(r, 4)}", f"{year}-{digits(r, 4)}-{digits(r, 2)}",
        f"H{digits(r, 7)}", digits(r, 8), f"ZYH{year}A{digits(r, 4)}", f"{r.choice('ABCDK')}{digits(r, 9)}",
        f"{digits(r, 4)} {digits(r, 4)} {digits(r, 2)}", f"zy{year}{digits(r, 5)}",
    ))


def passport(r: random.Random) -> str:
    return r.choice((f"E{digits(r, 8)}", f"E{r.choice('ABCDEFGH')}{digits(r, 7)}", f"G{digits(r, 8)}",
                     f"K{digits(r, 8)}", f"C{r.choice('ABCDEFGH')}{digits(r, 7)}"))


def wechat_id(r: random.Random) -> str:
    word = r.choice(("zhangwei", "lily", "xiaomei", "tom", "dr_li", "happy", "sunny", "mama", "chen", "yy"))
    return r.choice((f"{word}{digits(r, r.randint(2, 6))}", f"wxid_{''.join(r.choice('abcdefghijkmnpqrstuvwxyz0123456789') for _ in range(12))}",
                     f"{word.capitalize()}_{r.randint(1970, 2010)}", f"{word}-{digits(r, 3)}", f"{word}{r.choice('xyz')}{digits(r, 4)}"))


def qq_number(r: random.Random) -> str:
    return str(r.randint(1, 9)) + digits(r, r.randint(5, 10))


_CN_DIGITS = "〇一二三四五六七八九"


def birth_date(r: random.Random) -> str:
    y, m, d = r.randint(1935, 2020), r.randint(1, 12), r.randint(1, 28)
    style = r.randrange(8)
    if style == 0:
        return f"{y}年{m}月{d}日"
    if style == 1:
        return f"{y}-{m:02d}-{d:02d}"
    if style == 2:
        return f"{y}/{m}/{d}"
    if style == 3:
        return f"{y}.{m:02d}.{d:02d}"
    if style == 4:
        return f"{y}{m:02d}{d:02d}"
    if style == 5:
        return f"{y}年{m:02d}月"
    if style == 6:
        return "".join(_CN_DIGITS[int(c)] for c in str(y)) + "年" + _cn_number(m) + "月" + _cn_number(d) + "日"
    return f"{y} 年 {m} 月 {d} 日"


def _cn_number(n: int) -> str:
    if n < 10:
        return _CN_DIGITS[n]
    tens, ones = divmod(n, 10)
    return ("" if tens == 1 else _CN_DIGITS[tens]) + "十" + (_CN_DIGITS[ones] if ones else "")


def plate(r: random.Random) -> str:
    head = r.choice(PLATE_PROVINCES) + r.choice(PLATE_LETTERS)
    dot = r.choice(("·", "", " ", "•", "·"))
    if r.random() < 0.35:  # new-energy: 8 characters
        tail = r.choice(("D", "F")) + digits(r, 5) if r.random() < 0.6 else digits(r, 5) + r.choice(("D", "F"))
    else:
        chars = [r.choice("0123456789") for _ in range(5)]
        for i in r.sample(range(5), r.randint(0, 2)):  # at most two letters in a regular plate
            chars[i] = r.choice(PLATE_LETTERS)
        tail = "".join(chars)
    return head + dot + tail


def name(r: random.Random) -> str:
    surname = r.choice(COMPOUND_SURNAMES) if r.random() < 0.15 else r.choice(SURNAMES)
    return surname + r.choice(GIVEN_CHARS)


# --- sentences: each adds one piece of PII with its context -----------------------------------

def _labelled(labels: tuple[str, ...], value: Callable[[random.Random], str], pii_type: str,
              after: tuple[str, ...] = ("", "，", "。", " ", "（本人）", "，麻烦核对一下")) -> Callable[[random.Random, LineBuilder], None]:
    def add(r: random.Random, line: LineBuilder) -> None:
        label = r.choice(labels)
        line.add(label + _colon(r))
        line.add(_full_width(r, value(r)), pii_type)
        line.add(r.choice(after))
    return add


def _id_sentence(r: random.Random, line: LineBuilder) -> None:
    _labelled(("身份证", "身份证号", "身份证号码", "公民身份号码", "证件号码", "患者身份证", "身份证号码是", "ID card"),
              resident_id, "ID")(r, line)


def _card_sentence(r: random.Random, line: LineBuilder) -> None:
    line.add(r.choice(("退款请打到", "报销款转", "我的", "请核对", "", "医保报销绑定的")))
    _labelled(("卡号", "银行卡号", "银行卡", "储蓄卡", "工行卡号", "账号", "借记卡"), bank_card, "BANK_CARD")(r, line)


def _phone_sentence(r: random.Random, line: LineBuilder) -> None:
    number = mobile if r.random() < 0.55 else landline
    pre = r.choice(("有问题打我", "家属", "回电", "科室", "联系", "方便的话打", "值班", ""))
    line.add(pre)
    _labelled(("电话", "手机", "手机号", "座机", "联系电话", "电话号码", "tel", "Tel:", "联系方式"), number, "PHONE")(r, line)


def _mrn_sentence(r: random.Random, line: LineBuilder) -> None:
    _labelled(("病案号", "住院号", "门诊号", "就诊卡号", "就诊卡", "医保卡号", "医保卡", "社保卡号", "社保卡", "病历号",
               "ID号", "登记号", "医保号", "诊疗卡号"), record_number, "MRN")(r, line)


def _passport_sentence(r: random.Random, line: LineBuilder) -> None:
    line.add(r.choice(("出国看病用", "外籍患者", "", "境外就医，", "陪同家属")))
    _labelled(("护照", "护照号", "护照号码", "Passport No.", "港澳通行证", "通行证号码"), passport, "PASSPORT")(r, line)


def _wechat_sentence(r: random.Random, line: LineBuilder) -> None:
    line.add(r.choice(("报告发我", "方便加个", "可以加", "", "有事联系", "医生您好，我")))
    _labelled(("微信", "微信号", "VX", "vx", "wx", "WeChat", "V信", "加V"), wechat_id, "WECHAT",
              after=("", "，谢谢", "。", " 发我", "（备注看病）"))(r, line)


def _qq_sentence(r: random.Random, line: LineBuilder) -> None:
    line.add(r.choice(("片子发我", "请加", "", "可以联系我", "我的")))
    _labelled(("QQ", "qq", "QQ号", "扣扣", "Q号", "QQ号码"), qq_number, "QQ", after=("", "，谢谢", "。", " 在线"))(r, line)


def _birth_sentence(r: random.Random, line: LineBuilder) -> None:
    if r.random() < 0.25:
        line.add(r.choice(("孩子", "我", "患者", "老人家")))
        line.add(birth_date(r), "BIRTH_DATE")
        line.add(r.choice(("出生", "生", "出生的", "生人")))
        return
    _labelled(("出生日期", "生日", "出生年月", "DOB", "出生于", "生于", "出生年月日", "出生日期为"), birth_date, "BIRTH_DATE")(r, line)


def _plate_sentence(r: random.Random, line: LineBuilder) -> None:
    if r.random() < 0.5:
        _labelled(("车牌", "车牌号", "车号", "车牌号码"), plate, "PLATE", after=("", "，停在地下车库", "。"))(r, line)
        return
    line.add(r.choice(("我开", "家属开的车", "停车场那辆", "我的车")))
    line.add(plate(r), "PLATE")
    line.add(r.choice(("，能免费停吗", "挡住了", " 已登记", "")))


def _email_sentence(r: random.Random, line: LineBuilder) -> None:
    user = r.choice(("zhangli", "wang.fang", "liu_88", "mama2020", "chen.jing")) + digits(r, r.randint(0, 3))
    line.add(r.choice(("报告发到", "邮箱", "Email:", "结果请发", "")))
    line.add(f"{user}@{r.choice(EMAIL_DOMAINS)}", "EMAIL")
    line.add(r.choice(("", "，谢谢", "。")))


def _name_sentence(r: random.Random, line: LineBuilder) -> None:
    who = name(r)
    style = r.randrange(20)
    if style == 0:
        line.add(r.choice(("我叫", "我叫", "本人", "我是"))); line.add(who, "NAME"); line.add(r.choice(("，今年32岁", "，女，", "，头痛三天")))
    elif style == 1:
        line.add(who, "NAME"); line.add(r.choice(("，女，45岁，", "（男，67岁）", "，男，3岁2个月，", " 女 28岁 ")))
    elif style == 2:
        line.add(r.choice(("患者", "病人", "患儿", "病患"))); line.add(who, "NAME"); line.add(r.choice(("（", "，", "因", "于昨日", "自诉")))
    elif style == 3:
        line.add(r.choice(("家属", "陪护", "监护人", "联系人："))); line.add(who, "NAME"); line.add(r.choice(("女士陪同", "先生签字", "，", "已知情")))
    elif style == 4:
        line.add(r.choice(("护士长", "责任护士", "主治医生：", "主治医师", "管床医生", "值班医生 "))); line.add(who, "NAME"); line.add(r.choice(("。", "查房", "，", " ")))
    elif style == 5:
        line.add(r.choice(("挂了", "找", "感谢", "", "听说"))); line.add(who, "NAME"); line.add(r.choice(("医生", "主任", "教授", "大夫")))
        line.add(r.choice(("的号", "看的", "，", "说没事")))
    elif style == 6:
        line.add(r.choice(("隔壁床", "我们村的", "", "我爸"))); line.add(who, "NAME"); line.add(r.choice(("老人", "女士", "先生", "阿姨")))
        line.add(r.choice(("，", "也是这个病", "说")))
    elif style == 7:
        line.add(r.choice(("帮我妈", "替我老公", "给孩子", "帮爷爷"))); line.add(who, "NAME"); line.add(r.choice(("看看报告", "问一下", "咨询")))
    elif style == 8:
        line.add(who, "NAME"); line.add(r.choice(("昨天开始发烧", "的化验单出来了", "做完胃镜了", "这次住院花了")))
    elif style == 9:
        line.add(r.choice(("姓名：", "姓名:", "签名：", "患者姓名 ", "Name: "))); line.add(who, "NAME"); line.add(r.choice(("，", " ", "；")))
    elif style == 10:
        line.add(r.choice(("My name is ", "患者 ", "联系人 ", "Dr. "))); line.add(r.choice(PINYIN_NAMES), "NAME"); line.add(r.choice((", ", "，", " ")))
    elif style == 11:
        line.add(r.choice(PINYIN_NAMES), "NAME"); line.add(r.choice((" 女 35岁，", "(male, 52)，", " 先生")))
    elif style == 12:  # the surname + title policy: the surname is removed, the title kept
        surname = r.choice(SURNAMES)
        line.add(r.choice(("", "找", "今天", "多亏", "门诊的"))); line.add(surname, "NAME"); line.add(r.choice(TITLES))
        line.add(r.choice(("说没事", "让复查", "开的药", "，", "很负责")))
    elif style == 13:
        line.add(r.choice(("转", "交", "请"))); line.add(who, "NAME"); line.add(r.choice(("主任会诊", "医生处理", "护士换药")))
    elif style == 14:
        line.add(r.choice(("我老婆", "我儿子", "她丈夫", "女儿"))); line.add(who, "NAME"); line.add(r.choice(("，", "最近", "也有这种情况")))
    elif style == 15:
        line.add("由"); line.add(who, "NAME"); line.add(r.choice(("代为签字", "医师记录", "陪同就诊")))
    elif style == 16:
        line.add(r.choice(("@", "回复", "To "))); line.add(who, "NAME"); line.add(r.choice(("：", " ", "，")))
    elif style == 17:
        line.add(r.choice(("患儿", "新生儿"))); line.add(who, "NAME"); line.add(r.choice(("之子", "之女", "，")))
    elif style == 18:
        line.add(r.choice(("医生叫", "名字是", "他叫", "她叫"))); line.add(who, "NAME"); line.add(r.choice(("，", "。", "吧")))
    else:
        line.add(r.choice(("主刀", "麻醉", "会诊"))); line.add(r.choice(("医生", "医师"))); line.add(r.choice(("：", " ", "为"))); line.add(who, "NAME"); line.add("，")


def address(r: random.Random) -> str:
    style = r.randrange(7)
    province, city, district, road = r.choice(CITIES)
    prov = province if r.random() < 0.5 else ""
    if style == 0:
        return f"{prov}{city}{district}{road}{r.randint(1, 999)}号院{r.randint(1, 20)}号楼{r.randint(1, 6)}单元{r.randint(101, 2806)}室"
    if style == 1:
        return f"{city}{district}{road}{r.randint(1, 999)}号{r.choice(COMMUNITIES)}{r.randint(1, 30)}栋{r.randint(101, 3203)}"
    if style == 2:
        return f"{district}{r.choice(COMMUNITIES)}{r.randint(1, 30)}-{r.randint(1, 6)}-{r.randint(101, 2602)}"
    if style == 3:
        p, c, county, town, village = r.choice(TOWNS)
        return f"{p if r.random() < 0.5 else ''}{c}{county}{town}{village}{r.randint(1, 12)}组{r.randint(1, 99)}号"
    if style == 4:
        return f"{prov}{city}{road}{r.randint(1, 999)}弄{r.randint(1, 60)}号{r.randint(101, 1802)}室"
    if style == 5:
        return f"{city}{district}{r.choice(COMMUNITIES)}{r.choice('ABCDEFG')}座{r.randint(2, 30)}楼{r.randint(1, 20):02d}号"
    return f"{road}{r.randint(1, 300)}号{r.randint(1, 12)}幢{r.randint(1, 4)}单元{r.randint(2, 18)}0{r.randint(1, 4)}"


def _address_sentence(r: random.Random, line: LineBuilder) -> None:
    line.add(r.choice(("住址：", "家住", "现住", "家庭住址 ", "地址:", "我住在", "住", "快递寄到", "户籍地址：",
                       "现居", "", "老人一个人住在", "家在")))
    line.add(_full_width(r, address(r)) if r.random() < 0.3 else address(r), "ADDRESS")
    line.add(r.choice(("，", "。", "，离医院远吗", " ", "，出门不方便")))


SENTENCES: dict[str, Callable[[random.Random, LineBuilder], None]] = {
    "ID": _id_sentence, "BANK_CARD": _card_sentence, "PHONE": _phone_sentence, "MRN": _mrn_sentence,
    "PASSPORT": _passport_sentence, "WECHAT": _wechat_sentence, "QQ": _qq_sentence, "BIRTH_DATE": _birth_sentence,
    "PLATE": _plate_sentence, "EMAIL": _email_sentence, "NAME": _name_sentence, "ADDRESS": _address_sentence,
}
OPENINGS = ("医生你好，", "【门诊病历】", "主诉：", "您好 ", "出院小结：", "急！", "", "", "护理记录：", "咨询一下，", "入院记录 ")


def _keep_clause(r: random.Random, line: LineBuilder) -> None:
    if r.random() < 0.5:
        line.add(r.choice(CLINICAL_VALUES)(r), keep=KEEP_CLINICAL)
    else:
        line.add_marked(r.choice(TRAP_SENTENCES), KEEP_TRAP)


def generate_eval_set(n: int = DEFAULT_EVAL_LINES, *, seed: int = DEFAULT_EVAL_SEED,
                      style: str = EVAL_STYLES[0]) -> list[EvalLine]:
    """``n`` labelled lines of ``style``; a ``written`` line ``i`` is built around ``EVAL_KINDS[i % 14]``
    plus random extras, a ``dense`` one is a note (:func:`~care.curate.pii.eval_dense.generate_dense_lines`)."""
    if style not in EVAL_STYLES:
        raise CareError(f"unknown evaluation-set style {style!r}; use one of {', '.join(EVAL_STYLES)}")
    if style == "dense":
        return generate_dense_lines(n, seed=seed)
    r = random.Random(seed)
    lines = []
    for i in range(n):
        line = LineBuilder()
        line.add(r.choice(OPENINGS))
        clauses: list[Callable[[random.Random, LineBuilder], None]] = [SENTENCES[EVAL_KINDS[i % len(EVAL_KINDS)]]]
        clauses += [SENTENCES[r.choice(EVAL_KINDS)] for _ in range(r.choice((0, 0, 1, 2)))]
        clauses += [_keep_clause for _ in range(r.choice((1, 1, 2)))]
        r.shuffle(clauses)
        for j, clause in enumerate(clauses):
            if j:
                line.add(r.choice(CLAUSE_JOINERS))
            clause(r, line)
        line.add(r.choice(("。", "", "？", "，谢谢！", "!")))
        lines.append(line.build())
    return lines
