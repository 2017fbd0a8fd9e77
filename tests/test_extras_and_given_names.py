"""What a newcomer reads about the extras and the given matrices: `attnsim list` names the extra a
built-in needs, and the md worksheet names given matrices as the TUI does (W_Q (head 0))."""
import re

import tracer
from tracer.export import write_export
from tracer.scenario import files
from tui.cli import main


def listed(capsys) -> dict[str, str]:
    assert main(["list"]) == 0
    return dict(line.split("\t", 1) for line in capsys.readouterr().out.strip().splitlines())


def test_list_says_which_builtins_need_an_extra(capsys, monkeypatch):
    lines = listed(capsys)
    assert "[needs the models extra: pip install 'attnsim[models]'" in lines["induction"]
    assert not [name for name, text in lines.items() if "needs" in text and name != "induction"]
    monkeypatch.setitem(files.EXTRAS, "models", ("no_such_package_for_attnsim",))
    assert listed(capsys)["induction"].endswith("pip install 'attnsim[models]', not installed]")


def test_md_names_given_matrices_as_the_tui_does(tmp_path):
    for name, headings in (("gqa", ["W_Q (head 0)", "W_Q (head 3)", "W_K (group 0)", "W_K (group 1)",
                                    "W_V (group 1)", "W_O"]),
                           ("biases", ["W_Q (head 0)", "b_Q", "b_O"]), ("low_rank", ["W_V↓ (head 0)", "W_V↑ (head 0)"])):
        path = tmp_path / f"{name}.md"
        write_export(tracer.run(name), path)
        text = path.read_text(encoding="utf-8")
        given = re.findall(r"^### Given: (.+)$", text, flags=re.M)
        assert set(headings) <= set(given), (name, given)
        assert "weights." not in "\n".join(given) and "— given" not in text
