"""Layouts of arrays of records in global memory (fcl.memory.layouts): every layout prints what
the interpreter prints, on both targets, and the automatic choice is the one whose accesses
touch the fewest sectors per warp."""
import re
from pathlib import Path

import numpy as np
import pytest

import fcl
from fcl import pipeline
from fcl.memory.layouts import LAYOUTS
from tests.runs import run_cl, run_interp, session_for

PROGRAMS = Path(__file__).parent / "programs"

# One field read by consecutive work-items; then whole records gathered, 37 apart.
MIXED = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 64 (fn i => (i2d i, (i2d (i * 2), i2d (i * 3))))) ;
  xs <- forcePull<grid> (map fst ps) ;
  forceAndPrintDouble 4 (push<grid> xs) ;
  gs <- forcePull<grid> (generate 64 (fn i => let p = index ps ((i * 37) % 64) in
                                                addd (fst p) (addd (fst (snd p)) (snd (snd p))))) ;
  forceAndPrintDouble 64 (push<grid> gs)
}"""
# Only one field of each record is read, by consecutive work-items.
ONE_FIELD = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 300 (fn i => (i, (i * 2, i * 3)))) ;
  forceAndPrint 300 (push<grid> (map (fn p => fst (snd p)) ps))
}"""
# A particle update that reads its fields unevenly: one kernel reads the masses only, the next
# moves every particle (all fields), a third gathers pairs of particles.
UNEVEN = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 96 (fn i => (i2d i, (i2d (i % 7), i2d (1 + i % 3))))) ;
  ms <- forcePull<grid> (map (fn p => muld 2.0 (snd (snd p))) ps) ;
  forceAndPrintDouble 4 (push<grid> ms) ;
  qs <- forcePull<grid> (map (fn p => addd (fst p) (muld 0.5 (fst (snd p)))) ps) ;
  forceAndPrintDouble 4 (push<grid> qs) ;
  rs <- forcePull<grid> (generate 96 (fn i => let a = index ps ((i * 5) % 96) in
                                              let b = index ps ((i * 11) % 96) in
                                              subd (fst a) (snd (snd b)))) ;
  forceAndPrintDouble 8 (push<grid> rs)
}"""
# Mixed field types: no layout but SoA.
TYPES = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 40 (fn i => (i, i2d i))) ;
  forceAndPrint 40 (push<grid> (map (fn p => fst p + d2i (snd p)) ps))
}"""


def notes(text: str, layout: str = "auto", target: str = "gpu") -> list[str]:
    session = session_for(text)
    source = pipeline.compile_program(session, pipeline.main_root(session),
                                      pipeline.CompileOptions(target=target, layout=layout)).source
    return sorted(set(re.findall(r"record array (?:(?!\*/).)*", source)))


@pytest.mark.parametrize("layout", ["auto", *LAYOUTS])
@pytest.mark.parametrize("text", [MIXED, ONE_FIELD, UNEVEN, TYPES,
                                  (PROGRAMS / "records.fcl").read_text(),
                                  (PROGRAMS / "complex.fcl").read_text()],
                         ids=["mixed", "one-field", "uneven", "types", "records.fcl",
                              "complex.fcl"])
def test_every_layout_prints_what_the_interpreter_prints(text, layout):
    expected = run_interp(text)
    for target in ("gpu", "cpu"):
        assert run_cl(text, target=target, layout=layout)[0] == expected, (layout, target)


def test_gathered_whole_records_choose_aos_and_say_why():
    [said] = notes(MIXED)
    assert said.strip() == ("record array arr_1 (3 fields) as AoS (field f of record i at i * 3 "
                            "+ f): the 32-byte sectors its "
                            "warps touch, SoA 128, AoS 96, AoSoA 128")


def test_one_field_read_side_by_side_stays_soa():
    [said] = notes(ONE_FIELD)
    assert " as SoA (" in said
    sectors = dict(re.findall(r"(SoA|AoS|AoSoA) (\d+)", said.split(":", 1)[1]))
    assert int(sectors["SoA"]) <= int(sectors["AoSoA"]) < int(sectors["AoS"])


def test_fields_read_unevenly_stay_apart():
    # The masses alone, then positions and velocities side by side, outweigh the gathers.
    [said] = notes(UNEVEN)
    assert said.strip() == ("record array arr_1 (3 fields) as SoA (field f of record i in array "
                            "f at i): the 32-byte sectors its warps "
                            "touch, SoA 112, AoS 136, AoSoA 112")


