"""pipeline("translation") on transformers 5.x: from objects, from a trained folder, and as remote code."""

import json

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, MarianConfig, MarianMTModel, pipeline

import vanilla_transformer
from vanilla_transformer import TranslationPipeline

from .helpers import PAIRS, PROJECT_PACKAGES, ROOT, run_python, tiny_model, word_tokenizer

SOURCES = [source for source, _ in PAIRS]


@pytest.fixture(scope="module")
def translator():
    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer))
    model.generation_config.max_new_tokens = 8
    vanilla_transformer.register_translation_task()
    return pipeline("translation", model=model, tokenizer=tokenizer)


def test_importing_the_package_leaves_transformers_tasks_alone_until_asked(smoke_run, tmp_path):
    """The import registers our model type only; register_translation_task() is the one call that gives transformers
    5.x a "translation" task, after which our folders need no trust_remote_code."""
    folder, _ = smoke_run
    code = f"""
        import transformers.pipelines
        from transformers import pipeline
        import vanilla_transformer
        removed = getattr(transformers.pipelines, "REMOVED_TASKS", None)  # from transformers 5.19
        assert removed is None or "translation" in removed
        assert "translation" not in transformers.pipelines.PIPELINE_REGISTRY.supported_tasks
        try:
            pipeline("translation", model={str(folder)!r})
            raise SystemExit("a folder's pipeline code ran without trust_remote_code")
        except ValueError as error:
            assert "trust_remote_code" in str(error), error
        vanilla_transformer.register_translation_task()
        translator = pipeline("translation", model={str(folder)!r})
        assert type(translator) is vanilla_transformer.TranslationPipeline, type(translator)
        print(translator("a dog runs")[0]["translation_text"])
        """
    result = run_python(code, ROOT, without=(), env={"HF_MODULES_CACHE": str(tmp_path / "modules")})
    assert (
        result.stdout.strip().splitlines()[-1]
        == TranslationPipeline(
            model=AutoModelForSeq2SeqLM.from_pretrained(folder), tokenizer=AutoTokenizer.from_pretrained(folder)
        )("a dog runs")[0]["translation_text"]
    )


def generated_text(translator, sentences: list[str], **generate_kwargs) -> list[str]:
    batch = translator.tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = translator.model.generate(**batch, **generate_kwargs)
    return [text.strip() for text in translator.tokenizer.batch_decode(output, skip_special_tokens=True)]


def test_outputs_have_the_4x_format_and_are_what_generate_gives(translator):
    assert isinstance(translator, TranslationPipeline)
    single = translator(SOURCES[0])
    assert single == [{"translation_text": generated_text(translator, SOURCES[:1])[0]}]
    several = translator(SOURCES[:3])
    assert several == [{"translation_text": text} for text in generated_text(translator, SOURCES[:3])]


def test_batches_give_the_same_translations_as_one_at_a_time(translator):
    assert translator(SOURCES, batch_size=3) == translator(SOURCES, batch_size=1) == translator(SOURCES)


def test_lists_are_translated_in_batches_of_32_by_default(translator):
    batch_sizes = []
    encoder = translator.model.get_encoder()
    hook = encoder.register_forward_pre_hook(
        lambda m, a, k: batch_sizes.append(k["input_ids"].shape[0]), with_kwargs=True
    )
    try:
        translator(SOURCES * 5)  # 40 sentences
    finally:
        hook.remove()
    assert batch_sizes == [32, 8]


def test_a_list_is_translated_in_batches_of_like_length_and_answered_in_its_own_order(translator):
    sentences = [" ".join(SOURCES[i % len(SOURCES)] for i in range(n)) for n in (3, 1, 4, 2, 5, 1)]
    batch_lengths = []
    encoder = translator.model.get_encoder()
    hook = encoder.register_forward_pre_hook(
        lambda m, a, k: batch_lengths.append(k["attention_mask"].sum(1).tolist()), with_kwargs=True
    )
    try:
        together = translator(sentences, batch_size=2)
    finally:
        hook.remove()
    flat = [length for batch in batch_lengths for length in batch]
    assert flat == sorted(flat) and len(flat) == len(sentences)  # shortest sources first
    assert together == [translator(sentence)[0] for sentence in sentences]  # each answer at its sentence's place


def test_a_generator_gives_what_a_list_gives_and_an_empty_list_gives_nothing(translator):
    from_list = translator(SOURCES[:3])
    assert list(translator(source for source in SOURCES[:3])) == from_list
    assert translator([]) == []


def test_generation_arguments_reach_generate(translator):
    beams = translator(SOURCES[:2], num_beams=4, num_return_sequences=2, max_new_tokens=3)
    assert [len(candidates) for candidates in beams] == [2, 2]
    expected = generated_text(translator, SOURCES[:2], num_beams=4, num_return_sequences=2, max_new_tokens=3)
    assert [c["translation_text"] for candidates in beams for c in candidates] == expected
    assert all(len(c["translation_text"].split()) <= 3 for candidates in beams for c in candidates)


