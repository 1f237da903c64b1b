from ragsweep.core.text import locate, sentences, words


def test_locate_finds_a_passage_whose_white_space_differs_and_maps_back():
    text = "Intro.\n\nBackups are kept\n   for 30 days.  End."
    start, end = locate(text, "Backups are kept for 30 days.")
    assert text[start:end] == "Backups are kept\n   for 30 days."


def test_locate_searches_from_a_position_and_can_demand_uniqueness():
    text = "port 8443. port 8443."
    assert locate(text, "port 8443.", after=1) == (11, 21)
    assert locate(text, "port 8443.", unique=True) is None
    assert locate(text, "port 9000.") is None


def test_words_keep_versions_and_drop_stop_words():
    assert words("What is the max-age of v2.1 in Tidewater?") == ["max-age", "v2.1", "tidewater"]


def test_sentences_split_on_ends_and_list_items():
    assert sentences("One. Two!\n- item\n\nThree") == ["One.", "Two!", "- item", "Three"]


def test_german_words_keep_their_letters_and_fold_case_and_accents():
    assert words("Die maximale Größe beträgt 30 MB") == [
        "die",
        "maximale",
        "grosse",
        "betragt",
        "30",
        "mb",
    ]
    shared = set(words("Die maximale Größe beträgt 30 MB")) & set(words("Größe: 30 MB"))
    assert shared == {"grosse", "30", "mb"}
    assert words("über") == words("UBER") == words("uber") == ["uber"]
    assert words("Straße") == words("STRASSE")


def test_french_accents_fold_and_elisions_split():
    assert words("La durée de rétention est de 30 jours") == words(
        "LA DUREE DE RETENTION EST DE 30 JOURS"
    )
    assert "retention" in words("l'époque de rétention")


def test_chinese_becomes_character_bigrams_and_keeps_numbers_apart():
    assert words("文件大小") == ["文件", "件大", "大小"]
    assert words("是") == ["是"]
    assert words("最大为30 MB") == ["最大", "大为", "30", "mb"]
    assert words("カタカナです") == ["カタ", "タカ", "カナ", "ナで", "です"]


def test_words_of_other_scripts_stay_whole_and_full_width_digits_fold():
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert words("Привет мир") == ["привет", "мир"]
    assert words("３０ＭＢ") == ["30mb"]


def test_sentences_end_at_chinese_and_japanese_full_stops():
    text = "默认端口是8443。管理控制台使用9000端口！为什么？ Done. 終わり。"
    assert sentences(text) == [
        "默认端口是8443。",
        "管理控制台使用9000端口！",
        "为什么？",
        "Done.",
        "終わり。",
    ]


def test_ascii_text_splits_the_same_way_as_any_other_text():
    # ASCII text takes a faster path: one accented letter sends it down the general one
    text = "Error TW-4471 (v2.1_rc): max-age=30s, see docs/faq.md... The END_ of it"
    assert words(text) + ["e"] == words(text + " é")
