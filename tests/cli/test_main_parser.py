"""The command line parses a command with only that command's options built (``cli.main.build_parser(only=)``,
so ``index`` imports nothing of search): the same parser for it as the full one, the same top-level help,
and every other command still named (an unknown or misspelt one is refused with the same choices)."""

import contextlib
import io

import pytest
from chitragupta.cli.main import COMMANDS, build_parser, main


def _sub(parser, name):
    return parser._subparsers._group_actions[0].choices[name]


def test_the_top_level_help_is_the_full_parser_s():
    full = build_parser()
    for name in COMMANDS:
        assert build_parser(only=name).format_help() == full.format_help()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_gets_the_full_parser_s_options(name):
    full, one = _sub(build_parser(), name), _sub(build_parser(only=name), name)
    assert one.format_help() == full.format_help()
    assert [a.dest for a in one._actions] == [a.dest for a in full._actions]


@pytest.mark.parametrize("argv", [["serch", "x"], ["--nope"], ["index", "--nope"], ["-w", ".", "index"]])
def test_bad_command_lines_are_refused_alike(argv, capsys):
    with pytest.raises(SystemExit) as one:
        main(argv)
    err_one = capsys.readouterr().err
    with pytest.raises(SystemExit) as full:
        build_parser().parse_args(argv)
    assert one.value.code == full.value.code == 2
    assert err_one == capsys.readouterr().err


def test_the_top_level_options_still_answer():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--version"])
    assert out.getvalue().startswith("chitragupta ")


def test_index_runs_blas_on_one_thread_unless_told(tmp_path):
    """``index`` calls no BLAS: OpenBLAS is held to one thread before numpy is imported (its threads' start
    is all they would cost), never over a user's own setting."""
    import subprocess
    import sys

    from helpers import make_workspace, random_docs

    root = make_workspace(tmp_path, random_docs(3, 20))
    for given, want in ((None, "1"), ("3", "3")):
        code = ("import io, os, sys, contextlib\n"
                + ("os.environ.pop('OPENBLAS_NUM_THREADS', None)\n" if given is None
                   else f"os.environ['OPENBLAS_NUM_THREADS'] = {given!r}\n")
                + "from chitragupta.cli.main import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n"
                f"    rc = main(['index', '-w', {str(root)!r}])\n"
                "print(rc, os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert p.stdout.strip() == f"0 {want} True", (p.stdout, p.stderr)
