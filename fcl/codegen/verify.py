"""Check that the host program and its kernels are well formed once kernels are cut and shaped.

The IL's checks (fcl.il.verify) extended to the back end's nodes: the host launches each kernel
once, with the values it passes defined; a kernel declares each name once and uses only its
parameters, local and private arrays and its own declarations; only kernel statements appear in
it (checks have become failure flags, numbered once each); and every barrier is reached by all
the work-items of a group or by none, which OpenCL requires.
"""
from __future__ import annotations

from fcl.codegen.blocking import RegisterBlocked
from fcl.codegen.kernel import LOCAL_IDS, FailFlag, Kernel, Launch, Special, StridedFor, WideInt
from fcl.il import ir
from fcl.il.traverse import names, sub_exprs
from fcl.il.verify import BLOCK, HOST, Verifier, Where

SPECIALS = frozenset(("local_id", "local_x", "local_y", "local_size", "group_id", "num_groups",
                      "global_id", "global_size"))
WORK_ITEM_IDS = LOCAL_IDS | {"global_id"}  # differ between the work-items of a group
NOT_IN_KERNELS = (ir.Print, ir.Benchmark, ir.Input, ir.Result, ir.Fail, ir.ParFor,
                  ir.Distribute, Launch)
# Each work-item runs the body of a kernel without a group loop on its own.
ITEMS = Where(False, "in a kernel of one work-item per iteration (it has no work-group loop)")


def verify_kernels(host: list[ir.Stmt], kernels: list[Kernel]) -> None:
    """Raise an internal FCLError at the first statement of the host program or of a kernel
    that is not well formed after kernelize and shape."""
    verifier = KernelVerifier(kernels)
    verifier.stmts(host, HOST)
    verifier.current = None
    for kernel in kernels:
        if kernel.name not in verifier.launched:
            verifier.fail(f"kernel {kernel.name} is never launched", kernel.span)
        KernelVerifier(kernels, kernel).check_kernel()


