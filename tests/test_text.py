from ragsweep.text import locate, sentences, words


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
