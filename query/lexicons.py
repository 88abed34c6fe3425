"""Word lists and patterns the query heuristics read, in English and Chinese: data tuned together,
kept apart from the logic that uses them.
"""

from __future__ import annotations

import re

from core.keyword import ENGLISH_STOP_WORDS
from core.text import CJK_CHAR

# --- word lists --------------------------------------------------------------------------------------------

WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
AUXILIARIES = frozenset(
    """is are was were do does did has have had can could will would should may might shall must""".split()
)
IMPERATIVES = frozenset(
    """list name explain describe tell give show compare summarize summarise find define identify state
    outline contrast enumerate""".split()
)
COPULAS = frozenset({"is", "are", "was", "were"})
PREPOSITIONS = frozenset({"in", "on", "at", "for", "from", "by", "to", "of"})
#: Nouns that name a role relative to another entity: "the director of X" needs X first (a bridge).
RELATIONAL_NOUNS = frozenset(
    """director creator founder author writer composer producer owner star singer member wife husband son
    daughter father mother brother sister parent child children spouse partner companion successor predecessor
    headquarters capital leader president ceo chairman manager coach captain designer developer publisher
    distributor host presenter inventor architect editor narrator protagonist sequel prequel adaptation
    birthplace hometown label team league company network studio band album actor actress player artist
    frontman vocalist drummer guitarist bassist nephew niece uncle aunt grandson granddaughter cousin teammate
    mentor teacher student rival ally subsidiary affiliate operator manufacturer maker builder sponsor venue
    residence namesake variant version remake successor winner runner-up""".split()
)
#: Relational nouns that just name the answer in "What is the name of X": no second entity.
NAMING_NOUNS = frozenset({"name", "title", "names", "titles", "term", "word", "kind", "type"})
#: Question openings whose copula makes the described noun the answer itself ("Who is the man who ...").
DEFINING_OPENERS = frozenset({"who", "what", "which"})
#: Words before the head noun up to which a relative clause still defines the answer ("What is the X that").
DEFINING_MAX_INDEX = 4
COMPARATIVES = frozenset(
    """older younger earlier later first last larger largest bigger smaller more less fewer longer shorter
    higher lower taller newer newest oldest better worse faster slower closer further farther greater most
    least heavier lighter wider deeper earliest latest before after bigger""".split()
)
COMPARISON_WORDS = re.compile(
    r"\b(both|same|in common|share|similar|similarity|differ|difference|different|either|neither|compare|"
    r"compared|versus|vs\.?|alike)\b",
    re.IGNORECASE,
)
RELATIVE_PRONOUN = re.compile(
    r"\b([A-Za-z'’\-]+)(,?)\s+(?:(for|with|in|of|by|on|at|from|to|under|during|about|through|into)\s+)?"
    r"(who|whom|whose|which|that|where)\s+([\w'’]+)",
    re.IGNORECASE,
)
#: Function words that cannot head a relative clause ("so that", "such that", "than that").
NON_RELATIVE_HEADS = frozenset(
    """so such than now as if and or but not because since while though although is was are were be been do
    does did has have had can could will would should may might must in of at by for with on from to about
    into""".split()
)
#: Verbs after which "that" introduces a complement ("studies show that ..."), unless a determiner precedes.
THAT_VERBS = frozenset(
    """say says said know knew known think thought believe believed mean means show shows showed suggest
    suggests suggested claim claims claimed argue argues argued report reports reported find finds found note
    notes noted prove proves proved hope hopes true fact likely possible clear evidence""".split()
)
DETERMINERS = frozenset(
    {"the", "a", "an", "this", "that", "these", "those", "its", "his", "her", "their", "our", "my"}
)
PARTICIPLE_PHRASE = re.compile(r"\b([A-Za-z'’\-]+)\s+([a-z]+)\s+(by|after|in|from|on|with|for|as|at)\b")
#: Irregular past participles (regular ones end in -ed).
IRREGULAR_PARTICIPLES = frozenset(
    """born made set sung written held led run built known found shot sold won given taken seen told bought
    brought taught put cut played drawn driven chosen shown grown thrown worn sworn begun spoken stolen hidden
    broken frozen risen fallen ridden eaten beaten forgotten kept left lost meant paid sent spent struck
    hung laid""".split()
)
NOT_PARTICIPLES = frozenset(
    {"red", "bed", "need", "speed", "seed", "hundred", "indeed", "sacred", "naked", "wicked", "feed"}
)
SUPERLATIVE_DESCRIPTION = re.compile(
    r"\b(the|[A-Za-z]['’]s)\s+(?:[a-z\-]+\s+)?(most|least|best|worst|first|second|third|fourth|fifth|last|"
    r"[a-z]{3,}est|\d+(?:st|nd|rd|th))\s+[a-z]",
    re.IGNORECASE,
)
POSSESSIVE = re.compile(r"\b([A-Z][\w.\-]*)['’]s\s+([\w\-]+)")
PASSIVE_HELPERS = frozenset(
    {"was", "were", "is", "are", "been", "be", "being", "get", "got", "has", "have", "had"}
)
QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]|(?<![A-Za-z])'([^']{2,60})'(?![A-Za-z])")
GREETINGS = re.compile(
    r"^((hi|hello|hey|hiya|yo|greetings)( there)?|good (morning|afternoon|evening|night)|"
    r"(thanks|thank you|thx|ty)( (so|very) much| a lot| again)?|cheers|bye|goodbye|see you|ok(ay)?|"
    r"cool|great|nice|how are you( doing)?|"
    r"what'?s up|who are you|what are you|nice to meet you)[\s!.?,]*$",
    re.IGNORECASE,
)
CJK_GREETINGS = re.compile(
    r"^(你好|您好|嗨|哈喽|早上好|晚上好|下午好|谢谢|多谢|感谢|再见|拜拜|你是谁|你好吗)(你|您|啦|了)?[呀啊哦吧！!。.？?～~\s]*$"
)
ARITHMETIC = re.compile(r"^[\d\s.+\-*/×÷^()%=]+$")
ARITHMETIC_PREFIX = re.compile(
    r"^(what is|what's|calculate|compute|how much is|计算|算一下)\s*", re.IGNORECASE
)
DETAIL_CUES = re.compile(
    r"\b(how(?! (many|much|old|long|far|tall|big|often|large|high|few))|details?|detailed|explain|"
    r"step by step|step-by-step|in depth|in-depth|elaborate|walk me through|describe)\b|"
    r"详细|如何|怎么|怎样|具体|步骤|原理",
    re.IGNORECASE,
)
AGGREGATION_CUES = re.compile(
    r"\b(list (all|every|the)|all (the|of the)|every|summar(y|ize|ise)|overview|enumerate|"
    r"how many .* in total|"
    r"total number|in total)\b|列出|列举|总结|概括|汇总|所有|全部|统计|一共|总共",
    re.IGNORECASE,
)
REASONING_CUES = re.compile(
    r"^(why|how (does|did|can|could|would|is|are)(?! (i|we|you)\b))\b|"
    r"\b(why|cause[sd]?|effect of|impact of|affect|reason|"
    r"implication|consequence|trade-?offs?|analy[sz]e)\b|为什么|为何|原因|影响|导致|原理|分析",
    re.IGNORECASE,
)
OPEN_CUES = re.compile(
    r"\b(what do you think|your opinion|opinions?|ideas?|suggest(ion)?s?|recommend|brainstorm|pros and cons|"
    r"should i|advice|thoughts on|best way)\b|怎么看|看法|建议|推荐|有什么想法|意见",
    re.IGNORECASE,
)
FOLLOW_UP_PRONOUNS = frozenset(
    """it its it's they them their theirs these those he him his she her hers former latter""".split()
)
#: "What about X?", "And X?": the previous question asked about another entity.
SWITCH_ENTITY = re.compile(r"^(?:and\s+)?(?:what|how)\s+about\s+(.+?)[?.!\s]*$|^and\s+(.+?)[?.!\s]*$", re.I)
FOLLOW_UP_OPENERS = re.compile(
    r"^(and|also|what about|how about|and what|why not|then|so|but|what else)\b", re.IGNORECASE
)
CJK_FOLLOW_UP_PRONOUN = re.compile(r"它|(?<!其)他|她|这个|那个|这些|那些|这位|那位|上述|前者|后者")
CJK_FOLLOW_UP = re.compile(CJK_FOLLOW_UP_PRONOUN.pattern + r"|^那|^还有|^那么|呢[？?]?$")
#: "那X呢？", "X怎么样？": the previous question asked about another entity.
CJK_SWITCH = re.compile(r"^(?:那么|那|还有)?(.{1,20}?)(?:呢|怎么样|如何)[？?]*$")
MONTHS_AND_DAYS = frozenset(
    """january february march april may june july august september october november december monday tuesday
    wednesday thursday friday saturday sunday""".split()
)
#: Capitalised words that are sentence furniture, not names.
COMMON_CAPITALISED = (
    ENGLISH_STOP_WORDS
    | WH_WORDS
    | AUXILIARIES
    | IMPERATIVES
    | MONTHS_AND_DAYS
    | frozenset("""i in on at after before during while although however also yes no""".split())
)
#: Where a run of capitalised words ends: a sentence end or punctuation inside a sentence (not a sentence
#: splitter: core.text.split_sentences is the one).
PHRASE_BREAK = re.compile(r"(?<=[a-z][a-z][.!?])\s+|[;:,()\[\]\"“”]")
NAME_CONNECTORS = frozenset(
    {"of", "the", "de", "la", "le", "von", "van", "da", "del", "du", "di", "&", "y", "des"}
)

