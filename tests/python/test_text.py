"""attnscope.text: the tokenizer's encode options against Hugging Face's ids.

The reference ids (tests/text/fixtures/reference_ids.json) were computed with the npm package `tokenizers`, the Rust
library of Hugging Face through its Node binding, for real tokenizer.json files (Phi-3-mini, RoBERTa-base) and variants
of them (tokenizer_variants.json: Llama-2's BOS template, RoBERTa with a TemplateProcessing, ...), in all four modes
of parse_special_tokens x add_special_tokens. The C++ tests check the same file (tests/text/test_real_tokenizers.cpp);
these check that the Python binding passes both options through.
"""
import copy
import json
import pathlib

import pytest

import attnscope

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "text" / "fixtures"


def _load_json(name):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _variant_tokenizer_json(variant):
    """The tokenizer.json of one entry of tokenizer_variants.json: its base file with 'set' (top-level or dotted
    keys replaced) and 'append_added_tokens' applied, as make_reference_ids.mjs does."""
    document = _load_json(variant["base"])
    for key, value in variant.get("set", {}).items():
        *parents, last = key.split(".")
        node = document
        for parent in parents:
            node = node[parent]
        node[last] = copy.deepcopy(value)
    document["added_tokens"] = document["added_tokens"] + variant.get("append_added_tokens", [])
    return document


@pytest.fixture(scope="module")
def reference_tokenizers(tmp_path_factory):
    """(name, tokenizer, reference result) for every tokenizer of the reference file."""
    variants = _load_json("tokenizer_variants.json")["tokenizers"]
    results = _load_json("reference_ids.json")["results"]
    assert len(variants) == len(results)
    folder = tmp_path_factory.mktemp("tokenizers")
    loaded = []
    for variant, result in zip(variants, results):
        assert result["tokenizer"] == variant["name"]
        path = folder / f"{variant['name']}.tokenizer.json"
        path.write_text(json.dumps(_variant_tokenizer_json(variant), ensure_ascii=False), encoding="utf-8")
        loaded.append((variant["name"], attnscope.text.ByteLevelBpeTokenizer.from_tokenizer_json(str(path)), result))
    return loaded


def test_encode_options_give_hugging_face_ids_in_all_four_modes(reference_tokenizers):
    compared = 0
    for name, tokenizer, result in reference_tokenizers:
        for edge in result["edge_cases"]:
            for mode in edge["modes"]:
                ids = tokenizer.encode(edge["text"], parse_special_tokens=mode["parse_special_tokens"],
                                       add_special_tokens=mode["add_special_tokens"])
                assert ids == mode["ids"], (name, edge["name"], mode["parse_special_tokens"],
                                            mode["add_special_tokens"])
                compared += 1
    assert compared == sum(len(e["modes"]) for _, _, r in reference_tokenizers for e in r["edge_cases"])
    assert compared >= 400


def test_add_special_tokens_puts_the_post_processor_ids_around_the_text(reference_tokenizers):
    by_name = {name: tokenizer for name, tokenizer, _ in reference_tokenizers}
    # Llama-2's template adds BOS <s> = 1 before the text, RoBERTa's processor <s> = 0 before and </s> = 2 after;
    # Phi-3-mini's tokenizer.json adds nothing.
    assert by_name["llama2"].added_prefix_ids() == [1] and by_name["llama2"].added_suffix_ids() == []
    assert by_name["roberta_base"].added_prefix_ids() == [0] and by_name["roberta_base"].added_suffix_ids() == [2]
    assert by_name["phi3_mini"].added_prefix_ids() == [] and by_name["phi3_mini"].added_suffix_ids() == []
    texts = ["", "Hello world", " leading space", "<s> written </s>", "Пьер\tи\r\nАндрей", "数字 12345 🙂"]
    for name, tokenizer, _ in reference_tokenizers:
        prefix, suffix = tokenizer.added_prefix_ids(), tokenizer.added_suffix_ids()
        for text in texts:
            for parse in (False, True):
                plain = tokenizer.encode(text, parse_special_tokens=parse)
                assert plain == tokenizer.encode(text, parse, False)
                assert tokenizer.encode(text, parse_special_tokens=parse, add_special_tokens=True) == \
                    prefix + plain + suffix, (name, text, parse)


def test_sentencepiece_model_with_bos():
    # Llama-2's tokenizer.model: its converter adds BOS <s> = 1, as tokenizer_config.json's add_bos_token.
    tokenizer = attnscope.text.ByteLevelBpeTokenizer.from_sentencepiece_model(
        str(FIXTURES / "real" / "llama2.tokenizer.model"))
    assert tokenizer.vocab_size() == 32000
    llama2 = next(r for r in _load_json("reference_ids.json")["results"] if r["tokenizer"] == "llama2")
    edge = next(e for e in llama2["edge_cases"] if e["name"] == "russian")
    assert tokenizer.encode(edge["text"]) == edge["modes"][0]["ids"]
    assert tokenizer.encode(edge["text"], add_special_tokens=True) == [1] + edge["modes"][0]["ids"]
    assert tokenizer.decode(edge["modes"][0]["ids"]) == edge["decoded"]


def test_encode_rejects_a_non_boolean_option():
    tokenizer = attnscope.text.ByteLevelBpeTokenizer.from_tokenizer_json(
        str(FIXTURES / "real" / "roberta_base.tokenizer.json"))
    with pytest.raises(TypeError):
        tokenizer.encode("text", add_special_tokens="yes")
