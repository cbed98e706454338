"""The compiler after lowering, as a list of steps: each a function from a program to a new one.

STEPS below is the design of the back end, in the order it runs. The program a step takes and
gives is the IL (a list of statements) up to `kernelize`, and a KernelProgram (host statements
that launch kernels, and the kernels) from it on; a kernel step makes a new kernel from each
kernel (kernels are never changed, see fcl.codegen.kernel). No step changes its input.

The IL steps run once per program (pipeline.lower); the back-end steps from `in place` on run
for each kind of device the program is shaped for (pipeline.compile_il, and again from the same
IL when a program shaped for a GPU runs on a CPU device). `run_steps` runs a part of the list,
telling an observer the program after each step: the verifier (`--verify-il`, after every step),
`fcl compile --after STEP` and the notebook's `%%steps` view.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from fcl.codegen.carried import register_blocks
from fcl.codegen.checkfirst import checks_first
from fcl.codegen.fuse import fuse
from fcl.codegen.kernel import Kernel, Launch
from fcl.codegen.kernelize import kernelize
from fcl.codegen.order import group_order
from fcl.codegen.reads import read_once
from fcl.codegen.reassociate import reassociate
from fcl.codegen.registers import registers
from fcl.codegen.serial import interchange, split
from fcl.codegen.shape import interface, number_checks, slots
from fcl.codegen.tiles import tiles
from fcl.codegen.unclamp import unclamp
from fcl.codegen.verify import verify_kernels
from fcl.codegen.widen import widen
from fcl.errors import FCLError
from fcl.il import ir
from fcl.il.passes import bound, propagate, prune, sweep
from fcl.il.stops import stops
from fcl.il.traverse import map_bodies
from fcl.il.unnest import unnest
from fcl.il.verify import HINT, verify
from fcl.memory.blocks import share_blocks
from fcl.memory.check import plan_problems
from fcl.memory.plan import memory_plan
from fcl.memory.relayout import lay_out
from fcl.memory.shortcircuit import short_circuit_all


@dataclass(frozen=True)
class KernelProgram:
    host: list[ir.Stmt]    # host statements, with a Launch of each kernel
    kernels: list[Kernel]


Program = list[ir.Stmt] | KernelProgram


@dataclass(frozen=True)
class Settings:
    block_size: int | None
    serial: bool = False  # work-group kernels that run better so are serial (a CPU device)
    home: str | None = None  # the source of the program's root, which kernel names leave out
    plan_memory: bool = True  # the memory steps (short-circuit, blocks); off:
    # every array its own buffer (`--no-short-circuit`, `%config short_circuit=off`)
    share_blocks: bool = True  # the `blocks` step (off under Oclgrind: see pipeline)
    layout: str = "auto"  # arrays of records: soa, aos, aosoa, or the fewest sectors (layouts)


@dataclass(frozen=True)
class Step:
    name: str
    purpose: str
    run: Callable[[Program, Settings], Program]


@dataclass(frozen=True)
class Fixpoint:
    """Steps run in turn, again until the program stops changing (at most `rounds` times)."""
    name: str
    purpose: str
    steps: tuple[Step, ...]
    rounds: int


def _il(fn: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> Callable[[Program, Settings], Program]:
    return lambda program, _settings: fn(program)  # type: ignore[arg-type]


def _each_kernel(fn: Callable[[Kernel], Kernel]) -> Callable[[Program, Settings], Program]:
    return lambda program, _settings: map_kernels(program, fn)


def _on_cpu(fn: Callable[[Kernel], Kernel]) -> Callable[[Program, Settings], Program]:
    return lambda program, settings: map_kernels(program, fn) if settings.serial else program


def _memory(fn: Callable[[list[ir.Stmt]], list[ir.Stmt]]
            ) -> Callable[[Program, Settings], Program]:
    return lambda program, settings: fn(program) if settings.plan_memory else program  # type: ignore[arg-type]


def _blocks(program: Program, settings: Settings) -> Program:
    assert isinstance(program, list)
    return share_blocks(program) if settings.plan_memory and settings.share_blocks else program


def _kernelize(il: Program, settings: Settings) -> Program:
    assert isinstance(il, list)
    host, kernels = kernelize(il, settings.block_size, settings.serial, settings.home)
    return KernelProgram(host, kernels)


OPTIMIZE = Fixpoint("optimize", "the passes below, in turn, until nothing changes", (
    Step("propagate", "variables that only name a constant or another such variable are "
         "replaced by it", _il(propagate)),
    Step("bound", "integer ranges decide comparisons and checks, and turn divisions by powers "
         "of two into shifts", _il(bound)),
    Step("prune", "a statement whose condition is known keeps only the branch that runs",
         _il(prune)),
    Step("sweep", "variables nothing depends on are dropped", _il(sweep)),
), rounds=4)

IL_STEPS: tuple[Step | Fixpoint, ...] = (
    OPTIMIZE,
    Step("stops", "a loop's checks of what no iteration changes are made once before it, and "
         "one of an index growing with the loop's variable where the loop stops short",
         _il(stops)),
    Step("unnest", "no expression nested too deeply for C: deep parts become variables",
         _il(unnest)),
)

def _layouts(program: Program, settings: Settings) -> Program:
    assert isinstance(program, list)
    return lay_out(program, settings.layout)[0]


BACKEND_STEPS: tuple[Step | Fixpoint, ...] = (
    Step("layouts", "an array of records in global memory is kept as an array per field (SoA), "
         "of whole records (AoS) or of tiles of 32 records (AoSoA), whichever the kernels' "
         "accesses touch the fewest sectors in", _layouts),
    Step("short-circuit", "a part copied into a larger array is built in its place; a copy "
         "nothing changes afterwards is a view of its source; a loop step changing a few "
         "elements writes them in place, as does a kernel mapping an array nothing reads "
         "after, and a work-group's step changing part of a local array",
         _memory(short_circuit_all)),
    Step("blocks", "arrays never live at once share a global block; an array a loop makes "
         "afresh each iteration is made once", _blocks),
    Step("kernelize", "grid-level loops become kernels; block-level loops are spread over a "
         "work-group's work-items", _kernelize),
    Step("interchange", "in a serial kernel, a work-item's reduction runs outside the loop "
         "over work-items, its accumulators in private memory", _each_kernel(interchange)),
    Step("split", "in a serial kernel, a loop over a tile's (row, column) becomes two loops, "
         "the column innermost, and what a row reads the same for every column is read "
         "before its loop", _each_kernel(split)),
    Step("reassociate", "in a serial kernel, a work-group's sum or scan of a run of ints (or "
         "its min, max, product, &, |, ^) is one loop in index order",
         _each_kernel(reassociate)),
    Step("fuse", "in a serial kernel, a loop whose elements the next loop reads once each is "
         "computed inside it: a reduction tree adds in registers", _each_kernel(fuse)),
    Step("order", "which tile coordinate neighbouring work-groups differ in: the one that "
         "reads nearer memory", _each_kernel(group_order)),
    Step("tiles", "2-D work-groups for kernels on tiles; local tiles read down their columns "
         "are padded", _each_kernel(tiles)),
    Step("registers", "local arrays each work-item only touches at its own index move to "
         "registers", _each_kernel(registers)),
    Step("interface", "the kernel's parameters, and its local memory sized over host values",
         _each_kernel(interface)),
    Step("slots", "local arrays never live at once share memory", _each_kernel(slots)),
    Step("widen", "index arithmetic over work-item ids in size_t where it provably fits",
         _each_kernel(widen)),
    Step("checks", "each run-time check gets its failure code in the kernel",
         _each_kernel(number_checks)),
    Step("unclamp", "past a check that returns when it fails, an index it clamped is read "
         "unclamped", _each_kernel(unclamp)),
    Step("reads", "an element of an array the kernel never writes, read again and again, is "
         "read once into a variable", _each_kernel(read_once)),
    Step("checks-first", "on a CPU, a loop's leading checks are made in a loop of their own "
         "first, which vectorizes; the loop then runs without them unless one fails",
         _on_cpu(checks_first)),
    Step("blocking", "in a serial kernel, a reduction into rows of private accumulators keeps "
         "blocks of rows in OpenCL vectors through the reduction's loop, and the running totals "
         "a loop adds them to through that loop",
         _each_kernel(register_blocks)),
)

STEPS = IL_STEPS + BACKEND_STEPS


def step_names() -> list[tuple[str, str]]:
    """(name, purpose) of every step in order, the steps of a fixpoint after it, indented."""
    names = []
    for step in STEPS:
        names.append((step.name, step.purpose))
        if isinstance(step, Fixpoint):
            names += [(f"  {inner.name}", inner.purpose) for inner in step.steps]
    return names


def all_step_names() -> list[str]:
    return [name.strip() for name, _ in step_names()]


FIXPOINTS = frozenset(step.name for step in STEPS if isinstance(step, Fixpoint))


Observer = Callable[[str, Program], None]


def run_steps(program: Program, steps: Sequence[Step | Fixpoint], settings: Settings,
              observe: Observer | None = None) -> Program:
    """The program after the steps; `observe(step name, program)` after each step run."""
    for step in steps:
        if isinstance(step, Fixpoint):
            shown = show_program(program)
            for _ in range(step.rounds):
                for inner in step.steps:
                    program = inner.run(program, settings)
                    if observe is not None:
                        observe(inner.name, program)
                after = show_program(program)  # a round's end is the next one's start
                if after == shown:
                    break
                shown = after
            if observe is not None:
                observe(step.name, program)
        else:
            program = step.run(program, settings)
            if observe is not None:
                observe(step.name, program)
    return program


def verifier(share: bool = True) -> Observer:
    """An observer that verifies the program after every step, and the memory plan after the
    memory steps (fcl.memory.check) against the program before them: the plan those steps
    made, merging blocks only where `share` (Settings.share_blocks) let them."""
    done: list[str] = []
    unplanned: list[list[ir.Stmt]] = []

    def check(name: str, program: Program) -> None:
        done.append(name)
        if isinstance(program, list):
            verify(name, program)
            if name == "layouts":
                unplanned[:] = [program]
            elif name == "blocks" and unplanned and program is not unplanned[0]:
                problems = plan_problems(unplanned[0], memory_plan(unplanned[0], share))
                if problems:
                    raise FCLError(f"internal: the memory plan after blocks is not valid: "
                                   f"{problems[0]}",
                                   hints=[HINT])
            return
        # Kernels before `interface` and `checks` are verified as those steps will make them.
        for later, complete in (("interface", interface), ("checks", number_checks)):
            if later not in done:
                program = map_kernels(program, complete)
        verify_kernels(program.host, program.kernels)
    return check


def map_kernels(program: Program, fn: Callable[[Kernel], Kernel]) -> KernelProgram:
    """The program with fn of each kernel, launched where the kernel was."""
    assert isinstance(program, KernelProgram)
    new = {id(kernel): fn(kernel) for kernel in program.kernels}
    return KernelProgram(relaunch(program.host, new), [new[id(k)] for k in program.kernels])


def relaunch(stmts: list[ir.Stmt], new: dict[int, Kernel]) -> list[ir.Stmt]:
    """Host statements launching new[id(k)] where they launched k."""
    out: list[ir.Stmt] = []
    for s in stmts:
        if isinstance(s, Launch) and id(s.kernel) in new:
            out.append(replace(s, kernel=new[id(s.kernel)]))
        else:
            out.append(map_bodies(s, lambda body: relaunch(body, new)) if ir.children(s) else s)
    return out


# ---- showing a program between steps ------------------------------------------------------------

def show_program(program: Program) -> str:
    if isinstance(program, list):
        return ir.show_stmts(program)
    parts = [ir.show_stmts(program.host)]
    parts += [show_kernel(kernel) for kernel in program.kernels]
    return "\n\n".join(parts)


def show_kernel(kernel: Kernel) -> str:
    """A kernel in the IL's notation, with what the steps decided about it."""
    facts = []
    if kernel.serial:
        facts.append("serial")
    if kernel.block_size is not None:
        rows = f" as {kernel.block_size // kernel.width} rows of {kernel.width}" \
            if kernel.width else ""
        facts.append(f"group {kernel.block_size}{rows}")
    if kernel.abortable:
        facts.append("abortable")
    lines = [f"kernel {kernel.name}({', '.join(v.name for v in kernel.params)})"
             + (f"  -- {', '.join(facts)}" if facts else "")]
    lines += [f"  constant {v.name} = {value}" for v, value in kernel.constants]
    for local in kernel.locals:
        each = " per work-item" if local.per_item else ""
        lines.append(f"  local {ir.elem_of(local.var)} {local.var.name}"
                     f"[{ir.show_expr(local.size)}]{each}")
    if kernel.slots and any(len(slot) > 1 for slot in kernel.slots):
        shared = ["/".join(a.var.name for a in slot) for slot in kernel.slots if len(slot) > 1]
        lines.append(f"  sharing memory: {', '.join(shared)}")
    lines += [f"  private {ir.elem_of(v)} {v.name}[{size}]" for v, size in kernel.private]
    lines.append(ir.show_block("body", kernel.body, 1))
    return "\n".join(lines)
