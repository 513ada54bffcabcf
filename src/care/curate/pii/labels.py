"""Identifiers announced by a label: ``身份证 110105 19491231 0021``, ``卡号6222-0202-0000-0007``,
``病案号：BA-2023-00123``, ``QQ 123456``, ``微信：zhang_wei88``.

A label word followed by an identifier-shaped token means the token is removed, whatever its
checksum or grouping: a resident ID with a wrong check digit or a card number that fails Luhn is
still somebody's number. The label decides the type; the token must fit the type's shape
(:data:`SHAPES`: how many characters, digits only or not), so ``卡号后四位`` or ``电话里说`` is left
alone. Only the token is replaced; the label stays (``身份证[ID]``).

Also here: WeChat ids that name themselves (``wxid_...``) without a label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from care.curate.pii.rules import Span

#: Label words by the type of identifier they announce. Longer labels win over their prefixes
#: (``就诊卡号`` is a record number, not a bank ``卡号``).
LABELS: dict[str, tuple[str, ...]] = {
    "ID": ("身份证号码", "身份证号", "身份证", "居民身份证", "公民身份号码", "身份号码", "证件号码", "证件号", "ID card", "ID No"),
    "BANK_CARD": ("银行卡号", "银行卡", "卡号", "储蓄卡", "信用卡", "借记卡", "银行账号", "银行帐号", "账号", "帐号", "工行卡",
                  "建行卡", "农行卡", "中行卡", "交行卡", "招行卡", "开户账号", "收款账号"),
    "PHONE": ("电话号码", "电话", "手机号码", "手机号", "手机", "座机", "联系方式", "致电", "拨打", "热线", "传真", "Tel", "Phone",
              "Mobile", "电联"),
    "MRN": ("住院病历号", "门诊病历号", "住院病案号", "病历号", "住院号", "门诊号", "病案号", "就诊号", "就诊卡号", "就诊卡", "诊疗卡号",
            "诊疗卡", "登记号", "检查号", "影像号", "病理号", "医保卡号", "医保卡", "医保号", "医保编号", "社保卡号", "社保卡", "社保号",
            "健康卡号", "健康卡", "档案号", "ID号", "患者ID", "病人ID", "就诊ID", "MRN"),
    "PASSPORT": ("护照号码", "护照号", "护照", "Passport No", "Passport", "港澳通行证", "通行证号码", "通行证", "台胞证", "回乡证"),
    "QQ": ("QQ号码", "QQ号", "QQ", "扣扣号", "扣扣", "Q号"),
    "WECHAT": ("微信号", "微信账号", "微信", "WeChat", "VX", "V信", "wx", "加V", "薇信", "威信", "weixin"),
}


@dataclass(frozen=True)
class Shape:
    """What the token after a label must look like, counted on its letters and digits only."""

    min_len: int
    max_len: int
    digits_only: bool = False
    min_digits: int = 0


#: 15/18-character resident IDs; 12-19 digit cards; 7-15 digit phones (with +86); record numbers
#: of 4-24 characters with at least 3 digits; passports of 7-10 characters (letters + 6-8 digits);
#: QQ numbers of 5-11 digits; WeChat ids of 5-25 characters (letters, digits, ``_``, ``-``).
SHAPES: dict[str, Shape] = {
    "ID": Shape(15, 18, min_digits=14), "BANK_CARD": Shape(12, 19, digits_only=True),
    "PHONE": Shape(7, 15, digits_only=True), "MRN": Shape(4, 24, min_digits=3),
    "PASSPORT": Shape(7, 10, min_digits=6), "QQ": Shape(5, 11, digits_only=True), "WECHAT": Shape(5, 25),
}

_LATIN = re.compile(r"[A-Za-z]")
#: After the label: ``号码`` / ``号`` filler, ``是`` / ``为``, a colon, ``No.``, spaces -- in any sensible mix.
_CONNECTOR = r"(?:号码|号|码)?\s*(?:No\.?|#)?\s*(?:是|为)?\s*[:：]?\s*"
#: A numeric identifier: optional +86 / (area) prefix, up to five letters, then digits and letters
#: grouped by hyphens, slashes, dots or single spaces (a spaced group must be 2+ characters and not
#: a number with a unit: ``12345 3天`` stops before ``3``), and an optional extension (``转123``).
_NUMBER = (
    r"(?:\+?86[-\s]?)?(?:[(（]\d{2,4}[)）]\s?)?[A-Za-z]{0,5}[-_]?\d[0-9A-Za-z]*"
    r"(?:[-–—_/.][0-9A-Za-z]+|\s[0-9A-Za-z]{2,}(?![0-9A-Za-z]|[年月日时分岁天周次个元号]))*(?:转\d{1,5})?"
)
_WECHAT_VALUE = r"[A-Za-z][-_A-Za-z0-9]{3,24}|\d{5,12}"
_SELF_NAMED_WECHAT_RE = re.compile(r"(?<![A-Za-z0-9])wxid_[A-Za-z0-9_-]{6,30}(?![A-Za-z0-9])")


def _alternation(labels: tuple[str, ...]) -> str:
    parts = []
    for label in sorted(labels, key=len, reverse=True):
        escaped = re.escape(label)
        parts.append(f"(?i:(?<![A-Za-z]){escaped})" if _LATIN.search(label) else escaped)
    return "|".join(parts)


def _label_re() -> re.Pattern[str]:
    groups = []
    for pii_type, labels in LABELS.items():
        value = _WECHAT_VALUE if pii_type == "WECHAT" else _NUMBER
        groups.append(f"(?P<{pii_type}>{_alternation(labels)}){_CONNECTOR}(?P<{pii_type}_value>{value})(?![0-9A-Za-z_])")
    return re.compile("|".join(groups))


_LABEL_RE = _label_re()


def fits(pii_type: str, value: str) -> bool:
    """True when ``value`` has the shape of ``pii_type`` (letters and digits counted, separators ignored)."""
    shape = SHAPES[pii_type]
    core = re.sub(r"转\d+$", "", value)
    chars = re.sub(r"[^0-9A-Za-z]", "", core)
    digits = sum(c.isdigit() for c in chars)
    if core.startswith(("+86", "86")) and pii_type == "PHONE":
        digits -= 2
        chars = chars[2:]
    return (shape.min_len <= len(chars) <= shape.max_len and digits >= shape.min_digits
            and (not shape.digits_only or chars.isdigit()))


def find_labelled(text: str) -> list[Span]:
    """Identifiers after a label word (see :data:`LABELS`), typed by the label; and ``wxid_`` ids."""
    spans = []
    pos = 0
    while True:
        m = _LABEL_RE.search(text, pos)
        if m is None:
            break
        pii_type = next(t for t in LABELS if m.group(t) is not None)
        value = m.group(f"{pii_type}_value")
        if fits(pii_type, value):
            start = m.start(f"{pii_type}_value")
            spans.append(Span(start, start + len(value), pii_type, value))
            pos = m.end()
        else:  # not this label's shape: look for another label inside what was read (卡号 ... 电话 ...)
            pos = m.end(pii_type)
    spans += [Span(m.start(), m.end(), "WECHAT", m.group()) for m in _SELF_NAMED_WECHAT_RE.finditer(text)]
    return spans
