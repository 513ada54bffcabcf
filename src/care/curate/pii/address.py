"""Home addresses, read down to the door: province / city / district / town / village, road, number,
compound, building, unit and room (``杭州市西湖区文三路88号院3号楼2单元501室``, ``阳光花园3-2-501``,
``霍邱县城关镇东湖村3组15号``).

An address starts after an anchor word (``住址：``, ``家住``, ``寄到`` ...), at a province name, or
at a token the lexical tagger marks as a place (``LOC``); from there :func:`read_address` takes
address units one after another while they fit. A span needs at least :data:`MIN_ADDRESS_UNITS`
units (a bare ``北京市`` or ``上海市第一人民医院`` is not a home). A span that no anchor word introduces
must also reach below the county (a road, a compound, a house number, a village or a community:
:data:`STREET_UNITS`): a place name that is not part of a person's address stays, as in an
epidemiology list (``湖北省武汉市、江苏省南京市等地均有病例报告``, ``河北、山东、河南、安徽等省多见``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from care.curate.pii.lexical import PLACE, Token
from care.curate.pii.rules import CJK, Span, provinces

ADDRESS_ANCHORS = ("家庭住址", "现住址", "户籍地址", "通讯地址", "收货地址", "联系地址", "住址", "地址", "家住", "住在", "现住",
                   "现居", "居住于", "居住在", "居住地", "户籍地", "家在", "寄到", "寄往", "送到", "搬到")
#: An address needs at least this many units to be reported.
MIN_ADDRESS_UNITS = 2
#: Longest run of characters before a unit word (``内蒙古自治区`` holds 3 + 3).
MAX_PLACE_NAME = 8
#: Characters that do not occur in a place name: a run holding one is ordinary text (``附近头痛``).
NOT_IN_PLACE = frozenset("的了过着是在有与也就让把被给很他她它我你您们这那个些去到向对为以或但而即应需要可能时后说看吃"
                         "痛疼病症药医院诊治疗查住等各均及")
#: Shortest name before a compound word: ``旅居``, ``定居``, ``独居`` are verbs, not compounds.
MIN_COMPOUND_NAME = 2
_NUM = "一二三四五六七八九十"
_ADMIN = "省|自治区|特别行政区|自治州|地区|盟|市|州|区|县|旗|街道|镇|乡|村|屯|社区"
_ROAD = "大道|大街|胡同|路|街|道|巷|弄|里"
_COMPOUND = "小区|花园|家园|新村|公寓|华庭|大厦|广场|公馆|苑|园|庭|城|府|湾|阁|居|寓|中心"
#: One address unit each; tried in order at the current position, repeatedly.
_UNITS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    rf"(?P<run>[{CJK}]{{1,{MAX_PLACE_NAME}}}?)(?:{_ADMIN})",
    rf"(?P<run>[{CJK}0-9]{{1,{MAX_PLACE_NAME}}}?)(?:{_ROAD})(?:[{_NUM}\d]+段)?",
    rf"(?P<run>[{CJK}]{{{MIN_COMPOUND_NAME},{MAX_PLACE_NAME}}}?)(?:{_COMPOUND})(?:[{_NUM}\d]+[区期])?",
    r"\d{1,5}\s?(?:号院|号楼|号|弄|栋|幢|座|单元|层|楼|室|户|组|门|排|期)",
    rf"[A-Za-z{_NUM}]{{1,3}}\s?(?:号楼|座|栋|幢|区|单元|楼|层|门|组)",
    r"附\d{1,4}号",
    r"\d{1,4}-\d{1,3}(?:-\d{1,5})?(?:室|号)?",
))
#: Administrative units below the county that a person's address holds (a village, a community).
_LOCAL_ADMIN = ("村", "屯", "社区", "街道")
#: Indices in :data:`_UNITS` of the units below the county (road, compound, numbers): an address with no
#: anchor word needs one of them, or a :data:`_LOCAL_ADMIN` unit.
STREET_UNITS = frozenset(range(1, len(_UNITS)))
#: A bare room number after a building / unit / floor unit (``15栋3120``, ``3单元1102``).
_ROOM = re.compile(r"\d{2,5}(?![0-9A-Za-z])")
_ROOM_AFTER = ("栋", "幢", "单元", "座", "楼", "层", "号楼", "门")
_ANCHOR_RE = re.compile(r"(?:" + "|".join(sorted(ADDRESS_ANCHORS, key=len, reverse=True)) + r")(?:[:：]\s*|\s)?")


@functools.cache
def _province_re() -> re.Pattern[str]:
    return re.compile("|".join(sorted(provinces(), key=len, reverse=True)))


def _unit_at(text: str, pos: int) -> tuple[int, bool]:
    """End of the address unit starting at ``pos`` (``pos`` when none fits), and whether it lies below the
    county (:data:`STREET_UNITS`, :data:`_LOCAL_ADMIN`)."""
    for index, pattern in enumerate(_UNITS):
        m = pattern.match(text, pos)
        if m and not ("run" in m.groupdict() and set(m.group("run")) & NOT_IN_PLACE):
            return m.end(), index in STREET_UNITS or m.group().endswith(_LOCAL_ADMIN)
    return pos, False


def read_address(text: str, start: int) -> tuple[int, int]:
    """Read address units from ``start``; returns ``(end, units)``."""
    end, units, _ = read_units(text, start)
    return end, units


def read_units(text: str, start: int) -> tuple[int, int, bool]:
    """Read address units from ``start``; returns ``(end, units, below the county)``."""
    pos, units, street = start, 0, False
    province = _province_re().match(text, pos)
    if province:
        pos = province.end()
        suffix = re.match(r"省|市|壮族自治区|回族自治区|维吾尔自治区|自治区|特别行政区", text[pos:])
        pos += suffix.end() if suffix else 0
        units += 1
    while True:
        end, fine = _unit_at(text, pos)
        if end == pos and units and text[:pos].endswith(_ROOM_AFTER):
            room = _ROOM.match(text, pos)
            end, fine = (room.end(), True) if room else (pos, False)
        if end == pos:
            return pos, units, street
        pos, units, street = end, units + 1, street or fine


def find_addresses(text: str, tokens: Sequence[Token] = ()) -> list[Span]:
    """Addresses after an anchor, at a province name or at a place token (see the module docstring)."""
    anchored = {m.end() for m in _ANCHOR_RE.finditer(text)}
    starts = set(anchored)
    starts |= {m.start() for m in _province_re().finditer(text)}
    starts |= {t.start for t in tokens if t.tag == PLACE}
    spans = []
    covered_to = -1
    for start in sorted(starts):
        if start < covered_to:
            continue
        end, units, street = read_units(text, start)
        if units >= MIN_ADDRESS_UNITS and (street or start in anchored):
            spans.append(Span(start, end, "ADDRESS", text[start:end]))
            covered_to = end
    return spans
