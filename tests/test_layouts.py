"""Layouts of arrays of records in global memory (fcl.memory.layouts): every layout prints what
the interpreter prints, on both targets, and the automatic choice is the one whose accesses
touch the fewest sectors per warp."""
import re
from pathlib import Path

import numpy as np
import pytest

import fcl
from bench.layouts import gathers_reference
from fcl import pipeline
from fcl.memory.layouts import LAYOUTS
from tests.runs import run_cl, run_interp, session_for

PROGRAMS = Path(__file__).parent / "programs"

# One field read by consecutive work-items; then whole records gathered, 37 apart.
MIXED = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 64 (fn i => (i2d i, (i2d (i * 2), i2d (i * 3))))) ;
  xs <- forcePull<grid> (map (fn p => muld 2.0 (fst p)) ps) ;
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
# Four kernels read one field each, side by side (SoA's way); one gathers whole records (AoS's):
# for records the compiler cannot count, an AoS copy for the gathers moves fewer sectors than
# either layout alone, its launch included. A second entry point's host reads a record, so the
# records stay SoA, and a kernel gathers them.
PARTICLES = (Path(__file__).parent.parent / "bench" / "particles.fcl").read_text()
COPY = PARTICLES + """
val main = do<grid> {
  a <- gathers 256 ;
  forceAndPrintDouble 8 (push<grid> a) ;
  b <- pinned 256 ;
  forceAndPrintDouble 8 (push<grid> b)
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
@pytest.mark.parametrize("text", [MIXED, ONE_FIELD, UNEVEN, COPY, TYPES,
                                  (PROGRAMS / "records.fcl").read_text(),
                                  (PROGRAMS / "complex.fcl").read_text()],
                         ids=["mixed", "one-field", "uneven", "copy", "types", "records.fcl",
                              "complex.fcl"])
def test_every_layout_prints_what_the_interpreter_prints(text, layout):
    expected = run_interp(text)
    for target in ("gpu", "cpu"):
        assert run_cl(text, target=target, layout=layout)[0] == expected, (layout, target)


def test_gathered_whole_records_choose_aos_and_say_why():
    [said] = notes(MIXED)
    assert said.strip() == ("record array arr_1 (3 fields) as AoS (field f of record i at i * 3 "
                            "+ f): the 32-byte sectors its kernels' "
                            "warps touch in a run, SoA 256, AoS 192, AoSoA 256")


def test_one_field_read_side_by_side_stays_soa():
    [said] = notes(ONE_FIELD)
    assert " as SoA (" in said
    sectors = dict(re.findall(r"(SoA|AoS|AoSoA) (\d+)", said.split(":", 1)[1]))
    assert int(sectors["SoA"]) <= int(sectors["AoSoA"]) < int(sectors["AoS"])


def test_fields_read_unevenly_stay_apart():
    # The masses alone, then positions and velocities side by side, outweigh the gathers.
    [said] = notes(UNEVEN)
    assert said.strip() == ("record array arr_1 (3 fields) as SoA (field f of record i in array "
                            "f at i): the 32-byte sectors its kernels' warps "
                            "touch in a run, SoA 336, AoS 408, AoSoA 336")


@pytest.mark.parametrize("backend", ["opencl", "interp"])
def test_a_copy_in_a_second_layout_is_made_where_it_pays(backend):
    lib = fcl.load(PARTICLES, backend=backend)
    for n in (2, 100, 1000):
        expected = gathers_reference(n)
        assert np.allclose(lib.gathers(n), expected[0]) and np.allclose(lib.pinned(n), expected[1])
    if backend == "interp":
        return
    said, reader, made = sorted({note.strip() for note in re.findall(
        r"record array (?:(?!\*/).)*", lib.gathers.opencl)})
    assert reader == said + " (this kernel reads the AoS copy)"
    assert made == "record array arr_2: its AoS copy, made after the kernel that writes it"
    assert said == (
        "record array arr_2 (3 fields) as SoA (field f of record i in array f at i): the 32-byte "
        "sectors its kernels' warps touch in a run, SoA 14,417,920, AoS 10,223,616, AoSoA "
        "14,417,920; with an AoS copy (field f of record i at i * 3 + f) that the kernel at line "
        "21 reads, 9,999,328, the 1,872,864 of its transposition included (a launch counts as "
        "300,000)")
    # The copy is made right after the kernel that writes the records; only the gathers read it.
    kernels = lib.gathers.opencl.split("__kernel")[1:]
    assert "arr_2_aos_copy" in kernels[1] and "arr_2_aos_copy" not in kernels[0]
    assert [k for k in kernels if "arr_2_aos_copy[" in k and " * 37" in k]
    for layout in LAYOUTS:  # a layout the user fixes has no copy
        assert "copy" not in fcl.load(PARTICLES, layout=layout).gathers.opencl
    said = fcl.load(PARTICLES).pinned.opencl
    assert " as SoA (field f of record i in array f at i, as the host reads it)" in said
    assert "with an AoS copy" in said and "the kernel at line 31 reads" in said


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


def layouts_section(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Layouts of the arrays"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return [lines[start]] + [line.split() for line in lines[start + 1:end]]


def test_costs_show_each_kernel_in_each_layout_and_why():
    from fcl.explain import explain
    session = session_for(MIXED)
    explanation = explain(session, pipeline.main_root(session),
                          pipeline.CompileOptions(keep_result=False), gpu="h100")
    head, header, *rows, program = layouts_section(explanation.costs_bundle()["text/plain"])
    assert head == ("Layouts of the arrays of records: arr_1 as AoS (32-byte sectors its warps "
                    "touch in a run: SoA 256, AoS 192, AoSoA 256), counting 1,048,576 for a size "
                    "the compiler cannot know. Each kernel on the H100 SXM5 with them in each "
                    "layout (sectors per warp load/store request, predicted time):")
    assert header == ["kernels", "of", "line", "SoA", "AoS", "AoSoA"]
    by_line = {row[0]: row[1:] for row in rows}
    # Line 4 reads one field of consecutive records: 8 sectors a request, or 24 in AoS.
    assert by_line["4"][0::3] == ["8/8", "24/8", "8/8"]
    assert program[:2] == ["the", "program"] and len(program) == 8  # three times, with units
    html = explanation.costs_bundle()["text/html"]
    assert "<table class='fcl-layouts'>" in html and "<th style='text-align:left'>3</th>" in html


def test_costs_show_the_plan_with_a_copy_as_chosen():
    explanation = fcl.load(PARTICLES).gathers.costs(1000, gpu="h100")
    head, header, *rows, _ = layouts_section(explanation.costs_bundle()["text/plain"])
    assert head.startswith("Layouts of the arrays of records: arr_2 as SoA with an AoS copy for "
                           "the kernel at line 21 (32-byte sectors its warps touch in a run: SoA "
                           "14,417,920, AoS 10,223,616, AoSoA 14,417,920, with the copy 9,999,328 "
                           "(1,872,864 to make it))")
    assert header[-2:] == ["as", "chosen"]
    by_line = {row[0]: row[1:] for row in rows}
    # As chosen, line 12 also runs the transposition: it reads 8 sectors and writes 24.
    assert by_line["12"][-5:-2] == ["–/8", "+", "8/24"]


def test_the_settings_panel_sets_the_layout():
    from fcl.notebook import Settings
    from fcl_kernel.widgets import settings_panel
    settings = Settings()
    layout = settings_panel(settings).children[-1]
    assert layout.description == "layout" and list(layout.options) == ["auto", *LAYOUTS]
    layout.value = "aosoa"
    assert settings.layout == "aosoa" and settings.options().layout == "aosoa"


def test_memory_diagrams_show_the_fields_of_each_element():
    from fcl.explain import explain
    session = session_for(MIXED)
    for layout, array in (("auto", "arr_1_aos"), ("aosoa", "arr_1_aosoa"), ("soa", "arr_2")):
        explanation = explain(session, pipeline.main_root(session),
                              pipeline.CompileOptions(keep_result=False, layout=layout))
        [(_, diagram)] = explanation.memory(kernel="kernel2", array=array)
        # The gather reads record (i * 37) % 64 of work-item i: work-item 1's is record 37.
        if layout == "auto":
            assert ("record array arr_1 (3 fields) as AoS: field f of record i at i * 3 + f; its "
                    "fields under each row") in diagram.text
            rows = [line for line in diagram.text.splitlines() if line.startswith("  field  ")]
            assert rows[0] == "  field  " + ("012" * 11)[:32]
            assert "element 111, field 0 of record 37: work-item 1<" in diagram.svg
        elif layout == "aosoa":
            # Tiles of 32 records, 96 elements each: record 37 is tile 1's 6th, its field 1 at
            # 96 + 32 + 5.
            assert "element 133, field 1 of record 37: work-item 1<" in \
                explanation.memory(kernel="kernel2")[0][1].svg
        else:
            assert "field 1 of record array arr_1 (3 fields) as SoA" in diagram.text
            assert "element 37, field 1 of record 37: work-item 1<" in diagram.svg
        assert diagram.svg.count('fill-opacity="0.3"') > 3  # the key and the tinted rows


def test_the_complex_kernel_computes_what_numpy_does():
    i = np.arange(256)
    c = (0.01 * i - 1.5) + 1j * (0.002 * i)
    z = np.zeros(256, complex)
    for _ in range(12):  # a point that has escaped stays put
        z = np.where(abs(z) ** 2 > 4.0, z, z * z + c)
    escaped = np.minimum(4.0, abs(z) ** 2)[::16]
    turned = (c * 1j)[::32]
    text = (PROGRAMS / "complex.fcl").read_text()
    for output in (run_interp(text), run_cl(text, target="gpu")[0], run_cl(text, target="cpu")[0]):
        first, second = ([float(x) for x in line.strip("[]").split(",")]
                         for line in output.splitlines())
        assert np.allclose(first, escaped, atol=1e-5)
        assert np.allclose(second, turned.real + turned.imag, atol=1e-5)
