"""Progress: bars on a terminal only, a stage line with its estimate for every long phase, bars or not."""

from dashraker import progress


def test_bars_only_on_a_terminal(capsys, monkeypatch):
    for terminal in (False, True):
        monkeypatch.setattr(progress, "on_terminal", lambda terminal=terminal: terminal)
        for _ in progress.bar(range(3), desc="work"):
            pass
        err = capsys.readouterr().err
        assert ("work" in err and "3/3" in err) if terminal else err == ""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    for _ in progress.bar(range(3), desc="work", disable=True):
        pass
    assert capsys.readouterr().err == ""


def test_stage_lines_say_the_estimate_of_long_phases(capsys):
    progress.stage("map trace: 62 operations", 150)
    progress.stage("quick phase", progress.STAGE_SECONDS / 2)
    progress.stage("a phase of unknown length")
    assert capsys.readouterr().err.splitlines() == ["map trace: 62 operations (about 2.5 min)",
                                                    "a phase of unknown length"]
    assert [progress.duration(s) for s in (40, 210, 7200)] == ["40 s", "3.5 min", "2.0 h"]


def test_a_map_says_its_stage_without_bars(tmp_path, capsys, monkeypatch):
    """``map --no-progress`` off a terminal: no bar, and the mapping's stage line where its estimate is long."""
    from dashraker.mapping import runner
    from dashraker.mapping.config import load_config
    from dashraker.trace import record

    trace = record("mlp", "digits", steps=[1], samples=1, out=tmp_path / "mlp", progress=False, threads=1)
    capsys.readouterr()
    monkeypatch.setattr(runner, "SECONDS_PER_WORK", 1.0)  # every phase "long"
    runner.map_trace(trace, [load_config(None, "baseline")], jobs=1, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("map mlp: 8 operations x 1 configuration (baseline) on 1 process (about ") and "\r" not in err