def test_a_forced_layout_is_kept_and_fields_of_two_types_stay_apart():
    assert " as AoSoA (field f of record i at (i / 32) * 96 + 32f + i % 32):" in \
        notes(ONE_FIELD, "aosoa")[0]
    assert notes(TYPES) == [] and notes(TYPES, "aos") == []
    session = session_for(MIXED)
    source = pipeline.compile_program(session, pipeline.main_root(session),
                                      pipeline.CompileOptions(layout="aosoa")).source
    assert "arr_1_aosoa" in source and "arr_1_aos " not in source


def test_records_a_caller_gets_back_stay_soa():
    text = ("sig f : int -> Program <grid> [(double, double)]\n"
            "fun f n = forcePull<grid> (generate n (fn i => (i2d i, i2d (n - i))))")
    for layout in ("auto", "aos"):
        lib = fcl.load(text, layout=layout)
        a, b = lib.f(5)
        assert a.tolist() == [0, 1, 2, 3, 4] and b.tolist() == [5, 4, 3, 2, 1]
        assert "record array" not in lib.f.opencl
    with pytest.raises(ValueError, match="layout is auto, soa, aos, aosoa; not 'rows'"):
        fcl.load(text, layout="rows")


def test_the_cli_and_the_kernel_take_a_layout(tmp_path, capsys):
    from fcl.cli import main
    path = tmp_path / "p.fcl"
    path.write_text(MIXED)
    assert main(["compile", "--layout", "aosoa", str(path)]) == 0
    assert "as AoSoA" in capsys.readouterr().out
    from fcl.notebook import Workspace
    workspace = Workspace()
    workspace.settings.set("layout", "aos")
    assert workspace.settings.options().layout == "aos"
    with pytest.raises(fcl.errors.FCLError if hasattr(fcl, "errors") else Exception,
                       match="layout=auto"):
        workspace.settings.set("layout", "tiles")


def test_a_record_array_argument_is_read_as_given():
    text = ("sig norm : [(double, double)] -> Program <grid> [double]\n"
            "fun norm ps = forcePull<grid> (map (fn p => sqrt (addd (muld (fst p) (fst p)) "
            "(muld (snd p) (snd p)))) ps)")
    x, y = np.array([3.0, 6.0]), np.array([4.0, 8.0])
    for layout in LAYOUTS:
        assert fcl.load(text, layout=layout).norm((x, y)).tolist() == [5.0, 10.0]


@pytest.mark.parametrize("backend", ["opencl", "interp"])
def test_nbody_moves_the_bodies_as_numpy_does(backend):
    from bench.layouts import DT, bodies, reference
    given = bodies(64)
    expected = reference(given)
    layouts = ("auto", *LAYOUTS) if backend == "opencl" else ("auto",)
    for layout in layouts:
        library = fcl.load_file(Path(__file__).parents[1] / "bench" / "nbody.fcl",
                                backend=backend, block_size=32, layout=layout)
        (x, (y, z)), ((vx, (vy, vz)), m) = library.simulate(2, DT, given)
        assert np.allclose(np.stack([x, y, z], 1), expected[0]), layout
        assert np.allclose(np.stack([vx, vy, vz], 1), expected[1]), layout
        assert m.tolist() == given[1][1].tolist()


def test_costs_predict_the_program_in_each_layout():
    from fcl.explain import explain
    session = session_for(MIXED)
    explanation = explain(session, pipeline.main_root(session),
                          pipeline.CompileOptions(keep_result=False), gpu="h100")
    text = explanation.costs_bundle()["text/plain"]
    [line] = [line for line in text.splitlines() if line.startswith("Layouts of the arrays")]
    assert line.startswith("Layouts of the arrays of records (arr_1 as AoS, by the sectors their "
                           "warps touch): the program predicted on the H100 SXM5 with them as "
                           "SoA ")
    assert re.search(r"SoA [\d.]+ µs, AoS [\d.]+ µs, AoSoA [\d.]+ µs\.$", line)
    assert "record array arr_1 (3 fields) as AoS" in text  # the kernels' notes


def test_the_settings_panel_sets_the_layout():
    from fcl.notebook import Settings
    from fcl_kernel.widgets import settings_panel
    settings = Settings()
    layout = settings_panel(settings).children[-1]
    assert layout.description == "layout" and list(layout.options) == ["auto", *LAYOUTS]
    layout.value = "aosoa"
    assert settings.layout == "aosoa" and settings.options().layout == "aosoa"