# --- Chinese cues -------------------------------------------------------------------------------------------

#: The one CJK detector (core.text), under the name the query modules import.
CJK = CJK_CHAR
CJK_TITLE = re.compile(r"[《「『“\"]([^》」』”\"]{1,40})[》」』”\"]")
CJK_COMPARISON = re.compile(
    r"((?<!是)还是(?!一)(?=.*(哪|谁|更))|哪个更|哪一个更|谁更|哪位更|哪家更|哪部更|更早|更晚|更大|更小|更多|更少|更高|更长|较早|较晚|"
    r"是否都|都是|都在|都属于|是否相同|相同吗|一样吗|是否一样|有何异同|异同|有什么区别|区别是什么|对比|相比)"
)
CJK_JOIN = re.compile(r"[和与跟及、]")
#: "the person who directed 《X》": a verb phrase modifying a role noun describes a second entity (bridge).
CJK_BRIDGE = re.compile(
    r"(执导|导演了|主演|出演|扮演|饰演|演唱|创作|创办|创立|创建|建立|发明|发现|编写|撰写|作曲|设计|出版|发行|"
    r"主持|收购|拥有|获得|效力于|毕业于|出生于|位于)[^，。？?！!、]{1,20}的(那位|那个|那部|人|导演|演员|歌手|"
    r"作者|作家|公司|球队|俱乐部|国家|城市|电影|歌曲|乐队|创始人|主人|父亲|母亲|妻子|丈夫|儿子|女儿)"
    r"[^，。？?！!]{0,20}(哪|谁|什么|几|多少)"
)
#: "《X》的导演出生于哪里": a relational noun of an entity, then a question about that entity (not "是谁").
CJK_RELATIONAL = re.compile(
    r"的(父亲|母亲|妻子|丈夫|儿子|女儿|哥哥|弟弟|姐姐|妹妹|创始人|创办人|导演|作者|主演|歌手|首都|总部|老板)"
    r"(的|(?!是|叫|为|有)[^，。？?]{0,6}(出生|毕业|来自|担任|获得|去世|就读))"
)
CJK_QUESTION_WORDS = re.compile(
    r"(为什么|为何|怎么样|怎么|怎样|如何|什么样的|什么|哪一年|哪一个|哪一位|哪些|哪个|哪里|哪儿|哪位|哪家|哪|谁|"
    r"几|多少|多久|多长|是否|吗|呢|吧)"
)
CJK_PUNCT = re.compile(r"[，。？！?!、；：:,;（）()\s]+")

