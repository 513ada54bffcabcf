"""Vocabulary pruning of a saved (trained) tower: keep the token rows that its texts use.

multilingual-e5-small spends 96 M of its 1-layer query tower's 98 M parameters on XLM-R's 250 k-piece table; a
deployment over one corpus touches a few percent of those rows. :func:`prune_vocabulary` cuts a model folder —
a CARE folder (its query route, the document route untouched), a sentence-transformers folder or a Hugging Face
folder — to the pieces that the tokenizer produces for given texts (each alone and after each prompt the model
prepends: its stored prompts and ``prefixes``), the single-character pieces of every character of the texts, plus
every special / added token:

* ``tokenizer.json`` is rewritten with the kept pieces renumbered in their original order: Unigram (SentencePiece:
  XLM-R, e5) keeps each piece's score, WordPiece (BERT) its tokens; the added tokens, the post-processor's
  special-token ids, ``unk_id``, ``tokenizer_config.json``'s ``added_tokens_decoder`` and a slow ``vocab.txt``
  follow the new ids (a SentencePiece ``.model`` file, which cannot be cut, is dropped: the fast tokenizer is the one
  that loads);
* the input embedding matrix keeps the kept rows (``config.vocab_size`` and the config's token ids follow); every
  other tensor and file is copied as it is. The folder is written atomically (temporary sibling, then renamed).

What the given texts get: the same pieces as before (renumbered), so the same vectors. Unigram decodes with
Viterbi (the best-scoring segmentation over the vocabulary): every piece of each text's best segmentation is kept,
and removing other pieces only removes competing segmentations. WordPiece takes the longest known prefix: the piece
it took is still kept and nothing longer was added. What other texts get (queries the texts did not contain): a
Unigram text is re-segmented into the kept pieces (often shorter ones, down to single characters: every character
of the texts keeps its single-character piece where the vocabulary has one); a character no kept piece covers —
one the texts never had — becomes ``<unk>`` (one ``<unk>`` per run of such characters). A WordPiece word that the
kept pieces cannot spell becomes ``[UNK]`` as a whole. Either way every text encodes; give the texts the model will meet
(the corpus, the training and validation queries) so that the cut costs little
(``benchmarks/results/frontier/vocab_pruning_trained_demo.md``).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from care.errors import CareError

logger = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
#: The slow BERT vocabulary (one token a line, in id order), rewritten with the kept tokens.
SLOW_VOCAB_FILE = "vocab.txt"
#: Slow SentencePiece files a fast ``tokenizer.json`` supersedes: they cannot be cut, so they are dropped.
SENTENCEPIECE_FILES = ("sentencepiece.bpe.model", "spiece.model", "sentencepiece.model", "tokenizer.model")
#: Weight files the pruned model replaces (``save_pretrained`` writes ``model.safetensors``).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
#: Config fields holding token ids.
CONFIG_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id", "unk_token_id",
                    "mask_token_id", "decoder_start_token_id")
#: The tokenizer models this module can cut.
SUPPORTED_MODELS = ("Unigram", "WordPiece")
#: What the pruned folder records about the cut (in the cut module's folder).
RECORD_FILE = "care_vocab_prune.json"
#: SentencePiece's word-boundary marker and WordPiece's continuation prefix (single-character pieces' forms).
METASPACE, WORDPIECE_CONTINUATION = "\u2581", "##"
#: Texts tokenised per batch while collecting the used pieces.
ENCODE_BATCH = 4096
#: Texts re-tokenised after the cut to check that they give the same pieces as before.
CHECK_TEXTS = 200


@dataclass
class VocabPruneResult:
    """What :func:`prune_vocabulary` did.

    Attributes:
        output: the written folder; module: the folder cut inside it (``""``: the folder itself,
            ``query_0_Transformer``: a CARE folder's query route).
        vocab_before / vocab_after: embedding rows before and after.
        parameters_before / parameters_after: the cut module's parameters.
        weights_bytes_before / weights_bytes_after: bytes of its weight files (fp32 safetensors).
        texts / prompts: how many texts (and prompts they were also read after) chose the vocabulary.
    """

    output: Path
    module: str
    vocab_before: int
    vocab_after: int
    parameters_before: int
    parameters_after: int
    weights_bytes_before: int
    weights_bytes_after: int
    texts: int
    prompts: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "output": str(self.output)}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CareError(f"{path}: cannot read it as JSON ({exc})") from None


def transformer_module(folder: str | Path, route: str = "query") -> str:
    """The sub-folder of ``folder`` holding its Hugging Face model and tokenizer: a Router's (CARE) ``route``'s
    Transformer module, else the first Transformer module of a sentence-transformers folder, else ``""`` (a Hugging
    Face folder).

    Raises:
        CareError: no model found (the message names the folder).
    """
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        modules = _read_json(modules_file)
        router = next((m for m in modules if m.get("type", "").endswith("Router")), None)
        if router is not None:
            config = _read_json(folder / router.get("path", "") / "router_config.json")
            names = config.get("structure", {}).get(route)
            if not names:
                raise CareError(f"{folder}: its Router has no {route!r} route (routes: {sorted(config.get('structure', {}))})")
            found = next((n for n in names if config["types"].get(n, "").endswith(".Transformer")), None)
            if found is not None:
                return str(Path(router.get("path", "")) / found) if router.get("path") else found
        else:
            found = next((m.get("path", "") for m in modules if m.get("type", "").endswith(".Transformer")), None)
            if found is not None:
                return found
        raise CareError(f"{folder}: no Transformer module in modules.json; nothing holds a token table to cut")
    if (folder / "config.json").is_file():
        return ""
    raise CareError(f"{folder} holds no model (neither modules.json nor config.json); pass a CARE, "
                    "sentence-transformers or Hugging Face model folder")


def stored_prompts(folder: str | Path) -> list[str]:
    """The distinct non-empty prompts a sentence-transformers folder prepends (``config_sentence_transformers.json``)."""
    file = Path(folder) / "config_sentence_transformers.json"
    prompts = (_read_json(file).get("prompts") or {}) if file.is_file() else {}
    return sorted({p for p in prompts.values() if p})


def used_token_ids(tokenizer, texts: Sequence[str], prefixes: Iterable[str] = ()) -> set[int]:
    """Ids of every piece a ``tokenizers.Tokenizer`` produces for ``texts``, each alone and after each of
    ``prefixes`` (whole texts: every piece, past any model length — a truncation stored in the tokenizer is
    ignored; no special tokens)."""
    if tokenizer.truncation is not None or tokenizer.padding is not None:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(tokenizer.to_str())
        tokenizer.no_truncation()
        tokenizer.no_padding()
    used: set[int] = set()
    for prefix in dict.fromkeys(("", *prefixes)):
        for start in range(0, len(texts), ENCODE_BATCH):
            batch = [prefix + t for t in texts[start:start + ENCODE_BATCH]]
            for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
                used.update(encoding.ids)
    return used


def character_token_ids(tokenizer, texts: Sequence[str]) -> set[int]:
    """Ids of the single-character pieces (``c``, ``▁c`` of SentencePiece, ``##c`` of WordPiece) of every character
    of ``texts`` (normalised as the tokenizer normalises), where the vocabulary has them: kept, they let a new text
    spell a seen character that the texts only ever used inside longer pieces, instead of ``<unk>``."""
    normalizer = tokenizer.normalizer
    characters = {c for text in texts for c in (normalizer.normalize_str(text) if normalizer else text)}
    forms = ("{}", METASPACE + "{}", WORDPIECE_CONTINUATION + "{}")
    ids = (tokenizer.token_to_id(form.format(c)) for c in characters for form in forms)
    return {i for i in ids if i is not None}


def _special_ids(data: dict[str, Any]) -> set[int]:
    """Ids of the added tokens, the post-processor's special tokens, Unigram's ``unk_id`` and its lowest-scoring
    piece (Unigram scores an unknown character at the lowest score minus a constant: keeping that piece keeps the
    penalty, so segmentations through ``<unk>`` weigh as before)."""
    ids = {token["id"] for token in data.get("added_tokens") or []}
    ids.update(_processor_ids(data.get("post_processor")))
    model = data["model"]
    if model["type"] == "Unigram" and model["vocab"]:
        ids.add(min(range(len(model["vocab"])), key=lambda i: model["vocab"][i][1]))
    if model.get("unk_id") is not None:
        ids.add(model["unk_id"])
    if model["type"] == "WordPiece" and model.get("unk_token") in model["vocab"]:
        ids.add(model["vocab"][model["unk_token"]])
    return ids


def _processor_ids(node: Any, remap: dict[int, int] | None = None) -> set[int]:
    """The token ids a post-processor names (TemplateProcessing, Bert / Roberta processing, Sequence); with
    ``remap``, rewritten in place."""
    ids: set[int] = set()
    if not isinstance(node, dict):
        return ids
    kind = node.get("type")
    if kind == "Sequence":
        for child in node.get("processors", []):
            ids |= _processor_ids(child, remap)
    elif kind == "TemplateProcessing":
        for token in node.get("special_tokens", {}).values():
            ids.update(token["ids"])
            if remap is not None:
                token["ids"] = [remap[i] for i in token["ids"]]
    elif kind in ("BertProcessing", "RobertaProcessing"):
        for key in ("sep", "cls"):
            ids.add(node[key][1])
            if remap is not None:
                node[key][1] = remap[node[key][1]]
    return ids


def prune_tokenizer_json(data: dict[str, Any], keep: Sequence[int], source: str = TOKENIZER_FILE) -> dict[str, Any]:
    """``tokenizer.json``'s content with only the pieces ``keep`` (old ids, ascending), renumbered 0..n-1.

    Raises:
        CareError: a tokenizer model other than :data:`SUPPORTED_MODELS` (naming ``source``).
    """
    model = data["model"]
    remap = {old: new for new, old in enumerate(keep)}
    out = json.loads(json.dumps(data))
    if model["type"] == "Unigram":
        out["model"]["vocab"] = [model["vocab"][i] for i in keep]
        if model.get("unk_id") is not None:
            out["model"]["unk_id"] = remap[model["unk_id"]]
    elif model["type"] == "WordPiece":
        by_id = {i: token for token, i in model["vocab"].items()}
        out["model"]["vocab"] = {by_id[old]: new for new, old in enumerate(keep)}
    else:
        raise CareError(f"{source}: a {model['type']} tokenizer cannot be cut here; supported: Unigram "
                        "(SentencePiece: XLM-R, e5) and WordPiece (BERT)")
    for token in out.get("added_tokens") or []:
        token["id"] = remap[token["id"]]
    _processor_ids(out.get("post_processor"), remap)
    return out


def _vocab_size(data: dict[str, Any]) -> int:
    return len(data["model"]["vocab"])


def _weights_bytes(folder: Path) -> int:
    return sum((folder / name).stat().st_size for name in WEIGHT_FILES if (folder / name).is_file())


def _rewrite_tokenizer_files(module: Path, data: dict[str, Any], keep: list[int]) -> None:
    """The pruned ``tokenizer.json`` and the files that name token ids, in ``module`` (a copy being written)."""
    remap = {old: new for new, old in enumerate(keep)}
    pruned = prune_tokenizer_json(data, keep, str(module / TOKENIZER_FILE))
    (module / TOKENIZER_FILE).write_text(json.dumps(pruned, ensure_ascii=False), encoding="utf-8")
    config_file = module / TOKENIZER_CONFIG
    if config_file.is_file():
        config = _read_json(config_file)
        if isinstance(config.get("added_tokens_decoder"), dict):
            config["added_tokens_decoder"] = {str(remap[int(k)]): v for k, v in config["added_tokens_decoder"].items()}
            config_file.write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")
    if (module / SLOW_VOCAB_FILE).is_file() and pruned["model"]["type"] == "WordPiece":
        tokens = sorted(pruned["model"]["vocab"], key=pruned["model"]["vocab"].get)
        (module / SLOW_VOCAB_FILE).write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    for name in SENTENCEPIECE_FILES:
        if (module / name).is_file():
            logger.info("dropping %s: a SentencePiece model cannot be cut; %s is the tokenizer now", name, TOKENIZER_FILE)
            (module / name).unlink()


def _prune_embeddings(module: Path, keep: list[int], trust_remote_code: bool) -> tuple[int, int]:
    """Load the Hugging Face model in ``module``, keep the embedding rows ``keep``, save it back there:
    ``(parameters before, after)``."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(module), trust_remote_code=trust_remote_code)
    before = sum(p.numel() for p in model.parameters())
    table = model.get_input_embeddings()
    if keep[-1] >= table.num_embeddings:
        raise CareError(f"{module}: the tokenizer has piece id {keep[-1]} but the model only "
                        f"{table.num_embeddings} embedding rows; the folder's tokenizer does not belong to its model")
    remap = {old: new for new, old in enumerate(keep)}
    padding = remap.get(table.padding_idx) if table.padding_idx is not None else None
    cut = torch.nn.Embedding(len(keep), table.embedding_dim, padding_idx=padding)
    with torch.no_grad():
        cut.weight.copy_(table.weight[torch.tensor(keep)])
    model.set_input_embeddings(cut)
    model.config.vocab_size = len(keep)
    for key in CONFIG_TOKEN_IDS:
        value = getattr(model.config, key, None)
        if isinstance(value, int):
            setattr(model.config, key, remap[value])
    for name in WEIGHT_FILES:
        (module / name).unlink(missing_ok=True)
    model.save_pretrained(str(module))
    return before, sum(p.numel() for p in model.parameters())


def _config_token_ids(module: Path) -> set[int]:
    config = _read_json(module / "config.json")
    return {config[k] for k in CONFIG_TOKEN_IDS if isinstance(config.get(k), int)}


def prune_vocabulary(source: str | Path, texts: Sequence[str], output: str | Path, *, prefixes: Iterable[str] = (),
                     route: str = "query", trust_remote_code: bool = False) -> VocabPruneResult:
    """Write ``source`` with its (``route``'s) token table cut to the pieces ``texts`` use (module docstring).

    Args:
        source: a CARE folder (its ``route`` is cut), a sentence-transformers folder or a Hugging Face folder, with
            a fast ``tokenizer.json``.
        texts: every text the cut model must encode as the full one does (a corpus, training and validation texts).
        output: the folder to write (atomically; may be ``source`` itself, replaced once complete).
        prefixes: texts also read after these prefixes (besides the folder's stored prompts), e.g. ``"query: "``.
        route: the Router's route to cut in a CARE folder.
        trust_remote_code: for checkpoints with their own modelling code.
    Returns:
        :class:`VocabPruneResult` (sizes before / after).
    Raises:
        CareError: no texts, no model or no ``tokenizer.json`` in ``source``, an unsupported tokenizer model, an
            ``output`` inside ``source``, or a cut that would change the pieces of a given text (a bug, never
            expected).
    """
    from tokenizers import Tokenizer

    from care.models.folders import atomic_dir

    source, texts = Path(source), list(texts)
    if not texts:
        raise CareError("no texts to choose the vocabulary from: give files with at least one text")
    name = transformer_module(source, route)
    module = source / name
    if not (module / TOKENIZER_FILE).is_file():
        raise CareError(f"{module}: no {TOKENIZER_FILE}; only fast tokenizers can be cut (save the tokenizer with "
                        "a recent transformers to write one)")
    data = _read_json(module / TOKENIZER_FILE)
    if data["model"]["type"] not in SUPPORTED_MODELS:
        prune_tokenizer_json(data, [], str(module / TOKENIZER_FILE))  # raises, naming the file
    tokenizer = Tokenizer.from_file(str(module / TOKENIZER_FILE))
    prompts = [*stored_prompts(source), *prefixes]
    keep = sorted(used_token_ids(tokenizer, texts, prompts) | character_token_ids(tokenizer, texts)
                  | _special_ids(data) | _config_token_ids(module))
    vocab_before, weights_before = _vocab_size(data), _weights_bytes(module)
    output = Path(output)
    if output.resolve() != source.resolve() and output.resolve().is_relative_to(source.resolve()):
        raise CareError(f"--output {output} is inside the model folder {source}; write the cut model elsewhere")
    with atomic_dir(output) as tmp:
        shutil.copytree(source, tmp, dirs_exist_ok=True, symlinks=False)
        target = tmp / name
        _rewrite_tokenizer_files(target, data, keep)
        params_before, params_after = _prune_embeddings(target, keep, trust_remote_code)
        _check_same_pieces(tokenizer, Tokenizer.from_file(str(target / TOKENIZER_FILE)), texts[:CHECK_TEXTS])
        result = VocabPruneResult(output, name, vocab_before, len(keep), params_before, params_after, weights_before,
                                  _weights_bytes(target), len(texts), len(set(prompts)))
        record = {k: v for k, v in result.to_dict().items() if k != "output"}
        (target / RECORD_FILE).write_text(json.dumps({"source": str(source), **record}, indent=2), encoding="utf-8")
    logger.info("vocabulary of %s cut from %d to %d pieces on %d texts: %s (%s weights %.1f MB -> %.1f MB)", source,
                vocab_before, len(keep), len(texts), output, name or "model", weights_before / 1e6,
                result.weights_bytes_after / 1e6)
    return result


def _check_same_pieces(before, after, texts: Sequence[str]) -> None:
    """The cut tokenizer gives ``texts`` the pieces the full one gave (the module docstring's guarantee)."""
    for text, old, new in zip(texts, before.encode_batch(list(texts)), after.encode_batch(list(texts)), strict=True):
        if old.tokens != new.tokens:
            raise CareError(f"vocabulary cut changed the pieces of {text[:40]!r}: {old.tokens[:12]} -> "
                            f"{new.tokens[:12]}; please report this")
