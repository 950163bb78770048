"""The silicon a map charges leakage on: the tiles' areas, synthesised several at a time."""

import pytest

from dashraker.mapping import silicon
from dashraker.mapping.config import load_config


@pytest.mark.slow  # four small syntheses, 45 s; the docs' examples synthesise two packaged tiles at once in make test
@pytest.mark.real_area
def test_tiles_synthesised_at_once_give_the_areas_of_one_at_a_time(tmp_path):
    """Two configurations of distinct small tiles (each the reference's own) synthesised on two processes: the
    figures are those of ``design_area`` run in this process, and a measured tile is not synthesised again."""
    from dashraker.fpga.area import design_area, is_measured

    configs = []
    for lanes in (1, 2):
        path = tmp_path / f"lanes{lanes}.yaml"
        path.write_text(f"design: baseline\nrows: 1\ncols: 1\nlanes: {lanes}\n")
        configs.append(load_config(path))
    together = silicon.resolve_all(configs, tmp_path / "together", progress=False, jobs=2)
    for config, resolved in zip(configs, together):
        alone = design_area(config.design, config.params, tmp_path / "alone", progress=False)["transistors"]
        assert resolved.tile_transistors == resolved.reference_tile_transistors == alone > 0
        assert is_measured(config.design, config.params, tmp_path / "together")
    folders = sorted(p.name for p in (tmp_path / "together").iterdir())
    assert len(folders) == 2
    again = silicon.resolve_all(configs, tmp_path / "together", progress=False, jobs=2)
    assert [c.tile_transistors for c in again] == [c.tile_transistors for c in together]