#: Function characters trimmed from the ends of Chinese content pieces ("阿里巴巴是" -> "阿里巴巴").
CJK_FUNCTION_CHARS = "是的了在由有和与及被把将对从为于也都就还"

# --- referents of follow-up questions (query/referents.py) ------------------------------------------------

#: Pronouns that point at a person, at a thing, at a group, or at a place of the previous turn.
PERSON_PRONOUNS = frozenset({"he", "him", "his", "she", "her", "hers"})
THING_PRONOUNS = frozenset({"it", "its", "it's", "this", "that"})
GROUP_PRONOUNS = frozenset({"they", "them", "their", "theirs"})
PLACE_PRONOUNS = frozenset({"there"})
#: Words after which "there" is existential ("is there a museum?"), not a place.
EXISTENTIAL_NEIGHBOURS = frozenset({"is", "are", "was", "were", "be", "been", "being", "isn't", "aren't"})
#: Head nouns of a definite noun phrase ("the mountain") that can stand for an entity named before, each
#: with the words a name of that kind contains ("Mount Tessel", "Lake Wendle", "Halden Tower").
HEAD_NOUN_NAME_WORDS: dict[str, frozenset[str]] = {
    "mountain": frozenset({"mount", "mt", "mountain", "peak", "hill", "fell"}),
    "peak": frozenset({"mount", "mt", "mountain", "peak"}),
    "hill": frozenset({"hill", "mount", "fell", "down"}),
    "lake": frozenset({"lake", "loch", "lough", "mere", "pond", "reservoir"}),
    "river": frozenset({"river", "creek", "stream", "brook"}),
    "sea": frozenset({"sea", "ocean", "gulf", "bay"}),
    "bay": frozenset({"bay", "gulf", "cove"}),
    "island": frozenset({"island", "isle", "islands", "isles", "key"}),
    "cape": frozenset({"cape", "point", "head", "headland", "ness"}),
    "headland": frozenset({"cape", "point", "head", "headland", "ness"}),
    "valley": frozenset({"valley", "vale", "glen", "dale"}),
    "city": frozenset({"city"}),
    "town": frozenset({"town", "borough"}),
    "village": frozenset({"village"}),
    "country": frozenset({"republic", "kingdom", "federation", "empire", "state"}),
    "province": frozenset({"province"}),
    "region": frozenset({"region", "district", "province", "county"}),
    "building": frozenset(
        {"tower", "hall", "house", "building", "palace", "castle", "church", "cathedral", "museum", "station"}
    ),
    "tower": frozenset({"tower"}),
    "bridge": frozenset({"bridge", "viaduct"}),
    "castle": frozenset({"castle", "fort", "fortress", "palace"}),
    "church": frozenset({"church", "cathedral", "chapel", "abbey", "minster"}),
    "museum": frozenset({"museum", "gallery"}),
    "school": frozenset({"school", "academy", "college", "conservatory", "institute"}),
    "university": frozenset({"university", "college", "institute"}),
    "company": frozenset(
        {"company", "co", "corporation", "corp", "inc", "ltd", "group", "industries", "labs", "works"}
    ),
    "firm": frozenset({"company", "co", "corporation", "corp", "inc", "ltd", "group", "partners"}),
    "band": frozenset({"band", "orchestra", "ensemble", "quartet", "trio"}),
    "team": frozenset({"rovers", "united", "city", "athletic", "club", "fc", "wanderers", "rangers"}),
    "club": frozenset({"club", "fc", "society"}),
    "ship": frozenset({"hms", "ss", "rms", "uss"}),
    "railway": frozenset({"railway", "railroad", "line"}),
    "street": frozenset({"street", "road", "avenue", "lane", "boulevard"}),
    "observatory": frozenset({"observatory"}),
    "monastery": frozenset({"monastery", "abbey", "priory"}),
    "prize": frozenset({"prize", "award", "medal", "cup", "trophy"}),
    "award": frozenset({"prize", "award", "medal", "trophy"}),
    "festival": frozenset({"festival", "fair", "games"}),
    "treaty": frozenset({"treaty", "accord", "pact", "convention"}),
    "war": frozenset({"war", "battle", "campaign", "revolt", "rebellion"}),
    "battle": frozenset({"battle", "siege"}),
}
#: Head nouns that stand for a person named before ("the author", "the architect").
PERSON_HEAD_NOUNS = frozenset(
    """person man woman author writer novelist poet founder director designer architect painter artist
    sculptor composer singer musician actor actress player coach captain scientist chemist physicist
    engineer inventor explorer king queen duke duchess prince princess emperor president mayor leader
    owner chef doctor teacher photographer""".split()
)
#: Other head nouns a definite phrase may point back with ("the film", "this disease", "that instrument").
THING_HEAD_NOUNS = frozenset(
    """film movie book novel album song painting play poem opera series instrument disease drug plant
    animal species mineral planet moon star language building place state capital event expedition
    game competition tournament cup mission product camera car engine device software""".split()
)
#: Determiners that open a phrase pointing back ("the same city", "that year").
ANAPHORIC_DETERMINERS = frozenset({"the", "this", "that", "these", "those"})
#: Modifiers allowed between the determiner and the head ("the same city", "that very year").
ANAPHORIC_MODIFIERS = frozenset({"same", "very", "above", "aforementioned", "said"})
#: Heads of a phrase that points at the year of the previous answer.
YEAR_HEADS = frozenset({"year", "time"})
#: "the first one", "the second", "the last one": one item of a list in the previous answer.
ORDINALS: dict[str, int] = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "last": -1}
ORDINAL_REFERENCE = re.compile(
    r"\bthe\s+(first|second|third|fourth|fifth|last)(?:\s+one\b|(?=\s*(?:[?.!,;]|$)))", re.I
)
#: Words of a name that mark a place or an organisation rather than a person.
NON_PERSON_NAME_WORDS = frozenset(
    {word for words in HEAD_NOUN_NAME_WORDS.values() for word in words}
    | frozenset(
        """the observatory university school museum company bank press records studios airlines motors
        systems foods technologies electronics theatre cinema hospital library park garden square
        county province republic kingdom island city town village lighthouse railway cup prize award
        games festival cycle trilogy series""".split()
    )
)
#: A 4-digit year (what "that year" refers to).
YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d)")
#: Items of a list answer ("Ilon and Carrow", "A, B or C", "甲和乙").
LIST_SEPARATORS = re.compile(r"\s*(?:,|;|\band\b|\bor\b|、|和|与|及)\s*")
#: Leading words of a short answer that are not part of the entity ("on Mount Callow", "the Tern").
SHORT_ANSWER_LEAD = re.compile(r"^(?:(?:on|in|at|by|from|to|of|the|a|an)\s+)+", re.I)

