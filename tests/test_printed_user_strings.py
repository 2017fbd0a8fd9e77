"""What attnsim prints about user strings stays one printable line: an output file name with
control characters, a 1 000-character token in the diff's most-attended keys, a description."""
import subprocess
import sys


def attnsim(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_the_wrote_line_escapes_a_file_name(tmp_path):
    done = attnsim("export", "by_hand", "-o", "evil\x1b[2J.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\\x1b[2J" in done.stdout


def test_diff_keys_cut_a_huge_token(tmp_path):
    token = "w" * 1000
    (tmp_path / "long.toml").write_text(
        f'tokens = ["{token}", "b"]\nx = [[1, 0], [0, 1]]\n[weights]\nq = [[1, 0], [0, 1]]\n'
        'k = [[1, 0], [0, 1]]\nv = [[1, 0], [0, 1]]\n')
    done = attnsim("diff", str(tmp_path / "long.toml"))
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) < 400
