"""Renamed spellings where users type them: refused in one line naming the new one, exit 2, before any work."""

import pytest

from dashraker.cli import main


@pytest.mark.parametrize("argv, message", [
    (["map", "no-trace", "--out", "o", "--scheduler", "greedy"], "dashraker map: error: --scheduler is now --dask"),
    (["study", "no-trace", "--scheduler", "tcp://h:1"], "dashraker study: error: --scheduler is now --dask"),
    (["cosim", "no-trace", "--layer", "fc", "--op", "bwd-input"],
     "dashraker cosim: error: --op bwd-input is now spelled bwd_input"),
    (["asic", "baseline", "--trace", "no-trace", "--op", "bwd-weight"],
     "dashraker asic baseline: error: --op bwd-weight is now spelled bwd_weight"),
])
def test_an_old_spelling_is_one_line_naming_the_new(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and err.startswith(message), err
    assert not list(tmp_path.iterdir())  # nothing made


def test_an_unknown_operation_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["cosim", "no-trace", "--layer", "fc", "--op", "bwd"])
    assert exit_.value.code == 2
    assert "invalid choice: 'bwd' (choose from fwd, bwd_input, bwd_weight)" in capsys.readouterr().err
