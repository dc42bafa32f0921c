"""`pipeline("translation")` for transformers 5.x, which removed its own (and its text2text parent); it also runs
on 4.57, where model folders that carry it load it instead of the built-in one.

Outputs as in transformers 4.x: one string gives `[{"translation_text": ...}]`, a list of strings gives one such
dict per string (a list of lists with `num_return_sequences` > 1). Generation settings (`num_beams`,
`max_new_tokens`, ...) go to `generate()`; without them, the model's saved generation config applies.

A model trained on lowercased, Moses-tokenized text gets its sources lowercased and tokenized first (see
`text_preparation`); it writes such text too.

This file imports only torch, transformers and the input checks beside it (and sacremoses for such a model):
`TranslationPipeline(...).save_pretrained(folder)` copies them into the folder and names it under `custom_pipelines`
in `config.json`, so that `pipeline("translation", model=folder, trust_remote_code=True)` works where this package is
not installed.
"""

from collections.abc import Callable, Iterable, Sequence

import torch
from transformers import AutoModelForSeq2SeqLM, Pipeline, PreTrainedModel, PreTrainedTokenizerBase

from .input_checks import check_tokenizer

DEFAULT_BATCH_SIZE = 32

# training.train's `--preprocess lowercase_tokenized` (the text of the Multi30K literature): such a model reads
# lowercased, Moses-tokenized sentences. Its tokenizer's configuration says so (`text_preprocessing`, `source_lang`,
# `target_lang`, written by training), and what hands a user's sentence to the model prepares it the same way.
LOWERCASE_TOKENIZED = "lowercase_tokenized"


# ISO 639-2 and 639-3 codes (Tatoeba's and manythings.org's: eng, cmn, deu) as ISO 639-1, the codes sacremoses and
# sacreBLEU know, for the languages whose scripts training tells apart (training/languages.py); Mandarin, Cantonese and
# Wu as Chinese, whose characters they share. Listed, not looked up: the `langcodes` package knows every language, a
# dependency for some forty codes.
# fmt: off
LONG_CODES = {
    "cmn": "zh", "zho": "zh", "chi": "zh", "yue": "zh", "wuu": "zh", "jpn": "ja", "kor": "ko",
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it", "por": "pt",
    "nld": "nl", "dut": "nl", "swe": "sv", "dan": "da", "nor": "no", "nob": "nb", "fin": "fi", "est": "et",
    "ces": "cs", "cze": "cs", "slk": "sk", "slo": "sk", "pol": "pl", "ron": "ro", "rum": "ro", "hun": "hu",
    "tur": "tr", "ind": "id", "msa": "ms", "may": "ms", "zsm": "ms", "vie": "vi",
    "rus": "ru", "ukr": "uk", "bel": "be", "bul": "bg", "mkd": "mk", "mac": "mk", "kaz": "kk",
    "ell": "el", "gre": "el", "ara": "ar", "fas": "fa", "per": "fa", "pes": "fa", "urd": "ur", "heb": "he",
    "hin": "hi", "mar": "mr", "nep": "ne", "npi": "ne", "tha": "th",
}
# fmt: on


def language_subtag(code: str) -> str:
    """A language code's first part, lowercased: "fr-FR" and "zh_Hans" as "fr" and "zh"."""
    return code.lower().replace("_", "-").split("-")[0]


def primary_language(code: str) -> str:
    """`code`'s language, lowercased, without region or script ("zh-CN" and "zh_Hans" as "zh"), as its two-letter
    code where LONG_CODES knows a longer one ("cmn" and "eng" as "zh" and "en")."""
    language = language_subtag(code)
    return LONG_CODES.get(language, language)


def task_languages(task: str) -> tuple[str | None, str | None]:
    """4.x's "translation_XX_to_YY" task -> (XX, YY), by 4.x's rule; any other task names no languages."""
    parts = task.split("_")
    if len(parts) == 4 and parts[0] == "translation" and parts[2] == "to":
        return parts[1], parts[3]
    return None, None


def check_languages(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: str | None, target: str | None
) -> None:
    """Languages asked for (`src_lang`/`tgt_lang`, or the task's) that are not the ones this package's model was
    trained on (its tokenizer's `source_lang`/`target_lang`, written by training) are refused: such a model writes its
    own target language whatever it is asked. Other models' tokenizers may name a group ("ROMANCE"), so they pass."""
    if model.config.model_type != "vanilla_transformer":
        return
    trained = (tokenizer.init_kwargs.get("source_lang"), tokenizer.init_kwargs.get("target_lang"))
    for asked, known in zip((source, target), trained, strict=True):
        if asked and known and primary_language(asked) != primary_language(known):
            raise ValueError(
                f"Translation {source or '?'} -> {target or '?'} asked for, but {model.name_or_path or 'the model'} "
                f"translates {trained[0]} -> {trained[1]} (its tokenizer's source_lang and target_lang)."
            )


