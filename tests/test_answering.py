from ragsweep.answering import extractive


def test_extractive_answer_picks_the_sentences_that_match_the_question():
    passages = [
        "Tidewater is a sync server. It listens on port 8443 by default.",
        "The admin console uses port 9000. Logs rotate daily.",
    ]
    answer = extractive("Which port does the admin console use?", passages, max_sentences=1)
    assert answer == "The admin console uses port 9000."


def test_extractive_answer_keeps_retrieval_order_and_never_invents_text():
    passages = ["Plans: Basic keeps backups 30 days.", "Pro keeps backups 90 days."]
    answer = extractive("How many days does Pro keep backups?", passages)
    assert answer == "Plans: Basic keeps backups 30 days. Pro keeps backups 90 days."


def test_extractive_answer_of_nothing_retrieved_is_empty():
    assert extractive("Anything?", []) == ""
