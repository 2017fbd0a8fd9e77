"""The command line as a newcomer meets it: the diff says which keys differ, explanations name
tokens, every option has help, validate reports every error, errors blame the real culprit."""
import re
import warnings

import pytest

import tracer
from tui.cli import main, parser


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_diff_says_which_keys_differ_and_why_the_powers_do(capsys):
    code, out, _ = run(capsys, "diff", "by_hand")
    assert code == 0
    assert "keys that differ: scale: sqrt vs floor; softmax_base: e vs 3; stable: true vs false" in out
    exp = next(line for line in out.splitlines() if line.startswith("h0.exp"))
    assert "stable" in exp and "max" in exp


def test_the_diff_with_stable_held_equal_has_no_stable_note(capsys):
    code, out, _ = run(capsys, "diff", "by_hand", "--set", "stable=true")
    assert code == 0 and "stable:" not in out.splitlines()[1]
    assert "subtracts" not in out


def test_ties_are_written_alike_in_the_cli_and_the_tui(capsys):
    from tui.screens.diff import _keys
    code, out, _ = run(capsys, "diff", "by_hand")
    assert "x2: x2 → x1, x2, x4 (tied)" in out
    assert _keys(["x1", "x2", "x3", "x4"], [0, 1, 3]) == "keys x1, x2, x4 (tied)"


def test_diff_of_a_masked_scenario_leaks_no_numpy_warning(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code, _, err = run(capsys, "diff", "gpt_causal")
    assert code == 0 and "RuntimeWarning" not in err


def test_explanations_name_tokens_with_an_index_where_names_repeat(capsys):
    code, out, _ = run(capsys, "show", "by_hand", "--explain", "h0.weights", "1", "0")
    assert out.startswith("h0.weights[key x2, query x1] = 9 ÷ (46/3) = 27/46") and "q1" not in out
    t = tracer.run("bank_river")
    text = t.explain("h0.weights", 3, 0)
    assert text.startswith("h0.weights[query the#3, key the#0]") and "how much the#3 attends to the#0" in text
    assert t.explain("h0.scores", 1, 4).startswith("h0.scores[query bank, key river] = q(bank)·k(river)")


def test_features_are_named_where_the_scenario_names_them(capsys):
    t = tracer.run("bank_river")
    assert t.scenario.features[1] == "finance"
    assert "finance" in t.explain("x", 1, 1)
    code, out, _ = run(capsys, "show", "bank_river", "--step", "x")
    header = next(line for line in out.splitlines() if line.strip().startswith("token\\"))
    assert header.split()[1:3] == ["water", "finance"]


def test_every_option_of_every_verb_has_help():
    p = parser()
    subs = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = [f"{verb} {a.dest}" for verb, sp in subs.choices.items() for a in sp._actions
               if a.dest != "help" and not a.help]
    assert missing == []


def test_help_documents_the_index_base(capsys):
    with pytest.raises(SystemExit):
        main(["show", "--help"])
    assert "counted from 0" in capsys.readouterr().out


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and re.fullmatch(r"attnsim \S+\n", capsys.readouterr().out)


def test_validate_reports_every_error_of_a_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('x = [[1, "a"], [0, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\nk = [[1, nan], [0, 1]]\n'
                   'v = [[1, 0], [0, 1]]\n', encoding="utf-8")
    code, _, err = run(capsys, "validate", str(bad))
    assert code == 2 and "x[0][1]" in err and "weights.k[0][1]" in err and err.count("\n") == 2


def test_validate_warns_of_a_query_the_mask_leaves_no_key(tmp_path, capsys):
    f = tmp_path / "m.toml"
    f.write_text("x = [[1, 0], [0, 1]]\nmask = [[0, 0], [1, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\n"
                 "k = [[1, 0], [0, 1]]\nv = [[1, 0], [0, 1]]\n", encoding="utf-8")
    code, out, err = run(capsys, "validate", str(f))
    assert code == 0 and out.strip().endswith(": ok") and "warning" in err and "every key is masked" in err


def test_a_bad_preset_flag_is_blamed_not_the_file(capsys):
    code, _, err = run(capsys, "diff", "by_hand", "--a", "foo")
    assert code == 2 and err.startswith("attnsim: error: --a: ") and "by_hand.toml" not in err


def test_output_into_a_folder_says_folder(tmp_path, capsys):
    code, _, err = run(capsys, "export", "by_hand", "-o", str(tmp_path))
    assert code == 2 and "is a folder" in err and "extension" not in err


def test_show_prints_the_lesson(capsys):
    code, out, _ = run(capsys, "show", "bank_river", "--step", "h0.weights")
    assert code == 0 and tracer.load_scenario("bank_river").description.strip().splitlines()[0] in out


def test_bank_money_says_what_it_shares_with_bank_river_and_the_sums_axis_is_named(capsys):
    title = tracer.load_scenario("bank_money").title
    assert "W_Q, W_K, W_V" in title and "the same weights" not in title
    code, out, _ = run(capsys, "show", "by_hand", "--step", "h0.sums")
    assert "one" not in out.split("h0.sums", 1)[1]
    assert "sum\\query" in out