def forcing(script: list[int], max_new_tokens: int) -> dict:
    """generate() arguments that make any model write `script` (token ids ending with </s>), one token per step."""
    return dict(
        prefix_allowed_tokens_fn=lambda row, decoded: [script[min(len(decoded), len(script)) - 1]],
        max_new_tokens=max_new_tokens,
    )


def test_token_ids_text_and_clean_up_are_returned_as_4x_returns_them():
    """return_tensors, return_text and clean_up_tokenization_spaces, as transformers 4.x's translation pipeline took
    them; the output is forced to "hund läuft ." so that cleaning up has a space to take."""
    tokenizer = word_tokenizer(["ein hund läuft ."])
    translator = TranslationPipeline(model=tiny_model(vocab_size=len(tokenizer)), tokenizer=tokenizer)
    script = tokenizer("hund läuft .")["input_ids"]  # ends with </s>
    forced = forcing(script, max_new_tokens=6)
    assert translator("ein hund", **forced) == [{"translation_text": "hund läuft ."}]
    assert translator("ein hund", clean_up_tokenization_spaces=True, **forced) == [{"translation_text": "hund läuft."}]
    [ids] = translator("ein hund", return_tensors=True, **forced)
    assert list(ids) == ["translation_token_ids"]
    assert ids["translation_token_ids"].tolist() == [translator.model.config.decoder_start_token_id, *script]
    [both] = translator("ein hund", return_tensors=True, return_text=True, **forced)
    assert both["translation_text"] == "hund läuft ." and torch.equal(
        both["translation_token_ids"], ids["translation_token_ids"]
    )
    with pytest.raises(ValueError, match="return_text=False leaves nothing"):
        translator("ein hund", return_text=False)


def test_a_stop_sequence_ends_the_translation_as_5x_text_generation_ends_it(smoke_run):
    """stop_sequence (4.x's argument) becomes generate()'s stop_strings with the pipeline's tokenizer, as in 5.x's
    text-generation pipeline; stop_strings given directly get the tokenizer too. The trained folder's sentencepiece
    tokenizer writes "ein hund läuft auf dem gras" in subwords, forced here."""
    folder, _ = smoke_run
    translator = TranslationPipeline(
        model=AutoModelForSeq2SeqLM.from_pretrained(folder), tokenizer=AutoTokenizer.from_pretrained(folder)
    )
    script = translator.tokenizer("ein hund läuft auf dem gras")["input_ids"]  # ends with </s>
    forced = forcing(script, max_new_tokens=20)
    assert translator("a dog", **forced) == [{"translation_text": "ein hund läuft auf dem gras"}]
    assert translator("a dog", stop_sequence="läuft", **forced) == [{"translation_text": "ein hund läuft"}]
    assert translator("a dog", stop_strings=["dem"], num_beams=2, **forced) == [
        {"translation_text": "ein hund läuft auf dem"}
    ]


def test_return_text_false_is_refused_only_where_nothing_asks_for_the_token_ids():
    """return_tensors=True given when the pipeline was made, return_text=False when it is called: the token ids."""
    tokenizer = word_tokenizer(["ein hund läuft ."])
    model = tiny_model(vocab_size=len(tokenizer))
    ids_only = TranslationPipeline(model=model, tokenizer=tokenizer, return_tensors=True)
    [record] = ids_only("ein hund", return_text=False, max_new_tokens=3)
    assert list(record) == ["translation_token_ids"]
    with pytest.raises(ValueError, match="return_text=False leaves nothing"):
        TranslationPipeline(model=model, tokenizer=tokenizer, return_text=False)


def test_4x_language_tasks_translate_in_the_models_languages_and_refuse_others(smoke_run, translator):
    """pipeline("translation_en_to_de"), 4.x's way of naming the languages (5.x's registry no longer reads it), after
    register_translation_task() (the translator fixture's): the model's own languages translate as "translation"
    does, other languages (from the task, src_lang or tgt_lang) are refused naming the model's; a Marian model, whose
    tokenizer may name a group of languages, takes any."""
    folder = str(smoke_run[0])
    expected = pipeline("translation", model=folder)("a dog runs")
    assert pipeline("translation_en_to_de", model=folder)("a dog runs") == expected
    assert pipeline("translation_en-GB_to_de-DE", model=folder)("a dog runs") == expected
    with pytest.raises(ValueError, match=r"de -> en asked for, but .* translates en -> de"):
        pipeline("translation_de_to_en", model=folder)
    with pytest.raises(ValueError, match=r"-> fr asked for, but .* translates en -> de"):
        pipeline("translation", model=folder)("a dog runs", tgt_lang="fr")
    tokenizer = translator.tokenizer
    small = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=16, decoder_ffn_dim=16)
    marian = MarianMTModel(
        MarianConfig(vocab_size=len(tokenizer), pad_token_id=0, eos_token_id=3, decoder_start_token_id=0, **small)
    )
    assert len(pipeline("translation_en_to_fr", model=marian, tokenizer=tokenizer)("a dog", max_new_tokens=2)) == 1