# Chinese referents
CJK_PERSON_PRONOUN = re.compile(r"(?<!其)[他她](?!们)")
CJK_THING_PRONOUN = re.compile(r"它(?!们)")
#: 这/那/该/此 + optional 一 and classifier + head noun: "这条河", "该省", "这个乐队", "那一年".
CJK_DEMONSTRATIVE = re.compile(
    r"(?:这|那|(?<!应)该|此)(?:一)?(?:个|位|条|座|家|部|本|所|首|支|只|件|种|名|张|幅|间|片|项|场|届)?"
    r"([\u4e00-\u9fff]{1,2})"
)
#: Head character of a Chinese demonstrative phrase that means "that year" ("那一年", "那年").
CJK_YEAR_HEAD = "年"
#: Chinese heads that stand for a person ("这位作家" -> the person answered before).
CJK_PERSON_HEADS = frozenset("人 作家 作者 导演 歌手 演员 画家 诗人 科学 主唱 老师 创始 先生 女士".split())
#: "哪条河", "哪个省", "哪位作家": the kind of thing the previous question asked for.
CJK_WH_TARGET = re.compile(
    r"哪(?:一)?(?:个|位|条|座|家|部|本|所|首|支|只|件|种|名|张|幅|间|片|项|场|届)?([\u4e00-\u9fff]{1,2})"
)
#: Characters that end a Chinese head noun taken from a question ("省的" -> "省").
CJK_HEAD_STOP = "的是有在成位于为了吗呢么哪什多几"