class KernelVerifier(Verifier):
    """The host program's verifier (kernel None), or one kernel's."""

    def __init__(self, kernels: list[Kernel], kernel: Kernel | None = None):
        super().__init__("kernelize and shape" if kernel is None
                         else f"kernelize and shape (kernel {kernel.name})")
        self.kernels = {id(k) for k in kernels}
        self.kernel = kernel
        self.launched: set[str] = set()
        # Work-item builtins: none on the host except in a launch's group count.
        self.specials: frozenset[str] = frozenset() if kernel is None else SPECIALS
        self.flags: list[int] = []  # failure codes seen
        # Variables whose values may differ between the work-items of a group: computed from
        # a work-item id, or changed where only some work-items run (a warp's number, say).
        self.varying: set[str] = set()

    def check_kernel(self) -> None:
        k = self.kernel
        assert k is not None
        # Defined at the kernel's start: arguments, local memory, private arrays.
        for var in [*k.params, *(v for v, _ in k.constants), *(local.var for local in k.locals),
                    *(v for v, _ in k.private)]:
            self.declare(var)
        self.stmts(k.body, ITEMS if k.group_var is None else BLOCK)
        self.current = None
        if sorted(self.flags) != list(range(1, len(k.fails) + 1)):
            self.fail(f"failure codes {sorted(self.flags)} do not number the kernel's "
                      f"{len(k.fails)} checks once each", k.span)
        params = {p.name for p in k.params}
        for local in k.locals:
            # A per-work-item slice's size is computed in the kernel, before anything else.
            if local.per_item and not names(local.size) <= params:
                self.fail(f"the size of `{local.var.name}` uses values the kernel does not take",
                          local.span)

    # ---- expressions
    def other_expr(self, e: ir.Expr) -> ir.ILType:
        if isinstance(e, Special):
            if e.name not in self.specials or e.type != ir.INT:
                self.fail(f"the work-item builtin {e.name} where it is not defined")
            return e.type
        if isinstance(e, WideInt) and self.kernel is not None:
            # `wide` is `expr` with definitions expanded: both are int arithmetic in scope.
            self.expect(e.expr, ir.INT, "an index computed in size_t")
            self.expect(e.wide, ir.INT, "an index computed in size_t")
            return e.type
        self.fail(f"a {type(e).__name__} expression {self.place()}")

    # ---- statements
    def stmt(self, s: ir.Stmt, where: Where) -> None:
        if self.kernel is None and isinstance(s, (ir.ParFor, ir.Distribute)):
            self.fail("a parallel loop left on the host: it should have become a kernel")
        if self.kernel is not None and isinstance(s, NOT_IN_KERNELS):
            self.fail(f"a {type(s).__name__} statement inside a kernel")
        if isinstance(s, ir.While) and s.level == "block" and where.no_barrier is not None:
            self.fail(f"a work-group's while loop (its test has barriers) {where.no_barrier}")
        if self.kernel is not None and isinstance(s, (ir.Declare, ir.Assign)):
            value = s.init if isinstance(s, ir.Declare) else s.value
            if self.differs(value) or (isinstance(s, ir.Assign) and where.no_barrier is not None):
                self.varying.add(s.var.name)
        super().stmt(s, where)

    def differs(self, e: ir.Expr) -> bool:
        """Whether e may have different values in the work-items of a group."""
        return mentions_ids(e, WORK_ITEM_IDS) or bool(names(e) & self.varying)

    def allocate(self, s: ir.Alloc, where: Where) -> None:
        if self.kernel is None:
            if s.level != "grid":
                self.fail(f"{s.level}-level memory allocated on the host")
            return super().allocate(s, where)
        # Shared local memory keeps its allocation, to mark where its lifetime starts.
        shared = {local.var.name for local in self.kernel.locals if not local.per_item}
        if s.level == "grid" or s.var.name not in shared:
            self.fail(f"`{s.var.name}` is allocated in a kernel but is not its local memory")
        self.use(s.var)

    def visit_Launch(self, s: Launch, where: Where) -> None:
        if self.kernel is not None:
            return self.visit_other(s, where)
        self.launch(s)

    def visit_RegisterBlocked(self, s: RegisterBlocked, where: Where) -> None:
        self.stmts(s.body, where)  # the nest it prints otherwise

    def visit_StridedFor(self, s: StridedFor, where: Where) -> None:
        if self.kernel is None:
            return self.visit_other(s, where)
        for part, what in ((s.start, "start"), (s.bound, "bound"), (s.step, "step")):
            self.expect(part, ir.INT, f"a loop's {what}")
        self.expect_var(s.var, ir.INT, "a loop's variable")
        self.block(s.body, self.inside(s, where), s.var)

    def visit_FailFlag(self, s: FailFlag, where: Where) -> None:
        if self.kernel is None:
            return self.visit_other(s, where)
        self.expect(s.cond, ir.BOOL, "a check's condition")
        if s.code in self.flags or not 1 <= s.code <= len(self.kernel.fails):
            self.fail(f"failure code {s.code} is used twice or out of range 1.."
                      f"{len(self.kernel.fails)}")
        self.flags.append(s.code)

    def visit_other(self, s: ir.Stmt, where: Where) -> None:
        self.fail(f"a {type(s).__name__} statement {self.place()}")

    def place(self) -> str:
        return "on the host" if self.kernel is None else "in a kernel"

    def inside(self, s: ir.Stmt, where: Where) -> Where:
        """Inside a kernel, code that some work-items of a group run and others do not, or run
        a different number of times, is no place for a barrier."""
        if isinstance(s, StridedFor) and mentions_ids(s.start, WORK_ITEM_IDS):
            return Where(False, "inside a loop over work-items")
        if isinstance(s, ir.If) and mentions_ids(s.cond, LOCAL_IDS):
            return Where(False, "inside a branch on the work-item's local id")
        if isinstance(s, ir.If) and self.differs(s.cond):
            which = ", ".join(f"`{n}`" for n in sorted(names(s.cond) & self.varying))
            return Where(False, f"inside a branch on {which}, which differs between work-items")
        if isinstance(s, ir.SeqFor) and self.kernel is not None and self.differs(s.bound):
            self.varying.add(s.var.name)
            return Where(False, "inside a loop whose bound differs between work-items")
        if isinstance(s, ir.While) and self.kernel is not None and s.level != "block":
            return Where(False, "inside a while loop each work-item runs on its own")
        return super().inside(s, where)

    def launch(self, s: Launch) -> None:
        kernel = s.kernel
        if id(kernel) not in self.kernels or kernel.name in self.launched:
            self.fail(f"kernel {kernel.name} is launched twice or is not a kernel of the program")
        self.launched.add(kernel.name)
        self.specials = frozenset(("local_size",))  # work-groups of the launch's size
        self.expect(s.groups, ir.INT, "a launch's number of work-groups")
        self.specials = frozenset()
        for param in kernel.params:  # the host passes their values
            if self.visible.get(param.name) != param.type:
                self.fail(f"kernel {kernel.name} takes `{param.name}` "
                          f"({ir.show_type(param.type)}), which is not defined at its launch")
        # Local memory is sized by the host at the launch, over the group loop's iterations.
        outer = dict(self.visible)
        if kernel.group_var is not None:
            self.visible[kernel.group_var.name] = kernel.group_var.type
        for local in kernel.locals:
            self.expect(local.size, ir.INT, f"the size of local array `{local.var.name}`")
        self.visible = outer


def mentions_ids(e: ir.Expr, ids: frozenset[str]) -> bool:
    """Whether e reads one of the work-item builtins `ids` (an index in size_t included)."""
    if isinstance(e, Special):
        return e.name in ids
    return any(mentions_ids(part, ids) for part in sub_exprs(e))