def test_an_empty_string_gives_an_empty_translation(translator):
    assert translator(["", SOURCES[0], "  "], batch_size=2) == [
        {"translation_text": ""},
        translator(SOURCES[0])[0],
        {"translation_text": ""},
    ]


def test_a_tokenizer_that_is_not_the_models_is_refused(smoke_run):
    """Another vocabulary of the model's size translates into garbage: training records the tokens in config.json
    (`trained_vocabulary`), and the pipeline compares."""
    model = AutoModelForSeq2SeqLM.from_pretrained(smoke_run[0])
    assert model.config.trained_vocabulary["tokens"] == model.config.vocab_size
    TranslationPipeline(model=model, tokenizer=AutoTokenizer.from_pretrained(smoke_run[0]))
    words = word_tokenizer([f"w{i}" for i in range(model.config.vocab_size - 4)])
    assert len(words) == model.config.vocab_size
    with pytest.raises(ValueError, match="holds other tokens than the 120 the model was trained with"):
        TranslationPipeline(model=model, tokenizer=words)


@pytest.mark.parametrize("bad", [42, None, ["a dog", 3]])
def test_a_non_string_is_a_type_error_naming_the_type(translator, bad):
    with pytest.raises(TypeError, match="not (int|NoneType)"):
        translator(bad)


def test_long_input_translates_and_is_truncated_only_when_asked(translator):
    long_source = " ".join(SOURCES * 40)  # ~200 words, far longer than any training sentence
    assert len(translator(long_source, max_new_tokens=2)) == 1
    seen = []
    encoder = translator.model.get_encoder()
    hook = encoder.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[1]), with_kwargs=True)
    try:
        translator(long_source, truncation=True, max_source_length=16, max_new_tokens=1)
    finally:
        hook.remove()
    assert seen == [16]
    with pytest.raises(ValueError, match="max_source_length"):
        translator(long_source, truncation=True)


def test_a_trained_folder_translates_through_the_pipeline(smoke_run):
    folder, _ = smoke_run
    config = json.loads((folder / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "pipeline_vanilla_transformer.TranslationPipeline"
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    expected = tokenizer.batch_decode(
        model.generate(**tokenizer(["a dog runs"], return_tensors="pt")), skip_special_tokens=True
    )
    from_objects = TranslationPipeline(model=model, tokenizer=tokenizer)
    with_remote_code = pipeline("translation", model=str(folder), trust_remote_code=True)
    for translator in (from_objects, with_remote_code):
        assert translator("a dog runs") == [{"translation_text": expected[0].strip()}]


def test_the_folder_works_where_neither_this_package_nor_sentencepiece_can_be_imported(smoke_run, tmp_path):
    folder, _ = smoke_run
    expected = TranslationPipeline(
        model=AutoModelForSeq2SeqLM.from_pretrained(folder), tokenizer=AutoTokenizer.from_pretrained(folder)
    )(["a dog runs", "two men play football"])
    code = f"""
        import json
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
        folder = {str(folder)!r}
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)  # no prompt about the model code
        assert tokenizer("a dog runs").input_ids[-1] == tokenizer.eos_token_id
        translator = pipeline("translation", model=folder, trust_remote_code=True)
        assert type(translator).__module__.startswith("transformers_modules"), type(translator).__module__
        print(json.dumps(translator(["a dog runs", "two men play football"])))
        # The averaged checkpoints beside it (here the same model: the smoke config ships their average).
        averaged = pipeline("translation", model=folder + "/averaged", trust_remote_code=True)
        print(json.dumps(averaged(["a dog runs", "two men play football"])))
        """
    result = run_python(code, tmp_path, without=(*PROJECT_PACKAGES, "sentencepiece"))
    assert "Do you wish to run the custom code" not in result.stdout + result.stderr
    assert [json.loads(line) for line in result.stdout.strip().splitlines()[-2:]] == [expected, expected]


def test_a_model_loaded_from_a_folder_and_saved_again_keeps_the_pipeline_its_config_names(smoke_run, tmp_path):
    folder, _ = smoke_run
    AutoModelForSeq2SeqLM.from_pretrained(folder).save_pretrained(tmp_path / "resaved")  # this package's classes
    AutoTokenizer.from_pretrained(folder).save_pretrained(tmp_path / "resaved")
    expected = pipeline("translation", model=str(folder), trust_remote_code=True)("a dog runs")
    assert pipeline("translation", model=str(tmp_path / "resaved"), trust_remote_code=True)("a dog runs") == expected
