"""Medical synonym dictionary: groups of surface forms with the same meaning (correct pairs only).

The first term of each group is canonical. ``query_only`` members are colloquial forms patients
use but doctors' written answers do not (documents never switch to them). A term belongs to
exactly one group (a test checks it).
"""

from __future__ import annotations

from care.demo.content.schema import SynonymGroup

_D, _DRUG, _LAB, _EXAM, _SYM, _PATH = "disease", "drug", "lab", "exam", "symptom", "pathogen"

SYNONYM_GROUPS: tuple[SynonymGroup, ...] = (
    # diseases
    SynonymGroup(("心肌梗死", "心梗", "心肌梗塞"), _D),
    SynonymGroup(("脑梗死", "脑梗", "脑梗塞"), _D),
    SynonymGroup(("脑卒中", "中风", "卒中"), _D),
    SynonymGroup(("高血压", "血压高"), _D, query_only=("血压高",)),
    SynonymGroup(("冠心病", "冠状动脉粥样硬化性心脏病"), _D),
    SynonymGroup(("甲亢", "甲状腺功能亢进", "甲状腺功能亢进症"), _D, query_only=("甲状腺功能亢进症",)),
    SynonymGroup(("甲减", "甲状腺功能减退"), _D),
    SynonymGroup(("乙肝", "乙型肝炎", "乙型病毒性肝炎"), _D, query_only=("乙型病毒性肝炎",)),
    SynonymGroup(("慢阻肺", "慢性阻塞性肺疾病", "COPD"), _D),
    SynonymGroup(("哮喘", "支气管哮喘"), _D),
    SynonymGroup(("心律失常", "心律不齐"), _D, query_only=("心律不齐",)),
    SynonymGroup(("房颤", "心房颤动"), _D),
    SynonymGroup(("早搏", "期前收缩", "过早搏动"), _D),
    SynonymGroup(("脂肪肝", "脂肪性肝病"), _D),
    SynonymGroup(("胃食管反流", "胃食管反流病", "GERD"), _D, query_only=("GERD",)),
    SynonymGroup(("慢性肾病", "慢性肾脏病", "CKD"), _D),
    SynonymGroup(("类风湿关节炎", "类风湿性关节炎"), _D),
    SynonymGroup(("高脂血症", "高血脂", "血脂高"), _D, query_only=("血脂高",)),
    SynonymGroup(("高尿酸血症", "高尿酸", "尿酸高"), _D, query_only=("尿酸高",)),
    # drugs (generic name first; then other generic names or well-known brand names)
    SynonymGroup(("碳酸氢钠", "小苏打"), _DRUG),
    SynonymGroup(("对乙酰氨基酚", "扑热息痛"), _DRUG),
    SynonymGroup(("阿司匹林", "乙酰水杨酸"), _DRUG),
    SynonymGroup(("二甲双胍", "格华止"), _DRUG),
    SynonymGroup(("布洛芬", "芬必得"), _DRUG),
    SynonymGroup(("硝酸甘油", "硝化甘油"), _DRUG),
    SynonymGroup(("奥美拉唑", "洛赛克"), _DRUG),
    SynonymGroup(("左甲状腺素钠", "优甲乐"), _DRUG),
    SynonymGroup(("甲巯咪唑", "他巴唑"), _DRUG),
    SynonymGroup(("丙硫氧嘧啶", "PTU"), _DRUG),
    SynonymGroup(("别嘌醇", "别嘌呤醇"), _DRUG),
    SynonymGroup(("非布司他", "非布索坦"), _DRUG),
    SynonymGroup(("秋水仙碱", "秋水仙素"), _DRUG),
    SynonymGroup(("阿托伐他汀", "立普妥"), _DRUG),
    SynonymGroup(("氯吡格雷", "波立维"), _DRUG),
    SynonymGroup(("硝苯地平", "心痛定"), _DRUG),
    SynonymGroup(("氨氯地平", "络活喜"), _DRUG),
    SynonymGroup(("美托洛尔", "倍他乐克"), _DRUG),
    SynonymGroup(("普萘洛尔", "心得安"), _DRUG),
    SynonymGroup(("华法林", "华法令"), _DRUG),
    SynonymGroup(("沙丁胺醇", "舒喘灵", "万托林"), _DRUG),
    SynonymGroup(("噻托溴铵", "思力华"), _DRUG),
    SynonymGroup(("唑吡坦", "思诺思"), _DRUG),
    SynonymGroup(("舒马普坦", "舒马曲坦"), _DRUG),
    SynonymGroup(("恩替卡韦", "博路定"), _DRUG),
    SynonymGroup(("甲氨蝶呤", "氨甲蝶呤", "MTX"), _DRUG),
    SynonymGroup(("阿莫西林", "羟氨苄青霉素"), _DRUG),
    SynonymGroup(("坦索罗辛", "坦洛新"), _DRUG),
    SynonymGroup(("枸橼酸钾", "柠檬酸钾"), _DRUG),
    SynonymGroup(("多糖铁复合物", "力蜚能"), _DRUG),
    SynonymGroup(("维生素C", "抗坏血酸"), _DRUG),
    # laboratory values
    SynonymGroup(("糖化血红蛋白", "HbA1c"), _LAB),
    SynonymGroup(("血红蛋白", "血色素"), _LAB, query_only=("血色素",)),
    SynonymGroup(("谷丙转氨酶", "丙氨酸氨基转移酶", "ALT"), _LAB),
    SynonymGroup(("肌酐", "肌酸酐"), _LAB),
    SynonymGroup(("血沉", "红细胞沉降率"), _LAB),
    SynonymGroup(("低密度脂蛋白胆固醇", "LDL-C", "坏胆固醇"), _LAB, query_only=("坏胆固醇",)),
    SynonymGroup(("血氧饱和度", "血氧"), _LAB),
    SynonymGroup(("乙肝五项", "乙肝两对半"), _LAB),
    # examinations
    SynonymGroup(("心电图", "ECG"), _EXAM),
    SynonymGroup(("动态心电图", "Holter"), _EXAM),
    SynonymGroup(("核磁共振", "磁共振", "MRI"), _EXAM),
    SynonymGroup(("冠脉造影", "冠状动脉造影"), _EXAM),
    SynonymGroup(("胸片", "胸部X线片"), _EXAM),
    SynonymGroup(("彩超", "彩色多普勒超声"), _EXAM),
    # pathogens
    SynonymGroup(("幽门螺杆菌", "幽门螺旋杆菌", "Hp"), _PATH),
    SynonymGroup(("乙肝病毒", "乙型肝炎病毒", "HBV"), _PATH, query_only=("HBV",)),
    # symptoms
    SynonymGroup(("心悸", "心慌"), _SYM),
    SynonymGroup(("烧心", "胃灼热"), _SYM),
    SynonymGroup(("水肿", "浮肿"), _SYM),
    SynonymGroup(("发热", "发烧"), _SYM, query_only=("发烧",)),
    SynonymGroup(("乏力", "没力气"), _SYM, query_only=("没力气",)),
    SynonymGroup(("呼吸困难", "喘不上气"), _SYM, query_only=("喘不上气",)),
    SynonymGroup(("胸痛", "胸口痛"), _SYM, query_only=("胸口痛",)),
    SynonymGroup(("血尿", "尿血"), _SYM, query_only=("尿血",)),
    SynonymGroup(("咳痰", "吐痰"), _SYM, query_only=("吐痰",)),
)

#: Phrases left exactly as written: fixed terms that contain a dictionary term but would read
#: wrongly if the inner term were switched (``偏头痛`` is not ``偏`` + ``头痛``).
PROTECTED_PHRASES: tuple[str, ...] = (
    "继发性高血压",
    "原发性高血压",
    "白大衣高血压",
    "咳嗽变异性哮喘",
    "甲亢性心脏病",
    "卒中中心",
    "中风120",
    "抗心律失常",
    "血尿酸",
)