def lowercase_tokenizer(lang: str) -> Callable[[str], str]:
    """Text -> lowercased, Moses-tokenized text (sacremoses, without escaping): A man's dog. -> a man 's dog ."""
    try:  # imported here: only such models need it, and transformers does not install it
        from sacremoses import MosesTokenizer
    except ImportError:
        raise ImportError("This model reads lowercased, Moses-tokenized text: pip install sacremoses") from None
    # sacremoses knows a language by its two-letter code alone: handed "fr-FR" or "fra", it splits French as English.
    moses = MosesTokenizer(lang=primary_language(lang))

    def tokenize(text: str) -> str:
        return moses.tokenize(text.lower(), return_str=True, escape=False)

    return tokenize


def text_preparation(tokenizer: PreTrainedTokenizerBase, side: str = "source") -> Callable[[str], str]:
    """What training did to each sentence of `side` ("source" or "target") before the vocabulary saw it, as the
    tokenizer's configuration records it: lowercasing and Moses tokenization for a model trained on such text, nothing
    otherwise. A natural sentence handed as it is to such a model comes out as nonsense ("A man in an orange hat" ->
    "ein unschließiger mann mit einem orangefarbenen hut")."""
    preprocessing = tokenizer.init_kwargs.get("text_preprocessing", "none")
    if preprocessing == "none":
        return lambda text: text
    if preprocessing == LOWERCASE_TOKENIZED:
        return lowercase_tokenizer(tokenizer.init_kwargs.get(f"{side}_lang", "en"))
    raise ValueError(
        f"The tokenizer's configuration asks for text_preprocessing={preprocessing!r}, which this code does not know "
        f"(it knows none and {LOWERCASE_TOKENIZED}): update the package, or the folder's copy of this file."
    )


def source_token_count(tokenizer: PreTrainedTokenizerBase) -> Callable[[str], int]:
    """Sentence -> the number of tokens the model reads for it (after `text_preparation`): what batches of like
    length are grouped by."""
    prepare = text_preparation(tokenizer)
    return lambda text: len(tokenizer(prepare(text))["input_ids"])


def reads_nothing(tokenizer: PreTrainedTokenizerBase, input_ids: Sequence[int]) -> bool:
    """Whether a source gives the model no token but its end: a line of spaces, or only of characters that the
    vocabulary's normalisation drops (U+200B, U+FEFF, U+007F, ...). The one rule for an empty line: it translates to
    "" in both of vt-translate's engines and in the pipeline (a model asked to translate nothing invents a sentence)."""
    markers = {tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id}
    return all(token in markers for token in input_ids)


def check_batch_size(batch_size: object) -> None:
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"batch_size={batch_size!r}: must be a whole number of at least 1.")


def shortest_first(lengths: Sequence[int]) -> list[int]:
    """Positions by length, shortest first (ties in their order). A batch decodes until its longest translation ends,
    so batches of like length finish sooner: what the pipeline, vt-translate and training's evaluations order by."""
    return sorted(range(len(lengths)), key=lengths.__getitem__)


class TranslationPipeline(Pipeline):
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True
    _pipeline_calls_generate = True

    def __init__(self, *args, **kwargs):
        # Pipeline's default, one sentence at a time, keeps every matrix product tiny: 1,000 Multi30K sentences took
        # 815 s that way and 61 s in batches of 32 on 2 CPU cores. `batch_size=` at creation or call overrides it.
        if kwargs.get("batch_size") is None:
            kwargs["batch_size"] = DEFAULT_BATCH_SIZE
        check_batch_size(kwargs["batch_size"])
        super().__init__(*args, **kwargs)
        check_tokenizer(self.model.config, self.tokenizer, self.model.name_or_path or "the model")
        self.prepare_source = text_preparation(self.tokenizer)
        self.source_tokens = source_token_count(self.tokenizer)

    def _sanitize_parameters(
        self,
        truncation: bool | None = None,
        max_source_length: int | None = None,
        return_tensors: bool | None = None,
        return_text: bool | None = None,
        clean_up_tokenization_spaces: bool | None = None,
        stop_sequence: str | list[str] | None = None,
        **generate,
    ):
        preprocess = {}
        if truncation is not None:
            preprocess["truncation"] = truncation
        if max_source_length is not None:
            preprocess["max_source_length"] = max_source_length
        given = dict(
            return_tensors=return_tensors,
            return_text=return_text,
            clean_up_tokenization_spaces=clean_up_tokenization_spaces,
        )
        postprocess = {name: value for name, value in given.items() if value is not None}
        # At __init__ there is nothing set yet; at a call, what __init__ set still applies where the call is silent.
        settled = {**getattr(self, "_postprocess_params", {}), **postprocess}
        if settled.get("return_text") is False and not settled.get("return_tensors"):
            raise ValueError("return_text=False leaves nothing to return: add return_tensors=True for the token ids.")
        # 4.x's languages: given, else the task's ("translation_en_to_de"); checked, not passed to generate().
        languages = generate.pop("src_lang", None), generate.pop("tgt_lang", None)
        if languages == (None, None):
            languages = task_languages(self.task)
        check_languages(self.model, self.tokenizer, *languages)
        if stop_sequence is not None:  # as 5.x's text-generation pipeline maps it
            generate["stop_strings"] = [stop_sequence] if isinstance(stop_sequence, str) else stop_sequence
        if "stop_strings" in generate:  # generate() needs the tokenizer to find them in the tokens
            generate["tokenizer"] = self.tokenizer
        return preprocess, generate, postprocess

    def __call__(self, inputs: str | list[str] | Iterable[str], **kwargs):
        """Translate a string, a list of strings or an iterable of strings (then the results come as a generator);
        kwargs: `batch_size`, `truncation`, `max_source_length`, 4.x's `return_tensors`, `return_text`,
        `clean_up_tokenization_spaces` and `stop_sequence`, and any generate() argument (`num_beams`,
        `max_new_tokens`, `do_sample`, `num_return_sequences`, ...).

        A list is translated shortest source first and answered in its own order: a batch decodes until its longest
        translation ends, so batches of like length finish sooner."""
        check_batch_size(kwargs.get("batch_size"))
        if isinstance(inputs, list):
            batch_size = kwargs.get("batch_size") or self._batch_size or 1
            order = self.shortest_first(inputs) if len(inputs) > batch_size else range(len(inputs))  # one batch: as is
            translated = super().__call__([inputs[i] for i in order], **kwargs) if inputs else []
            results = [None] * len(inputs)
            for position, result in zip(order, translated, strict=True):
                results[position] = result
            if all(len(result) == 1 for result in results):
                return [result[0] for result in results]  # one translation per string: a flat list, as in 4.x
            return results
        results = super().__call__(inputs, **kwargs)
        if not isinstance(inputs, str):  # a generator or dataset: the same shape per item as for a list
            return (result[0] if len(result) == 1 else result for result in results)
        return results

    def shortest_first(self, texts: list) -> list[int]:
        """Positions of `texts`, by the number of tokens the model reads (what is not a string: first, for
        preprocess to name it)."""
        return shortest_first([self.source_tokens(text) if isinstance(text, str) else -1 for text in texts])

    def preprocess(self, text: str, truncation: bool = False, max_source_length: int | None = None) -> dict:
        if not isinstance(text, str):
            raise TypeError(f"The translation pipeline translates strings, not {type(text).__name__}: {text!r}")
        if truncation:
            max_source_length = max_source_length or self.tokenizer.model_max_length
            if max_source_length > 1_000_000:  # the tokenizer's "no limit" default
                raise ValueError("truncation=True needs a length: pass max_source_length=N (source tokens).")
        source = self.prepare_source(text)
        inputs = self.tokenizer(source, truncation=truncation, max_length=max_source_length, return_tensors="pt")
        # An empty source translates to "" (marked here, honoured in postprocess); batching keeps its shape (1,).
        inputs["is_empty"] = torch.tensor([reads_nothing(self.tokenizer, inputs["input_ids"][0].tolist())])
        return inputs

    def _forward(self, model_inputs: dict, **generate_kwargs) -> dict:
        is_empty = model_inputs.pop("is_empty")
        if hasattr(self, "_prepare_generate_kwargs"):  # transformers 5.x: the arguments given at init, and defaults
            generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        # (4.x: generate() falls back on the model's own generation config, as in a direct call.)
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)  # (B * sequences, L)
        batch_size = model_inputs["input_ids"].shape[0]
        return {"output_ids": output_ids.reshape(batch_size, -1, output_ids.shape[-1]), "is_empty": is_empty}

    def postprocess(
        self,
        model_outputs: dict,
        return_tensors: bool = False,
        return_text: bool | None = None,
        clean_up_tokenization_spaces: bool | None = None,
    ) -> list[dict]:
        """4.x's records: the text, or with return_tensors=True the token ids (and the text too if return_text=True)."""
        sequences = model_outputs["output_ids"][0]  # (sequences, L)
        records = [{"translation_token_ids": ids} if return_tensors else {} for ids in sequences]
        wants_text = (not return_tensors) if return_text is None else return_text
        if not wants_text:
            return records
        if bool(model_outputs["is_empty"][0]):
            texts = [""] * len(sequences)
        else:
            texts = self.tokenizer.batch_decode(
                sequences, skip_special_tokens=True, clean_up_tokenization_spaces=clean_up_tokenization_spaces
            )
        return [{**record, "translation_text": text.strip()} for record, text in zip(records, texts, strict=True)]


# What PIPELINE_REGISTRY.register_pipeline would record, set on the class alone (the registry stays untouched):
# Pipeline.save_pretrained reads it to copy this file into the folder and name it in config.json.
TranslationPipeline._registered_impl = {
    "translation": {"impl": TranslationPipeline, "pt": (AutoModelForSeq2SeqLM,), "type": "text"}
}
